"""sprue.cost: floating-point operation counts against hand counts (seed 002's FLOPS)."""
import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue import lax


def test_elementwise_counts_one_per_element():
    # sin, *2, x*x, + : four operations per element
    n = 1000
    assert sprue.cost(lambda x: jnp.sin(x) * 2 + x * x)(np.ones(n)) == 4 * n


def test_integer_work_and_data_movement_are_free():
    assert sprue.cost(lambda i: (i * 3 + 1) // 2)(np.arange(10)) == 0
    assert sprue.cost(lambda x: jnp.transpose(x)[::2].reshape(-1))(np.ones((4, 6))) == 0


@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (64, 32, 16)])
def test_matmul_is_2mnk(m, k, n):
    assert sprue.cost(lambda a, b: a @ b)(np.ones((m, k)), np.ones((k, n))) == 2 * m * n * k


def test_batched_matmul():
    assert sprue.cost(lambda a, b: jnp.matmul(a, b))(np.ones((7, 3, 4)), np.ones((7, 4, 5))) == 7 * 2 * 3 * 4 * 5


def test_sum_folds_n_minus_one():
    assert sprue.cost(jnp.sum)(np.ones(100)) == 99
    assert sprue.cost(lambda x: jnp.sum(x, axis=1))(np.ones((10, 8))) == 10 * 7


def test_loop_with_a_static_trip_count_multiplies():
    def f(x):
        return lax.fori_loop(0, 10, lambda i, c: c * 2.0 + 1.0, x)
    assert sprue.cost(f)(np.ones(50)) == 10 * 2 * 50
    assert sprue.cost(f)(sprue.ShapedArray((50,), np.float64)) == 10 * 2 * 50   # no values needed


def test_loop_with_a_data_dependent_trip_count_is_evaluated():
    def f(x, n):
        return lax.fori_loop(0, n * 2, lambda i, c: c * 2.0 + 1.0, x)
    assert sprue.cost(f)(np.ones(50), 3) == 6 * 2 * 50
    assert sprue.cost(f)(np.ones(50), 0) == 0


def test_catalyst_for_loop_with_step():
    def f(x):
        @sprue.for_loop(1, 10, 3)   # i = 1, 4, 7
        def body(i, c):
            return jnp.sin(c)
        return body(x)
    assert sprue.cost(f)(np.ones(8)) == 3 * 8


def test_while_loop_counts_each_trip():
    def f(x):
        return lax.while_loop(lambda c: jnp.sum(c) < 100.0, lambda c: c * 2.0, x)
    x = np.ones(4)
    trips, c = 0, x.copy()
    while c.sum() < 100.0:
        c, trips = c * 2.0, trips + 1
    per_check = 3 + 1     # sum of 4 (3 adds) and the comparison
    assert sprue.cost(f)(x) == (trips + 1) * per_check + trips * 4


def test_while_loop_with_abstract_arguments_is_an_error():
    def f(x):
        return lax.while_loop(lambda c: jnp.sum(c) < 100.0, lambda c: c * 2.0, x)
    with pytest.raises(sprue.SprueValueError, match=r"cost: the number of trips of a while_loop depends on the"
                       r" values of the arguments, which were given abstractly; call sprue.cost\(f\) with concrete"
                       r" arrays"):
        sprue.cost(f)(sprue.ShapedArray((4,), np.float64))


def test_cond_counts_the_branch_taken_or_the_worst_abstractly():
    def f(x):
        return lax.cond(x[0] > 0, lambda a: jnp.exp(a) * a, lambda a: a + 1.0, x)
    n = 16
    compare = 1
    assert sprue.cost(f)(np.ones(n)) == compare + 2 * n
    assert sprue.cost(f)(-np.ones(n)) == compare + n
    assert sprue.cost(f)(sprue.ShapedArray((n,), np.float64)) == compare + 2 * n


def test_cond_inside_a_loop_is_counted_per_trip():
    def f(x):
        def body(i, c):
            return lax.cond(i % 2 == 0, lambda a: a * 2.0, lambda a: jnp.sin(a) * a, c)
        return lax.fori_loop(0, 5, body, x)
    n = 3
    # trips 0, 2, 4 take the cheap branch (1 op per element), 1 and 3 the other (2 per element)
    assert sprue.cost(f)(np.ones(n)) == 3 * n + 2 * 2 * n


def test_scan_multiplies_by_its_length():
    def f(xs):
        return lax.scan(lambda c, x: (c * x + 1.0, c * x), 0.0, xs)
    assert sprue.cost(f)(np.ones(20)) == 20 * 3


def test_cost_of_a_gradient():
    # forward: sin, mul (2n); backward of sum(sin(x) * x): mul, mul, cos, mul, add (5n)
    n = 10
    got = sprue.cost(sprue.grad(lambda x: jnp.sum(jnp.sin(x) * x)))(np.ones(n))
    assert got == 2 * n + (n - 1) + 5 * n
