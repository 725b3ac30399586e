"""Every transformation on sprue.numpy, systematically, over the cases of numpy_cases that take
float64 arrays (the checks themselves are in tests/helpers/transform_check.py):

1. test_jvp: sprue.jvp vs central finite differences of the numpy reference (float64 outputs);
2. test_vjp: the dot-product identity <ct, J t> == <vjp(ct), t> between sprue.jvp and sprue.vjp;
3. test_vmap / test_vmap_unbatched_rest / test_vmap_last_axis: sprue.vmap over 3 stacked input
   draws (in_axes 0; 0 for the first argument and None for the others; -1 with out_axes -1) vs
   a loop of the unbatched jaxpr and numpy;
4. test_hvp: second derivatives (grad of grad, jvp of grad, grad of jvp, hessian) vs FD of grad;
5. test_compiled_grad: sprue.qjit(sprue.grad(f)) equals the eager sprue.grad(f); likewise
   test_compiled_jvp_vmap for qjit(jvp) and qjit(vmap);
6. compositions: test_jacobians (jacfwd = vmap of jvp vs jacrev = vmap of vjp, and J t vs jvp),
   test_per_example_grad (vmap of grad), test_grad_of_vmap (grad through batched primitives).

Inputs with nan/inf are replaced by finite values for the derivative checks (transform_check.
finite_args); vmap runs on the cases as they are, and also on up to 4 cases per function among
those without float64 inputs.

A check that does not apply to a case (integer or boolean outputs, non-finite values, a piecewise
function at a kink or jump) skips it with the reason (`pytest -rs` lists them); output elements
left out of an FD comparison because the reference has a kink or jump there are reported as a
warning.
"""
import warnings

import numpy as np
import pytest

from tests.helpers import transform_check as tc
from tests.helpers.numpy_cases import CASES

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

F64_CASES = tc.float64_cases()
_f64_names = {c.name for c in F64_CASES}


def _per_name(cases, n):
    """At most n cases per function name (the first ones: deterministic)."""
    count, out = {}, []
    for c in cases:
        b = tc.base_name(c)
        if count.get(b, 0) < n:
            count[b] = count.get(b, 0) + 1
            out.append(c)
    return out


# the dot-product identity also runs on the cases whose float inputs are all float32 (to rounding of
# float32; it checks that cotangents keep their primal's dtype); vmap also runs on up to 4 cases per
# function among those without float64 inputs (integers, booleans, float32). The whole file runs in
# ~25 s on 2 cores; the compiled tests cost ~50 ms of compilation each: keep them few.
F32_CASES = _per_name([c for c in CASES if c.name not in _f64_names and any(tc._is_float(a) for a in c.args)], 4)
_OTHER = [c for c in CASES if c.name not in _f64_names and c.args]
VMAP_CASES = F64_CASES + _per_name(_OTHER, 4)
MULTI_ARG_CASES = [c for c in F64_CASES + _per_name(_OTHER, 2) if len(c.args) >= 2]
# variants and compositions: up to 4 float64 cases per function
F64_FEW = _per_name(F64_CASES, 4)

SMOOTH_UNARY = ["sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "arcsin", "arccos",
                "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "sqrt", "cbrt", "square",
                "reciprocal", "negative", "deg2rad"]
SMOOTH_BINARY = ["add", "subtract", "multiply", "divide", "arctan2", "hypot", "logaddexp", "float_power"]
HVP_CASES = ([tc.BY_NAME[f"{n}[f64[{s}]]"] for n in SMOOTH_UNARY for s in ("7", "3,4")]
             + [tc.BY_NAME[f"{n}[f64[3,4],f64[3,4]]"] for n in SMOOTH_BINARY]
             + [tc.BY_NAME[n] for n in ["sum[f64[2,3,4],axis=0]", "prod[f64[2,3,4],axis=-1]", "mean[f64[2,3,4],axis=None]",
                                        "var[f64[2,3,4],axis=(0, 2)]", "dot[f64[2,3],f64[3,4]]",
                                        "cumprod[f64[2,3,4],axis=1]", "reshape[f64]"]])
