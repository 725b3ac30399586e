"""Data-dependent shapes (issue 7): results whose size is computed at run time — boolean-mask
indexing with a traced mask, nonzero, flatnonzero, argwhere, extract, compress — built on the
`filter` primitive, whose count result binds a fresh dimension. Checked against numpy at several
sizes and numbers of true entries (none, some, all): eagerly, compiled once for static shapes and
for abstracted axes; the fresh size used afterwards; the jaxprs; the transformation rules; the
errors."""
from __future__ import annotations

import re

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax
from sprue.base.errors import ConcretizationError, SprueError, SprueTypeError, SprueValueError, UnsupportedError
from sprue.ir.core import ShapedArray
from sprue.numpy._indexing import getitem
from tests.helpers.arrays import agree

SIZES = (0, 1, 4, 9)
FRACTIONS = (0.0, 0.5, 1.0)   # of true entries: none, some, all


def rng(*key) -> np.random.Generator:
    return np.random.default_rng(abs(hash(key)) % 2**32)


def data(shape, frac: float, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(x, mask): x normal, the mask true on about `frac` of the entries (exactly none or all for
    0 and 1)."""
    g = rng(shape, frac, seed)
    x = g.normal(size=shape)
    if frac == 0.0:
        return x, np.zeros(shape, bool)
    if frac == 1.0:
        return x, np.ones(shape, bool)
    return x, g.random(shape) < frac


def signed(shape, frac: float, seed=0) -> np.ndarray:
    """An array whose positive entries are where data()'s mask is true."""
    x, m = data(shape, frac, seed)
    return np.where(m, np.abs(x) + 0.1, -np.abs(x) - 0.1)


def check_all(fn, ref, calls, axes=None):
    """fn eagerly, compiled (qjit) and compiled with abstracted axes (when given) agrees with ref on
    every argument tuple; each compiled version compiles once per distinct input shape."""
    plain = sprue.qjit(fn)
    abstract = sprue.qjit(fn, abstracted_axes=axes) if axes is not None else None
    shapes = set()
    for args in calls:
        want = ref(*args)
        agree(fn(*args), want)
        agree(plain(*args), want)
        if abstract is not None:
            agree(abstract(*args), want)
        shapes.add(tuple(np.shape(a) for a in args))
    assert plain.compile_count == len(shapes)
    if abstract is not None:
        assert abstract.compile_count == 1
    return plain, abstract


# -- the primitive ----------------------------------------------------------------------------------
def test_filter_primitive_eagerly_is_numpy_compress():
    x, m = data((5, 3), 0.5)
    count, (y, z) = lax.filter(m[:, 0], x, x[:, 1] * 2)
    assert count == np.count_nonzero(m[:, 0])
    agree(y, np.compress(m[:, 0], x, axis=0))
    agree(z, np.compress(m[:, 0], x[:, 1] * 2))
    count, (y,) = lax.filter(m[0], x, axis=1)
    agree(y, np.compress(m[0], x, axis=1))


def test_filter_jaxpr_has_one_fresh_size_for_all_results():
    text = str(sprue.make_jaxpr(lambda x: lax.filter(x > 0, x, x * 2.0))(np.ones(4)))
    m = re.search(r"\n    (\w+):i64\[\] (\w+):f64\[\1\] (\w+):f64\[\1\] = filter\[axis=0\] \w+ a \w+\n", text)
    assert m, text
    assert text.endswith(f"in ({m[1]}, {m[2]}, {m[3]}) }}"), text


def test_filter_along_another_axis_keeps_the_other_sizes():
    text = str(sprue.make_jaxpr(lambda x: lax.filter(x[0] > 0, x, axis=1)[1][0])(ShapedArray(("n", 3), np.float64)))
    assert re.search(r"(\w+):i64\[\] \w+:f64\[a,\1\] = filter\[axis=1\]", text), text


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("frac", FRACTIONS)
def test_filter_compiled_with_several_operands(n, frac):
    x, m = data((n, 2), frac)
    f = sprue.qjit(lambda m, x: lax.filter(m, x, x[:, 0] * 3.0, jnp.arange(x.shape[0]))[1],
                   abstracted_axes=({0: "n"}, {0: "n"}))
    agree(tuple(f(m[:, 0], x)), (x[m[:, 0]], x[m[:, 0], 0] * 3.0, np.flatnonzero(m[:, 0])))


def test_filter_shape_rule_errors():
    with pytest.raises(SprueTypeError, match=r"filter: the mask must be a 1-d bool array, got f64\[3\]"):
        lax.filter(np.ones(3), np.ones(3))
    with pytest.raises(SprueTypeError, match=r"filter: the mask must be a 1-d bool array, got bool\[3,1\]"):
        lax.filter(np.ones((3, 1), bool), np.ones(3))
    with pytest.raises(SprueValueError, match=r"filter: the mask bool\[3\] does not fit axis 0 of f64\[4\]"):
        lax.filter(np.ones(3, bool), np.ones(4))
    with pytest.raises(SprueValueError, match=r"filter: axis 1 is out of bounds for f64\[3\]"):
        lax.filter(np.ones(3, bool), np.ones(3), axis=1)
    with pytest.raises(SprueValueError, match="at least one array operand"):
        lax.filter(np.ones(3, bool))


# -- x[mask] ----------------------------------------------------------------------------------------
MASK_INDEXES = {  # name: (index builder from the mask, x's shape, the mask's shape)
    "full": (lambda m: m, (3, 4), (3, 4)),
    "full-1d": (lambda m: m, (7,), (7,)),
    "rows": (lambda m: m, (5, 3), (5,)),
    "prefix-2d": (lambda m: m, (2, 3, 4), (2, 3)),
    "columns": (lambda m: (slice(None), m), (3, 5), (5,)),
    "rows-then-slice": (lambda m: (m, slice(1, None)), (5, 3), (5,)),
    "ellipsis-last": (lambda m: (Ellipsis, m), (2, 3, 4), (4,)),
    "int-then-mask": (lambda m: (1, m), (2, 5), (5,)),
    "int-newaxis-mask": (lambda m: (0, None, m), (2, 3, 4), (3,)),   # not adjacent: count first
    "newaxis-int-mask": (lambda m: (None, 0, m), (2, 3, 4), (3,)),   # adjacent: in place
    "mask-slice-int": (lambda m: (m, slice(None), 2), (4, 3, 5), (4,)),  # not adjacent
    "slice-mask-int": (lambda m: (slice(None), m, 0), (2, 3, 4), (3,)),  # adjacent
    "int-slice-mask": (lambda m: (1, slice(None), m), (2, 3, 4, 2), (4,)),  # not adjacent
    "mask-newaxis": (lambda m: (m, None), (4, 3), (4,)),
}


@pytest.mark.parametrize("name", list(MASK_INDEXES))
def test_mask_indexing_matches_numpy(name):
    build, xshape, mshape = MASK_INDEXES[name]
    f = sprue.qjit(lambda x, m: x[build(m)])
    for frac in FRACTIONS:
        for seed in range(2):
            x, _ = data(xshape, 0.5, seed)
            _, m = data(mshape, frac, seed)
            want = x[build(m)]
            agree(f(x, m), want)
            agree(getitem(x, build(m)), want)     # eagerly: numpy's own index rules
    assert f.compile_count == 1


@pytest.mark.parametrize("n", SIZES)
def test_x_of_x_positive_compiled_once_for_every_size_and_count(n):
    f = sprue.qjit(lambda x: x[x > 0], abstracted_axes={0: "n"})
    g = sprue.qjit(lambda x: x[x > 0])
    for frac in FRACTIONS:
        x = signed((n,), frac)
        agree(f(x), x[x > 0])
        agree(g(x), x[x > 0])
    assert f.compile_count == 1 and g.compile_count == 1


def test_mask_indexing_with_abstracted_axes_across_shapes():
    calls = [(*data((n, 3), frac),) for n in SIZES for frac in FRACTIONS]
    check_all(lambda x, m: x[m], lambda x, m: x[m], calls, axes=({0: "n"}, {0: "n"}))
    calls = [(x, m[:, 0]) for x, m in calls]
    check_all(lambda x, m: x[m], lambda x, m: x[m], calls, axes=({0: "n"}, {0: "n"}))
    calls = [(x.T, m) for x, m in calls]
    check_all(lambda x, m: x[:, m], lambda x, m: x[:, m], calls, axes=({1: "n"}, {0: "n"}))


def test_masks_of_arrays_with_every_size_known_only_at_run_time():
    rows = sprue.qjit(lambda x, m: x[m], abstracted_axes=({0: "n", 1: "k"}, {0: "n"}))
    cols = sprue.qjit(lambda x, m: x[:, m], abstracted_axes=({0: "n", 1: "k"}, {0: "k"}))
    for n in (0, 1, 4):
        for k in (0, 1, 3):
            x = rng("every", n, k).normal(size=(n, k))
            for frac in FRACTIONS:
                _, m = data((n,), frac)
                _, mk = data((k,), frac)
                agree(rows(x, m), x[m])
                agree(cols(x, mk), x[:, mk])
    assert rows.compile_count == 1 and cols.compile_count == 1


def test_mask_shape_checked_at_run_time_when_only_run_time_knows():
    f = sprue.qjit(lambda x, m: x[m], abstracted_axes=({0: "n"}, {0: "k"}))
    x, m = data((4,), 0.5)
    agree(f(x, m), x[m])
    with pytest.raises(SprueValueError, match="boolean index did not match indexed array along axis 0"):
        f(x, np.ones(3, bool))
    with pytest.raises(SprueValueError, match="boolean index did not match indexed array along axis 0"):
        f(x, np.ones(6, bool))
    assert f.compile_count == 1


def test_static_masks_and_eager_masks_keep_working():
    x, m = data((4, 3), 0.5)
    agree(sprue.qjit(lambda x: x[m])(x), x[m])                     # a numpy mask under qjit: a gather
    agree(getitem(x, m), x[m])
    agree(sprue.qjit(lambda m: jnp.arange(12.0).reshape(4, 3)[m])(m), np.arange(12.0).reshape(4, 3)[m])


# -- nonzero & co -------------------------------------------------------------------------------------
SHAPES = [(0,), (1,), (6,), (3, 4), (2, 0, 3), (2, 3, 2)]


def ints(shape, frac, seed=0):
    x, m = data(shape, frac, seed)
    return np.where(m, rng(shape, seed).integers(1, 5, shape), 0)


@pytest.mark.parametrize("name", ["nonzero", "flatnonzero", "argwhere"])
def test_index_functions_match_numpy(name):
    fn = lambda a: getattr(jnp, name)(a)  # noqa: E731
    ref = getattr(np, name)
    for shape in SHAPES:
        f = sprue.qjit(fn)
        for frac in FRACTIONS:
            for a in (ints(shape, frac), ints(shape, frac) > 0):
                agree(fn(a), ref(a))
                agree(f(a), ref(a))
        assert f.compile_count == 2   # int64 and bool arguments


@pytest.mark.parametrize("name", ["nonzero", "flatnonzero", "argwhere"])
def test_index_functions_with_abstracted_axes(name):
    fn = lambda a: getattr(jnp, name)(a)  # noqa: E731
    calls = [(ints((n, 3), frac),) for n in SIZES for frac in FRACTIONS]
    check_all(fn, getattr(np, name), calls, axes={0: "n"})


def test_nonzero_results_share_one_fresh_size():
    text = str(sprue.make_jaxpr(jnp.nonzero)(np.ones((2, 3))))
    m = re.search(r"(\w+):i64\[\] (\w+):i64\[\1\] (\w+):i64\[\1\] = filter\[axis=0\]", text)
    assert m, text
    assert text.endswith(f"in ({m[2]}, {m[3]}) }}"), text


def test_argwhere_of_a_scalar():
    for v in (0.0, 2.5):
        agree(jnp.argwhere(np.array(v)), np.argwhere(np.array(v)))
        agree(sprue.qjit(jnp.argwhere)(np.array(v)), np.argwhere(np.array(v)))


def test_nonzero_method_and_size_option():
    a = ints((7,), 0.5)
    agree(sprue.qjit(lambda a: a.nonzero())(a), np.nonzero(a))
    for size in (0, 2, 10):
        nz = np.flatnonzero(a)
        want = np.concatenate([nz, np.full(max(size - len(nz), 0), -1)])[:size]
        agree(jnp.nonzero(a, size=size, fill_value=-1), (want,))
        agree(sprue.qjit(lambda a: jnp.nonzero(a, size=size, fill_value=-1))(a), (want,))
        agree(sprue.qjit(lambda a: jnp.flatnonzero(a, size=size, fill_value=-1))(a), want)
    b = ints((3, 4), 0.5)
    want = np.argwhere(b)
    padded = np.concatenate([want, np.zeros((20 - len(want), 2), np.int64)])
    agree(sprue.qjit(lambda b: jnp.argwhere(b, size=20))(b), padded)


@pytest.mark.parametrize("shape", SHAPES)
def test_extract_matches_numpy(shape):
    f = sprue.qjit(jnp.extract)
    for frac in FRACTIONS:
        x, m = data(shape, frac)
        agree(jnp.extract(m, x), np.extract(m, x))
        agree(f(m, x), np.extract(m, x))
        agree(f(m.astype(np.int64), x), np.extract(m.astype(np.int64), x))   # nonzero counts as true
    assert f.compile_count == 2


@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) > 1] + [(5,)])
def test_compress_matches_numpy_on_every_axis(shape):
    x, _ = data(shape, 0.5)
    for axis in [None, *range(len(shape))]:
        n = x.size if axis is None else shape[axis]
        f = sprue.qjit(lambda c, x: jnp.compress(c, x, axis=axis))
        for frac in FRACTIONS:
            _, c = data((n,), frac, 1)
            agree(jnp.compress(c, x, axis=axis), np.compress(c, x, axis=axis))
            agree(f(c, x), np.compress(c, x, axis=axis))
        assert f.compile_count == 1


