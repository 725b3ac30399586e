"""lower_jaxpr as a whole: the module's shape, its round trip through the StableHLO parser,
constants, literals, locations, the rule table's coverage, and the error for a missing rule."""
import re

import numpy as np
import pytest
from torch_mlir import ir

import sprue.lax as lax
from sprue.api.traced import make_jaxpr
from sprue.base.errors import UnsupportedError
from sprue.ir.core import Primitive, primitives, shape_rules
from sprue.lowering.stablehlo import lower_jaxpr, lowering_rules, make_builder_context
from tests.helpers.lowering_harness import Compiled, check


def parse(text: str) -> ir.Module:
    ctx = make_builder_context()
    with ctx:
        module = ir.Module.parse(text)
        assert module.operation.verify()
    return module


def op_names(module: ir.Module) -> set[str]:
    names = set()

    def walk(op):
        names.add(op.name)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    walk(inner.operation)
    walk(module.operation)
    return names


def test_every_primitive_has_a_lowering_rule():
    missing = sorted(name for name, p in primitives.items() if p not in lowering_rules)
    assert not missing, f"primitives without a StableHLO lowering: {missing}"


def test_module_signature_and_round_trip():
    def f(x, y, s):
        return lax.add(x, lax.convert_element_type(y, np.float32)), lax.reduce_sum(y, (0,)), s
    cj = make_jaxpr(f)(np.ones((2, 3), np.float32), np.ones((2, 3), np.int64), np.bool_(True))
    text = lower_jaxpr(cj, name="kernel", debug_info=False)
    assert re.search(r"func.func @kernel\(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xi64>, %arg2: tensor<i1>\)"
                     r" -> \(tensor<2x3xf32>, tensor<3xi64>, tensor<i1>\)", text), text
    module = parse(text)
    assert {n.split(".")[0] for n in op_names(module)} <= {"builtin", "func", "stablehlo"}
    assert parse(str(module)) is not None  # printing the parsed module parses again


def test_unsigned_types_are_unsigned_in_stablehlo():
    text = lower_jaxpr(make_jaxpr(lambda x: lax.div(x, x))(np.ones(3, np.uint32)))
    assert "tensor<3xui32>" in text


def test_every_rule_emits_parseable_stablehlo():
    """One module using many primitives at once parses back and has only stablehlo ops."""
    def f(x, i):
        y = lax.sinh(lax.cumsum(lax.sort(x, 1), 1))
        g = lax.gather(y, lax.reshape(i, (2, 1)), lax.GatherDimensionNumbers((1,), (0,), (0,)), (1, 3),
                       mode=lax.GatherScatterMode.FILL_OR_DROP)
        s = lax.scatter_add(y, lax.reshape(i, (2, 1)), g, lax.ScatterDimensionNumbers((1,), (0,), (0,)))
        return lax.argmax(s, 1), lax.pad(s, 0.0, ((1, -1, 1), (0, 0, 0))), lax.dot_general(x, y, (((1,), (1,)), ((), ())))
    text = lower_jaxpr(make_jaxpr(f)(np.ones((2, 3)), np.ones(2, np.int32)))
    assert {n.split(".")[0] for n in op_names(parse(text))} <= {"builtin", "func", "stablehlo"}


def test_constants_are_embedded_bit_for_bit():
    payload_nan = np.array([0x7FF8000000000123], np.uint64).view(np.float64)
    consts = [np.array([-0.0, np.inf, -np.inf, 1e-310, np.pi, payload_nan[0]]),
              np.array([[True, False], [False, True]]), np.arange(12, dtype=np.int32).reshape(3, 4) - 6,
              np.array([2 ** 64 - 1, 0, 2 ** 63], np.uint64), np.array(np.float32(0.1)),
              np.linspace(-1, 1, 1000).astype(np.float16)]

    def f():
        return tuple(lax.add(c, c) if c.dtype.kind == "f" else lax.bitwise_xor(c, c) if c.dtype == np.uint64
                     else c for c in consts) + tuple(consts)
    got = Compiled(f)()
    for c, g in zip(consts, got[len(consts):]):
        assert g.dtype == c.dtype and g.shape == c.shape
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), c.reshape(-1).view(np.uint8))


def test_literals_of_every_dtype():
    check(lambda x: (lax.add(x, np.float32(0.1)), lax.mul(x, np.float32(-0.0)), np.int8(-5), np.uint64(2 ** 64 - 1),
                     np.bool_(True), 2.5), np.ones(3, np.float32))


def test_outputs_may_repeat_and_may_be_inputs():
    check(lambda x, y: (x, x, lax.neg(y), y, lax.neg(y)), np.arange(3.0), np.arange(2))


def test_locations_name_the_primitive_and_the_users_line():
    def f(x):
        return lax.sin(x)  # LOCATION-MARK
    module = parse(lower_jaxpr(make_jaxpr(f)(np.ones(2))))
    line = next(i + 1 for i, l in enumerate(open(__file__).read().splitlines()) if "LOCATION-MARK" in l and "return" in l)
    func = module.body.operations[0]
    sine = next(op for op in func.regions[0].blocks[0].operations if op.name == "stablehlo.sine")
    assert re.fullmatch(rf'loc\("sin"\(".*test_lowering_module.py":{line}:0\)\)', str(sine.location)), sine.location


def test_a_primitive_without_a_rule_raises_unsupported_with_the_source_line():
    mystery_p = Primitive("mystery")
    shape_rules[mystery_p] = lambda x: x
    try:
        def f(x):
            return mystery_p.bind(x)  # MYSTERY-MARK
        cj = make_jaxpr(f)(np.ones(2))
        with pytest.raises(UnsupportedError, match=r"mystery.*test_lowering_module.py:\d+"):
            lower_jaxpr(cj)
    finally:
        del shape_rules[mystery_p]


def test_a_gather_in_one_hot_mode_is_unsupported():
    dn = lax.GatherDimensionNumbers((), (0,), (0,))
    cj = make_jaxpr(lambda x, i: lax.gather(x, i, dn, (1,), mode=lax.GatherScatterMode.ONE_HOT))(
        np.ones(4), np.zeros((2, 1), np.int32))
    with pytest.raises(UnsupportedError, match="ONE_HOT"):
        lower_jaxpr(cj)