HVP_MODES = ["rev-rev", "fwd-rev", "rev-fwd", "hessian"]

COMPILED_NAMES = ["sin", "exp", "log", "tanh", "sqrt", "multiply", "divide", "power", "hypot", "logaddexp", "sum",
                  "mean", "prod", "max", "var", "cumsum", "matmul", "dot", "reshape", "transpose", "concatenate",
                  "getitem", "sort", "einsum"]


def _first_with_float_output(name):
    for c in F64_CASES:
        if tc.base_name(c) == name and any(np.asarray(r).dtype.kind == "f" for r in tc.leaves_of(tc.numpy_ref(c))):
            ref_ok = all(np.all(np.isfinite(r)) for r in tc.leaves_of(tc.numpy_ref(c))
                         if np.asarray(r).dtype.kind == "f")
            if ref_ok and all(np.all(np.isfinite(a)) for a in c.args if np.asarray(a).dtype.kind == "f"):
                return c
    raise LookupError(name)


COMPILED_CASES = [_first_with_float_output(n) for n in COMPILED_NAMES]


# Known, accepted deviations: (test, case name) -> reason. They run as strict xfails, so a change
# of behaviour shows up.
KNOWN = {
    ("jvp", "std[f64[2,3,4],scalar]"): "std of a single element is sqrt(0): its jvp is nan (0 * inf), as in JAX,"
                                       " while the function is constant (FD 0)",
}


def _params(cases, test):
    return [pytest.param(c, id=c.name, marks=pytest.mark.xfail(reason=KNOWN[test, c.name], strict=True))
            if (test, c.name) in KNOWN else pytest.param(c, id=c.name) for c in cases]


def _ids(c):
    return c.name


def _run(check, *args, **kw):
    try:
        return check(*args, **kw)
    except tc.Excluded as e:
        pytest.skip(f"{args[0].name}: {e}")


@pytest.mark.parametrize("case", _params(F64_CASES, "jvp"))
def test_jvp(case):
    compared, excluded = _run(tc.check_jvp, case)
    if excluded:
        warnings.warn(f"{case.name}: {excluded} of {compared + excluded} float64 output elements left out of the"
                      f" FD comparison (kink or jump of the reference within h)", UserWarning)


@pytest.mark.parametrize("case", F64_CASES + F32_CASES, ids=_ids)
def test_vjp(case):
    _run(tc.check_vjp, case)


@pytest.mark.parametrize("case", VMAP_CASES, ids=_ids)
def test_vmap(case):
    _run(tc.check_vmap, case)


@pytest.mark.parametrize("case", MULTI_ARG_CASES, ids=_ids)
def test_vmap_unbatched_rest(case):
    _run(tc.check_vmap, case, unbatched_rest=True)


@pytest.mark.parametrize("case", F64_FEW, ids=_ids)
def test_vmap_last_axis(case):
    _run(tc.check_vmap, case, last_axis=True)


@pytest.mark.parametrize("mode", HVP_MODES)
@pytest.mark.parametrize("case", HVP_CASES, ids=_ids)
def test_hvp(case, mode):
    _run(tc.check_hvp, case, mode)


@pytest.mark.parametrize("case", COMPILED_CASES, ids=_ids)
def test_compiled_grad(case):
    _run(tc.check_compiled_grad, case)


@pytest.mark.parametrize("case", COMPILED_CASES[::3], ids=_ids)
def test_compiled_jvp_vmap(case):
    _run(tc.check_compiled_jvp_vmap, case)


@pytest.mark.parametrize("case", _params(F64_CASES, "jacobians"))
def test_jacobians(case):
    _run(tc.check_jacobians, case)


@pytest.mark.parametrize("case", F64_FEW, ids=_ids)
def test_per_example_grad(case):
    _run(tc.check_per_example_grad, case)


@pytest.mark.parametrize("case", F64_FEW, ids=_ids)
def test_grad_of_vmap(case):
    _run(tc.check_grad_of_vmap, case)