def test_compress_with_a_condition_shorter_or_longer_than_the_axis():
    x = np.arange(5.0)
    f = sprue.qjit(jnp.compress)
    for c in ([True, False, True], [False, True, False, True, True, False, False], [True] * 5 + [False]):
        c = np.array(c)
        agree(jnp.compress(c, x), np.compress(c, x))
        agree(f(c, x), np.compress(c, x))
    bad = np.array([True, False, False, False, False, False, True])
    with pytest.raises(IndexError):
        np.compress(bad, x)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 5"):
        jnp.compress(bad, x)
    with pytest.raises(SprueValueError, match="out of bounds for axis 0 with size 5"):
        f(bad, x)
    g = sprue.qjit(jnp.compress, abstracted_axes=({0: "k"}, {0: "n"}))
    for c in ([True, False, True], [False] * 5, [True, False, True, True, True, False]):
        agree(g(np.array(c), x), np.compress(np.array(c), x))
    with pytest.raises(SprueValueError, match="out of bounds"):
        g(bad, x)
    assert g.compile_count == 1


# -- the fresh size used afterwards -----------------------------------------------------------------------
def uses(x):
    y = x[x > 0]
    mean = jnp.sum(y) / y.shape[0]
    ones = jnp.ones(y.shape[0])
    joined = jnp.concatenate([y * 2, x, ones])

    @sprue.for_loop(0, y.shape[0], 1)
    def weighted(i, s):
        return s + jnp.take(y, i) * i   # (y[i]: eagerly y is a numpy array, which a traced i cannot index)
    return mean, joined, weighted(0.0), y, jnp.stack([y, ones]).sum(0)


