"""The printer writes what the reader reads, for programs over arrays of run-time size: every
dynamic sprue.numpy case of tests/helpers/dynamic_cases.py prints a jaxpr that reads back to the same
text, and the size expressions that used to read back as something else (`2*n//2`, `-n//2`, the
sizes the tracer computes with div and rem, a size variable named before its use) compile and
compute numpy's results on several sizes."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.io.jaxpr_parser import parse_jaxpr
from sprue.io.saved_format import parse_saved, to_text
from sprue.ir.shapes import DimVar, dim
from tests.helpers.dynamic_cases import CASES


def _avals(case, n=3):
    args = case.make_args(n)
    axes = case.axes if isinstance(case.axes, tuple) else (case.axes,) * len(args)
    return [sprue.ShapedArray(tuple(ax.get(i, d) if ax else d for i, d in enumerate(a.shape)), a.dtype)
            if isinstance(a, np.ndarray) else a for a, ax in zip(args, axes)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_printed_dynamic_program_reads_back_to_the_same_text(case):
    closed = sprue.make_jaxpr(case.fn)(*_avals(case))
    text = str(closed)
    back = parse_saved(to_text(closed))[0] if closed.consts else parse_jaxpr(text)[0]
    assert str(back) == text


def test_a_floor_division_in_a_product_prints_in_parentheses():
    # `2*a//2` reads as (2*a)//2 = a and `-a//2` as (-a)//2, as in Python: the printer parenthesizes
    a = dim(DimVar("a"))
    forms = {2 * (a // 2): "2*(a//2)", a - a // 2: "-(a//2)+a", (a // 2) * (a % 3): "(a//2)*(a%3)",
             (a // 2) * (a // 2): "(a//2)*(a//2)", 3 * (a // 2) + a % 3: "a%3+3*(a//2)",
             a // 2 + 1: "a//2+1", (a + 1) // 2: "(a+1)//2", (2 * a) // 4: "2*a//4"}
    for d, printed in forms.items():
        assert str(d) == printed
        text = f"{{ lambda ; a:i64[] b:f64[{printed}]. let\n  in (b,) }}"
        assert str(parse_jaxpr(text)[0]) == text   # reads back to the same size


@pytest.mark.parametrize("name", ["reshape_pairs", "split_at_half", "array_split", "slice_by_dims", "at_strided_set"])
def test_programs_sized_by_div_and_rem_load_and_compute(tmp_path, name):
    case = next(c for c in CASES if c.name == name)
    f = sprue.qjit(case.fn, abstracted_axes=case.axes)
    f(*case.make_args(4))
    path = tmp_path / f"{name}.jaxpr"
    path.write_text(str(f.jaxpr))   # JAX's format: the printer's text, no header
    g = sprue.load(path)
    for n in (3, 4, 7):
        got, want = g(*case.make_args(n)), case.ref(*case.make_args(n))
        got, want = (got, want) if isinstance(want, (tuple, list)) else ((got,), (want,))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_div_and_rem_of_a_size_keep_its_symbolic_value():
    # the tracer stages n//2 as `div a 2`: read back, its value is the size a//2 again
    def f(x):
        return jnp.zeros(x.shape[0] // 2), jnp.zeros(x.shape[0] % 3)
    text = str(sprue.make_jaxpr(f)(sprue.ShapedArray(("n",), np.float64)))
    assert "c:i64[] = div a 2:i64[]" in text and "e:i64[] = rem a 3:i64[]" in text
    closed, _ = parse_jaxpr(text)
    assert [v.aval.str_short() for v in closed.jaxpr.outvars] == ["f64[a//2]", "f64[a%3]"]
    assert str(closed) == text
