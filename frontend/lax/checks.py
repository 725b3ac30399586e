"""check: a run-time assertion, for the conditions tracing cannot decide (two sizes known only at
run time that must agree). `check[message=...] ok` with `ok` a bool scalar and no outputs.

Eagerly, a false `ok` raises SprueValueError(message). Compiled, the function carries a status:
the first failed check's code is returned through the C entry point and the runtime raises the
same error; code after a failed check keeps to safe sizes (sprue.numpy arranges that), so no
memory outside an array is ever touched."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import SprueTypeError, SprueValueError
from ._rules import define


def _check_rule(ok, *, message):
    if ok.ndim or not dtypes.is_bool(ok.dtype):
        raise SprueTypeError(f"check needs a bool scalar condition, got {ok.str_short()}")
    return []


def _check_impl(ok, *, message):
    if not bool(np.asarray(ok)):
        raise SprueValueError(message)
    return []


check_p = define("check", _check_rule, _check_impl, multiple_results=True)
