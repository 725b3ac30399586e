"""sprue.numpy: numpy's API over sprue.lax (`import sprue.numpy as jnp`).

Every function works on traced arrays (building a jaxpr) and eagerly on numpy arrays and scalars
(running the primitives' numpy reference rules, returning numpy arrays), with numpy 2's dtype
promotion (Python scalars weak, NEP 50) and broadcasting. Importing this package also gives traced
arrays their operators and methods (`x + y`, `x[i]`, `x.T`, `x.sum()`, `x.at[i].set(v)`).
"""
from __future__ import annotations

import sys as _sys

import numpy as _np

from sprue.base.eager_array import EagerArray  # noqa: F401  (the type of eager results: ndarrays with .at)
from sprue.base.errors import missing_attribute as _missing_attribute
from sprue.numpy import _avals, _promote
from sprue.numpy._avals import SprueIndexError  # noqa: F401
from sprue.numpy._creation import *  # noqa: F401,F403
from sprue.numpy._creation import SCALAR_TYPES as _SCALAR_TYPES
from sprue.numpy._indexing import put_along_axis, take, take_along_axis  # noqa: F401
from sprue.numpy._lax_dynamic import install_lax_hooks as _install_lax_hooks
from sprue.numpy._linalg import *  # noqa: F401,F403
from sprue.numpy._nonzero import argwhere, compress, extract, flatnonzero, nonzero, where  # noqa: F401  (data-dependent sizes)
from sprue.numpy._reductions import *  # noqa: F401,F403
from sprue.numpy._shape import *  # noqa: F401,F403
from sprue.numpy._sorting import *  # noqa: F401,F403
from sprue.numpy._tracer_methods import install_dim_operators as _install_dim_operators
from sprue.numpy._tracer_methods import install_tracer_methods as _install_tracer_methods
from sprue.numpy._ufuncs import *  # noqa: F401,F403
from sprue.numpy._ufuncs import _funcs as _ufunc_table

globals().update(_ufunc_table)
globals().update(_SCALAR_TYPES)
_install_tracer_methods()     # traced arrays get their operators and methods (x + y, x[i], x.sum())
_install_dim_operators()      # sizes (x.shape[0]) in arithmetic with arrays
_install_lax_hooks()          # sprue.lax's dynamic_slice and filter's vjp check sizes at run time with ours

# constants and dtype utilities, as numpy's
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
euler_gamma = _np.euler_gamma
newaxis = None
dtype = _np.dtype
finfo = _np.finfo
iinfo = _np.iinfo
issubdtype = _np.issubdtype
promote_types = _np.promote_types
floating = _np.floating
integer = _np.integer
signedinteger = _np.signedinteger
unsignedinteger = _np.unsignedinteger
number = _np.number
inexact = _np.inexact
complexfloating = _np.complexfloating
complex_ = _SCALAR_TYPES["complex128"]
bool_ = _SCALAR_TYPES["bool_"]


def result_type(*arrays_and_dtypes):
    """numpy.result_type with sprue's operands (Python scalars weak)."""
    ops = [x if not isinstance(x, (_np.dtype, type, str)) else _np.zeros((), _np.dtype(x)) for x in arrays_and_dtypes]
    return _promote.result_type(*_promote.operands("result_type", *ops))[0]


def can_cast(from_, to, casting="safe"):
    src = _avals.aval(from_).dtype if not isinstance(from_, (_np.dtype, type, str)) else from_
    return _np.can_cast(_np.dtype(src), _np.dtype(to), casting)

from sprue.numpy import fft, linalg  # noqa: E402,F401  (last: they build on the names above)
from sprue.numpy._more import *  # noqa: E402,F401,F403  (compositions of the names above)
from sprue.numpy._more_stats import *  # noqa: E402,F401,F403
from sprue.numpy._numpy_dispatch import install_numpy_dispatch as _install_numpy_dispatch  # noqa: E402

_install_numpy_dispatch(_sys.modules[__name__])   # numpy's functions on traced arrays run the ones above


def __getattr__(name: str):
    raise _missing_attribute('sprue.numpy', name, globals(), 'numpy')
