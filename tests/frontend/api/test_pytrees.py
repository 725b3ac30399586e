"""jax.tree_util's surface (`sprue.pytree`, `sprue.tree_util`; issue 22): registered classes
(register_pytree_node, register_pytree_node_class, register_dataclass) as pytree nodes everywhere
pytrees go (qjit arguments and results, on the fast call path too, grad, vmap, pickling,
sprue.save), tree_map over several trees, tree_structure/tree_unflatten/tree_leaves, named tuples
and None nodes; against the same computations written on plain arrays with numpy."""
import dataclasses
import pickle
import re
from typing import NamedTuple

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import tree_util
from sprue.runtime import fastcall


@tree_util.register_dataclass
@dataclasses.dataclass
class Layer:
    w: np.ndarray
    b: np.ndarray
    activation: str = dataclasses.field(default="tanh", metadata=dict(static=True))


@sprue.pytree.register_pytree_node_class
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def tree_flatten(self):
        return (self.x, self.y), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


class Interval:
    """Registered with register_pytree_node: its label is structure (aux data), lo/hi are leaves."""

    def __init__(self, lo, hi, label):
        self.lo, self.hi, self.label = lo, hi, label


sprue.pytree.register_pytree_node(Interval, lambda v: ((v.lo, v.hi), v.label),
                                  lambda label, c: Interval(c[0], c[1], label))


class Pair(NamedTuple):
    a: object
    b: object


def apply(layer: Layer, x):
    z = x @ layer.w + layer.b
    return jnp.tanh(z) if layer.activation == "tanh" else jnp.maximum(z, 0.0)


def apply_np(layer, x):
    z = x @ layer.w + layer.b
    return np.tanh(z) if layer.activation == "tanh" else np.maximum(z, 0.0)


RNG = np.random.default_rng(0)
LAYER = Layer(RNG.random((3, 2)), RNG.random(2))
X = RNG.random((4, 3))


def test_the_tree_functions():
    tree = {"p": Point(1.0, 2.5), "n": None, "i": Interval(0.0, 1.0, "unit"), "t": Pair(3, [4, 5])}
    leaves, structure = tree_util.tree_flatten(tree)
    assert leaves == [0.0, 1.0, 1.0, 2.5, 3, 4, 5]      # dict keys sorted; None has no leaf
    assert tree_util.tree_leaves(tree) == leaves and structure.num_leaves == 7
    assert tree_util.tree_structure(tree) == structure
    assert str(structure) == "{'i': Interval(*, *), 'n': None, 'p': Point(*, *), 't': Pair(*, [*, *])}"
    rebuilt = tree_util.tree_unflatten(structure, [2 * v for v in leaves])
    assert isinstance(rebuilt["p"], Point) and isinstance(rebuilt["i"], Interval) and isinstance(rebuilt["t"], Pair)
    assert rebuilt["i"].label == "unit" and rebuilt["n"] is None and rebuilt["t"].b == [8, 10]
    assert rebuilt["p"].y == 5.0
    assert structure.unflatten(leaves)["t"] == Pair(3, [4, 5])
    # several trees; the later ones may extend the first's structure at its leaves
    summed = tree_util.tree_map(lambda a, b, c: a + b * c, [1, Pair(2, 3)], [10, Pair(20, 30)], [1, Pair(2, 3)])
    assert summed == [11, Pair(42, 93)]
    assert tree_util.tree_map(lambda a, b: (a, b), [1, 2], [[3, 4], None]) == [(1, [3, 4]), (2, None)]
    assert tree_util.tree_map(lambda a: a * 2, Layer(1.0, 2.0, "relu")) == Layer(2.0, 4.0, "relu")
    assert tree_util.tree_leaves([None, (None,)]) == []
    assert tree_util.tree_leaves([1, (2, 3)], is_leaf=lambda t: isinstance(t, tuple)) == [1, (2, 3)]
    assert tree_util.tree_all([True, Point(1, True)]) and not tree_util.tree_all([True, Point(0, True)])
    assert tree_util.tree_reduce(lambda a, b: a + b, {"a": 1, "b": Point(2, 3)}) == 6
    assert tree_util.tree_reduce(lambda a, b: a * b, [2, 3], 10) == 60


