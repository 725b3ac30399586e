"""check: a run-time assertion, for the conditions tracing cannot decide (two sizes known only at
run time that must agree). `check[message=...] ok` with `ok` a bool scalar and no outputs.

Eagerly, a false `ok` raises SprueValueError(message). Compiled, the function carries a status:
the first failed check's code is returned through the C entry point and the runtime raises the
same error; code after a failed check keeps to safe sizes (sprue.numpy arranges that), so no
memory outside an array is ever touched."""
from __future__ import annotations

import numpy as np

from sprue.base import dtypes
from sprue.base.errors import SprueTypeError, SprueValueError
from sprue.interp.ad_util import aval_of, batch_rules, cost_rules, jvp_rules, vjp_rules
from sprue.interp.cost import free
from sprue.lax._rules import define
from sprue.lax.reductions import reduce_and


def _check_rule(ok, *, message):
    if ok.ndim or not dtypes.is_bool(ok.dtype):
        raise SprueTypeError(f"check needs a bool scalar condition, got {ok.str_short()}")
    return []


def _check_impl(ok, *, message):
    if not bool(np.asarray(ok)):
        raise SprueValueError(message)
    return []


check_p = define("check", _check_rule, _check_impl, multiple_results=True)


def check(ok, message: str):
    """Assert `ok` (a bool scalar) at run time; a failure raises SprueValueError(message)."""
    check_p.bind(ok, message=str(message))


# == transformation rules (tables in sprue.interp.ad_util): jvp, vjp, batching, cost ===============
# check has a bool operand and no results: nothing to differentiate; batched, every batch
# element's condition must hold (the message is the same for all of them).


def _check_jvp(primals, tangents, *, message):
    check_p.bind(*primals, message=message)
    return [], []


def _check_batch(args, dims, *, message):
    (ok,), (d,) = args, dims
    check_p.bind(reduce_and(ok, tuple(range(aval_of(ok).ndim))) if d is not None else ok, message=message)
    return [], []


jvp_rules[check_p], batch_rules[check_p], cost_rules[check_p] = _check_jvp, _check_batch, free
vjp_rules[check_p] = lambda cts, primals, outs, *, message: [None]
