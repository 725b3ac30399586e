"""Reduction accumulators promoted to loop-carried values (lowering/accumulators.py): which loops
qualify, on hand-written scf, and compiled reductions inside loops against numpy."""
import numpy as np
import pytest

import sprue
import sprue.lax as lax
import sprue.numpy as jnp
from sprue.lowering.accumulators import promote_accumulators
from sprue.lowering.pipeline import make_pipeline_context, parse_module

# A row-sum of %a into the fresh %out inside a loop carrying %v: the shape convert-linalg-to-loops
# gives a reduction in a fori_loop body.
_ROW_SUM = """
func.func @f(%a: memref<8x8xf64>, %v: memref<8xf64>, %n: index) -> memref<8xf64> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %t = %c0 to %n step %c1 iter_args(%cur = %v) -> (memref<8xf64>) {{
    %out = memref.alloc() : memref<8xf64>
    scf.for %i = %c0 to %c8 step %c1 {{
      scf.for %k = %c0 to %c8 step %c1 {{
        %x = memref.load %a[%i, %k] : memref<8x8xf64>
        %y = memref.load {read}[%k] : memref<8xf64>
        %acc = memref.load %out[%i] : memref<8xf64>
        %p = arith.mulf %x, %y : f64
        %s = arith.addf %acc, %p : f64
        {extra}
        memref.store %s, %out[%i] : memref<8xf64>
      }}
    }}
    scf.yield %out : memref<8xf64>
  }}
  return %r : memref<8xf64>
}}
func.func private @g(f64) -> ()
"""


def _promoted(text: str) -> tuple[int, str]:
    ctx = make_pipeline_context()
    module = parse_module(ctx, text)
    count = promote_accumulators(module)
    assert module.operation.verify()
    return count, str(module)


def test_reduction_in_a_loop_body_is_carried_in_a_register():
    count, text = _promoted(_ROW_SUM.format(read="%cur", extra=""))
    assert count == 1
    # the inner loop carries the accumulator; the buffer is loaded once before it, stored once after
    assert "iter_args(%arg" in text and "-> (f64)" in text
    inner = text[text.index("-> (f64)"):]
    assert "memref.store" not in inner[:inner.index("scf.yield")]


@pytest.mark.parametrize("read, extra, why", [
    ("%out", "", "the loop reads the accumulator's buffer at another index"),
    ("%cur", "func.call @g(%s) : (f64) -> ()", "a call may read or write the buffer"),
])
def test_loops_that_may_observe_the_buffer_are_left_alone(read, extra, why):
    count, text = _promoted(_ROW_SUM.format(read=read, extra=extra))
    assert count == 0, why
    assert "-> (f64)" not in text


def test_a_buffer_not_freshly_allocated_is_left_alone():
    # %out is the caller's: another argument may be the same memory
    text = """
    func.func @f(%a: memref<8xf64>, %out: memref<1xf64>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %k = %c0 to %c8 step %c1 {
        %x = memref.load %a[%k] : memref<8xf64>
        %acc = memref.load %out[%c0] : memref<1xf64>
        %s = arith.addf %acc, %x : f64
        memref.store %s, %out[%c0] : memref<1xf64>
      }
      return
    }"""
    assert _promoted(text)[0] == 0


def test_a_loop_carried_buffer_made_before_the_allocation_does_not_block_it():
    # a nest reducing to one location (a full sum) is promoted at both levels
    text = """
    func.func @f(%a: memref<4x8xf64>) -> memref<f64> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %out = memref.alloc() : memref<f64>
      scf.for %i = %c0 to %c4 step %c1 {
        scf.for %k = %c0 to %c8 step %c1 {
          %x = memref.load %a[%i, %k] : memref<4x8xf64>
          %acc = memref.load %out[] : memref<f64>
          %s = arith.addf %acc, %x : f64
          memref.store %s, %out[] : memref<f64>
        }
      }
      return %out : memref<f64>
    }"""
    count, out = _promoted(text)
    assert count == 2
    assert out.count("memref.load %alloc[]") == 1 and out.count("memref.store") == 1


# -- compiled: reductions inside loop bodies, against numpy ----------------------------------------

def test_matvec_in_fori_loop_matches_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 37))
    v = rng.standard_normal(37)

    @sprue.qjit
    def power(a, v):
        def step(i, v):
            w = a @ v
            return w / jnp.sqrt(jnp.sum(w * w))
        return lax.fori_loop(0, 7, step, v)

    want = v
    for _ in range(7):
        w = a @ want
        want = w / np.sqrt(np.sum(w * w))
    np.testing.assert_allclose(power(a, v), want, rtol=1e-12)


def test_reductions_into_scan_rows_and_carries_match_numpy():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((6, 5, 4))

    @sprue.qjit
    def f(xs):
        def step(c, x):
            s = jnp.sum(x, axis=1)        # into the scan's output row
            m = jnp.max(x * c[:, None], axis=1)
            return c + jnp.min(x, axis=1), (s, m, jnp.sum(x))
        return lax.scan(step, jnp.ones(5), xs)

    c, (s, m, tot) = f(xs)
    cw = np.ones(5)
    sw, mw, tw = [], [], []
    for x in xs:
        sw.append(x.sum(1))
        mw.append((x * cw[:, None]).max(1))
        tw.append(x.sum())
        cw = cw + x.min(1)
    np.testing.assert_allclose(c, cw, rtol=1e-12)
    np.testing.assert_allclose(s, np.array(sw), rtol=1e-12)
    np.testing.assert_allclose(m, np.array(mw), rtol=1e-12)
    np.testing.assert_allclose(tot, np.array(tw), rtol=1e-12)


def test_argmin_in_a_loop_with_dynamic_sizes_matches_numpy():
    rng = np.random.default_rng(2)
    pts = rng.standard_normal((23, 3))
    ctr = rng.standard_normal((4, 3))

    @sprue.qjit(abstracted_axes=({0: "n"}, None))
    def assign(pts, ctr):
        def step(i, acc):
            d = jnp.sum((pts[:, None, :] - ctr[None, :, :] * (1.0 + i)) ** 2, axis=-1)
            return acc + jnp.argmin(d, axis=1)
        return lax.fori_loop(0, 3, step, jnp.zeros(pts.shape[0], dtype=jnp.int64))

    want = np.zeros(23, dtype=np.int64)
    for i in range(3):
        d = np.sum((pts[:, None, :] - ctr[None, :, :] * (1.0 + i)) ** 2, axis=-1)
        want += np.argmin(d, axis=1)
    np.testing.assert_array_equal(assign(pts, ctr), want)