def test_tree_map_over_trees_of_different_structures_names_them():
    with pytest.raises(sprue.SprueValueError, match=re.escape("the tree at argument 1[1] has structure (*, *, *),"
                                                              " where (*, *) was expected")):
        tree_util.tree_map(lambda a, b: a + b, [1, (2, 3)], [1, (2, 3, 4)])
    with pytest.raises(sprue.SprueValueError, match=r"has structure Layer\(\*, \*\), where Layer\(\*, \*\) was"):
        tree_util.tree_map(lambda a, b: a + b, Layer(1.0, 2.0, "tanh"), Layer(1.0, 2.0, "relu"))


def test_registration_errors():
    with pytest.raises(sprue.SprueValueError, match=r"register_pytree_node: Point is already a pytree node type"):
        tree_util.register_pytree_node(Point, lambda p: ((), None), lambda a, c: Point(0, 0))
    with pytest.raises(sprue.SprueValueError, match=r"tuple is already a pytree node type"):
        tree_util.register_pytree_node(tuple, lambda p: ((), None), lambda a, c: ())
    with pytest.raises(sprue.SprueTypeError, match=r"the class needs a tree_flatten method"):
        tree_util.register_pytree_node_class(type("Bare", (), {}))

    @dataclasses.dataclass
    class D:
        a: float
        b: float
    with pytest.raises(sprue.SprueValueError, match=r"register_dataclass\(D\): data_fields \['a'\] and meta_fields"
                                                    r" \[\] must name each of its fields \(\['a', 'b'\]\) once"):
        tree_util.register_dataclass(D, data_fields=["a"], meta_fields=[])

    class Unhashable:
        def __init__(self, v):
            self.v = v
    tree_util.register_pytree_node(Unhashable, lambda u: ((u.v,), [1]), lambda a, c: Unhashable(*c))
    with pytest.raises(sprue.SprueTypeError, match=r"Unhashable's pytree flatten gave auxiliary data of type list,"
                                                   r" which is not hashable"):
        tree_util.tree_flatten(Unhashable(1.0))


def test_a_registered_dataclass_as_qjit_argument_and_result():
    @sprue.qjit
    def step(layer, x):
        y = apply(layer, x)
        return Layer(layer.w * 0.5, layer.b + y.sum(axis=0), layer.activation), y

    new, y = step(LAYER, X)
    np.testing.assert_allclose(y, apply_np(LAYER, X), rtol=1e-14)
    assert isinstance(new, Layer) and new.activation == "tanh"
    np.testing.assert_allclose(new.w, LAYER.w * 0.5)
    np.testing.assert_allclose(new.b, LAYER.b + apply_np(LAYER, X).sum(axis=0), rtol=1e-14)
    relu = Layer(LAYER.w, LAYER.b, "relu")               # the static field is structure: another compilation
    np.testing.assert_allclose(step(relu, X)[1], apply_np(relu, X), rtol=1e-14)
    assert step.compile_count == 2
    step(LAYER, X)
    assert step.compile_count == 2


def test_registered_classes_take_the_fast_call_path():
    @sprue.qjit
    def norm(p, x):
        return jnp.sqrt(p.x * p.x + p.y * p.y) + x

    p = Point(3.0, np.array([4.0, 0.0]))
    first = norm(p, 1.0)
    key = norm._fast_key((p, 1.0))
    assert key is not None and key in norm._plans            # a fast caller was made for this signature
    fast = norm._plans[key]((Point(6.0, np.array([8.0, 1.0])), 1.0))
    assert fast is not fastcall.MISS
    np.testing.assert_allclose(first, [6.0, 4.0])
    np.testing.assert_allclose(fast, [11.0, np.sqrt(37.0) + 1.0])
    # a different structure (aux data) misses the fast caller and takes the general path
    iv = Interval(np.float64(1.0), np.float64(2.0), "a")
    f = sprue.qjit(lambda v: v.hi - v.lo)
    assert f(iv) == 1.0 and f(Interval(np.float64(1.0), np.float64(4.0), "b")) == 3.0 and f.compile_count == 2
    assert f._plans[f._fast_key((iv,))]((Interval(np.float64(0.0), np.float64(4.0), "b"),)) is fastcall.MISS