def uses_ref(x):
    y = x[x > 0]
    with np.errstate(invalid="ignore"):
        mean = np.sum(y) / y.shape[0]
    return (mean, np.concatenate([y * 2, x, np.ones(y.shape[0])]), float(np.sum(y * np.arange(len(y)))), y,
            y + 1.0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy's mean of nothing
def test_the_fresh_size_is_usable_afterwards():
    f = sprue.qjit(uses)
    g = sprue.qjit(uses, abstracted_axes={0: "n"})
    for n in SIZES:
        for frac in FRACTIONS:
            x = signed((n,), frac)
            want = uses_ref(x)
            agree(g(x), want)
            if n == 6:
                agree(f(x), want)
    assert g.compile_count == 1
    for frac in (0.5, 1.0):   # eagerly (a loop body indexing an empty numpy array cannot be traced)
        x = signed((6,), frac)
        agree(uses(x), uses_ref(x))


def test_jaxpr_of_the_uses_types_everything_by_the_fresh_size():
    text = str(sprue.make_jaxpr(uses)(np.ones(3)))
    b = re.search(r"\n    (\w+):i64\[\] (\w+):f64\[\1\] = filter\[axis=0\] \w+ a\n", text)
    assert b, text
    c = b[1]
    assert re.search(rf"\w+:f64\[{c}\] = broadcast_in_dim\[broadcast_dimensions=\(\) shape=\(None,\) sharding=None\]"
                     rf" 1.0:f64\[\] {c}\n", text), text
    assert re.search(rf"\w+:f64\[2\*{c}\+3\] = concatenate\[dimension=0\]", text), text
    assert re.search(rf"for_loop\[.*\] {c} \w+ 0:i64\[\] {c} 1:i64\[\]", text, re.S), text


def test_results_of_run_time_size_are_returned_with_their_size():
    f = sprue.qjit(lambda x: (x[x > 0], x[x <= 0], x[x > 0].shape[0]), abstracted_axes={0: "n"})
    for frac in FRACTIONS:
        x = signed((7,), frac)
        pos, neg, k = f(x)
        agree(pos, x[x > 0])
        agree(neg, x[x <= 0])
        assert int(k) == np.count_nonzero(x > 0)
    assert f.compile_count == 1


def test_filtered_values_in_a_loop_and_nested_masks():
    def fn(x):
        y = x[x > 0]
        z = y[y < 1.0]                              # a mask over a fresh size
        idx = jnp.nonzero(z > 0.5)[0]
        return z, idx, jnp.sum(z[idx])

    def ref(x):
        y = x[x > 0]
        z = y[y < 1.0]
        idx = np.nonzero(z > 0.5)[0]
        return z, idx, np.sum(z[idx])
    calls = [(rng(n, k).normal(size=n),) for n in SIZES for k in range(3)]
    check_all(fn, ref, calls, axes={0: "n"})


def test_filters_inside_loops_and_branches():
    def in_loop(x):
        @sprue.for_loop(0, 4, 1)
        def body(i, s):
            y = x[x > i * 0.3]                      # a fresh size on every trip
            return s + jnp.sum(y) + y.shape[0]
        return body(0.0)

    def in_loop_ref(x):
        return sum(np.sum(x[x > i * 0.3]) + np.count_nonzero(x > i * 0.3) for i in range(4))

    def in_branch(x):
        return lax.cond(jnp.sum(x) > 1.0, lambda: jnp.sum(x[x > 0.5]), lambda: 0.0)

    def in_branch_ref(x):
        return np.sum(x[x > 0.5]) if np.sum(x) > 1.0 else 0.0

    def shrinking(x):                               # the filtered array is the loop's carry
        @sprue.for_loop(0, 3, 1, allow_array_resizing=True)
        def body(i, y):
            return y[y > jnp.mean(y)]
        return body(x)

    def shrinking_ref(x):
        y = x
        for _ in range(3):
            y = y[y > np.mean(y)] if y.size else y
        return y
    for fn, ref in [(in_loop, in_loop_ref), (in_branch, in_branch_ref), (shrinking, shrinking_ref)]:
        f = sprue.qjit(fn, abstracted_axes={0: "n"})
        for n in (0, 3, 8, 50):
            x = rng("nested", n).random(n)
            agree(f(x), ref(x))
        assert f.compile_count == 1


# -- transformations --------------------------------------------------------------------------------------
def positive_squares(x):
    return jnp.sum(x[x > 0] ** 2)


def test_grad_through_a_mask_is_the_analytic_gradient():
    for n in SIZES:
        for frac in FRACTIONS:
            x = signed((n,), frac)
            want = np.where(x > 0, 2 * x, 0.0)
            agree(sprue.grad(positive_squares)(x), want)
            agree(sprue.qjit(sprue.grad(positive_squares))(x), want)
    g = sprue.qjit(sprue.grad(positive_squares), abstracted_axes={0: "n"})
    for n in SIZES:
        for frac in FRACTIONS:
            x = signed((n,), frac)
            agree(g(x), np.where(x > 0, 2 * x, 0.0))
    assert g.compile_count == 1


def test_grad_of_a_2d_mask_and_of_nonzero_based_indexing():
    def f(x):
        return jnp.sum(jnp.sin(x[x[:, 0] > 0]) * 3.0)

    def g(x):
        i, j = jnp.nonzero(x > 0)
        return jnp.sum(x[i, j] ** 3)
    for frac in FRACTIONS:
        x = signed((4, 3), frac)
        rows = (x[:, 0] > 0)[:, None]
        agree(sprue.grad(f)(x), np.where(rows, 3.0 * np.cos(x), 0.0))
        agree(sprue.qjit(sprue.grad(f))(x), np.where(rows, 3.0 * np.cos(x), 0.0))
        agree(sprue.qjit(sprue.grad(g))(x), np.where(x > 0, 3 * x ** 2, 0.0))


def test_jvp_hessian_and_value_and_grad():
    x = signed((6,), 0.5)
    t = rng("t").normal(size=6)
    out, tangent = sprue.jvp(positive_squares, (x,), (t,))
    agree(out, np.sum(x[x > 0] ** 2))
    agree(tangent, np.sum(2 * x[x > 0] * t[x > 0]))
    out, tangent = sprue.qjit(lambda x, t: sprue.jvp(positive_squares, (x,), (t,)))(x, t)
    agree(tangent, np.sum(2 * x[x > 0] * t[x > 0]))
    agree(sprue.hessian(positive_squares)(x), np.diag(np.where(x > 0, 2.0, 0.0)))
    agree(sprue.qjit(sprue.hessian(positive_squares))(x), np.diag(np.where(x > 0, 2.0, 0.0)))
    v, g = sprue.qjit(sprue.value_and_grad(lambda x: jnp.mean(x[x > 0])), abstracted_axes={0: "n"})(x)
    k = np.count_nonzero(x > 0)
    agree(v, np.mean(x[x > 0]))
    agree(g, np.where(x > 0, 1.0 / k, 0.0))


def test_vmap_with_a_mask_shared_by_the_batch():
    keep = np.array([True, False, True, True, False])
    xs = rng("vmap").normal(size=(3, 5))
    agree(sprue.vmap(lambda x: x[keep])(xs), xs[:, keep])
    m = sprue.qjit(lambda k, xs: sprue.vmap(lambda x: lax.filter(k, x)[1][0])(xs))
    agree(m(keep, xs), xs[:, keep])
    agree(sprue.vmap(lambda x: jnp.compress(keep, x))(xs), xs[:, keep])


def test_vmap_with_a_batched_mask_is_refused_with_advice():
    xs = rng("vmap").normal(size=(3, 5))
    with pytest.raises(UnsupportedError, match=r"not batchable: filter \(the number of kept elements differs between"
                                               r" batch elements.*jnp\.where\(mask, x, fill\)"):
        sprue.vmap(lambda x: x[x > 0])(xs)


def test_cost_counts_the_kept_elements():
    x = signed((8,), 0.5)
    k = np.count_nonzero(x > 0)
    # the comparison (8), the squares (k) and the sum (k - 1 additions); filtering itself is free
    assert sprue.cost(positive_squares)(x) == 8 + k + k - 1


# -- errors -----------------------------------------------------------------------------------------------
def test_unsupported_mask_forms_are_errors_by_text():
    x = np.ones((3, 4))
    with pytest.raises(ConcretizationError, match=r"x\.at\[mask\] updates with a traced boolean mask are not"
                                                  r" supported.*jnp\.where\(mask, values, x\)"):
        sprue.make_jaxpr(lambda x: x.at[x > 0].set(0.0))(x)
    with pytest.raises(IndexError, match="combined with integer-array"):
        sprue.make_jaxpr(lambda x: x[x[:, 0] > 0, [0, 1, 2]])(x)
    with pytest.raises(IndexError, match="used twice in one index"):
        sprue.make_jaxpr(lambda x: x[x[:, 0] > 0, x[0] > 0])(x)
    with pytest.raises(IndexError, match="boolean scalar indices"):
        sprue.make_jaxpr(lambda x: x[x[0, 0] > 0])(x)
    with pytest.raises(IndexError, match="boolean index did not match indexed array along axis 0; size of axis is 3"
                                         " but size of corresponding boolean axis is 4"):
        sprue.make_jaxpr(lambda x: x[x[0] > 0])(x)
    with pytest.raises(IndexError, match="too many indices"):
        sprue.make_jaxpr(lambda x: x[x > 0, 0])(x)
    with pytest.raises(SprueError) as info:
        sprue.make_jaxpr(lambda x: x[x > 0, 0])(x)
    assert isinstance(info.value, IndexError)


def test_index_function_errors_by_text():
    with pytest.raises(SprueValueError, match="sprue.numpy.nonzero: calling nonzero on 0d arrays is not allowed"):
        jnp.nonzero(np.array(1.0))
    with pytest.raises(SprueValueError, match=r"sprue.numpy.compress: condition must be a 1-d array, got bool\[2,2\]"):
        jnp.compress(np.ones((2, 2), bool), np.ones(4))
    with pytest.raises(SprueValueError, match="sprue.numpy.compress: axis 2 is out of bounds"):
        jnp.compress(np.ones(2, bool), np.ones((2, 2)), axis=2)
    with pytest.raises(SprueTypeError, match="sprue.numpy.nonzero: size must be a static int"):
        sprue.make_jaxpr(lambda x, n: jnp.nonzero(x, size=n))(np.ones(3), np.int64(2))
    with pytest.raises(SprueValueError, match="fill_value must be a scalar or a tuple of length 2"):
        jnp.nonzero(np.ones((2, 2)), size=3, fill_value=(0, 1, 2))
    with pytest.raises(SprueTypeError, match="out= is not supported"):
        jnp.compress(np.ones(2, bool), np.ones(2), out=np.ones(2))