def test_grad_and_vmap_over_registered_classes():
    def loss(layer, x):
        return jnp.sum(apply(layer, x) ** 2)

    g = sprue.grad(loss)(LAYER, X)
    gq = sprue.qjit(sprue.grad(loss))(LAYER, X)
    z = X @ LAYER.w + LAYER.b
    dz = 2 * np.tanh(z) * (1 - np.tanh(z) ** 2)
    for got in (g, gq):
        assert isinstance(got, Layer) and got.activation == "tanh"
        np.testing.assert_allclose(got.w, X.T @ dz, rtol=1e-12)
        np.testing.assert_allclose(got.b, dz.sum(axis=0), rtol=1e-12)
    pts = Point(np.arange(3.0), np.ones(3))
    out = sprue.vmap(lambda p: Point(p.y, p.x * 2.0))(pts)
    assert isinstance(out, Point)
    np.testing.assert_allclose(out.x, np.ones(3))
    np.testing.assert_allclose(out.y, np.arange(3.0) * 2.0)


def test_named_tuples_and_none_through_qjit():
    @sprue.qjit
    def f(pair, nothing, x):
        assert nothing is None
        return Pair(pair.a + x, None), [None, pair.b * x]

    got = f(Pair(np.ones(2), 3.0), None, 2.0)
    assert isinstance(got[0], Pair) and got[0].b is None and got[1][0] is None
    np.testing.assert_allclose(got[0].a, [3.0, 3.0])
    assert got[1][1] == 6.0


def test_pickled_and_saved_with_registered_arguments(tmp_path):
    f = sprue.qjit(apply)
    want = apply_np(LAYER, X)
    np.testing.assert_allclose(f(LAYER, X), want, rtol=1e-14)
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_allclose(g(LAYER, X), want, rtol=1e-14)
    path = sprue.save(f, tmp_path / "layer.jaxpr")
    loaded = sprue.load(path)
    assert loaded.arg_names == ["layer.w", "layer.b", "x"]
    np.testing.assert_allclose(loaded(LAYER.w, LAYER.b, X), want, rtol=1e-14)


def test_ordered_and_default_dicts_keep_their_types():
    import collections
    od = collections.OrderedDict([("b", 1.0), ("a", np.arange(2.0))])
    leaves, structure = tree_util.tree_flatten(od)
    assert leaves[0] == 1.0 and str(structure) == "OrderedDict({'b': *, 'a': *})"     # insertion order
    back = tree_util.tree_unflatten(structure, leaves)
    assert type(back) is collections.OrderedDict and list(back) == ["b", "a"]
    dd = collections.defaultdict(list, {"b": 1.0, "a": 2.0})
    leaves, structure = tree_util.tree_flatten(dd)
    assert leaves == [2.0, 1.0]                                                          # sorted keys
    back = tree_util.tree_unflatten(structure, leaves)
    assert type(back) is collections.defaultdict and back.default_factory is list and back["c"] == []
    got = sprue.qjit(lambda d: collections.OrderedDict([("z", d["a"] * d["b"]), ("y", d["b"])]))(od)
    assert type(got) is collections.OrderedDict and list(got) == ["z", "y"]
    np.testing.assert_allclose(got["z"], np.arange(2.0))


def test_vmap_in_axes_given_as_a_registered_class():
    pts = Point(np.arange(3.0), 10.0)
    out = sprue.vmap(lambda p: p.x * p.y, in_axes=(Point(0, None),))(pts)
    np.testing.assert_allclose(out, np.arange(3.0) * 10.0)
    out = sprue.qjit(sprue.vmap(lambda p: p.x * p.y, in_axes=(Point(0, None),)))(pts)
    np.testing.assert_allclose(out, np.arange(3.0) * 10.0)
