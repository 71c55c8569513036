"""More NumPy rules (issue #22): the rules autograd has and dplus lacked, bugs found by
running autograd's test suite, and the dtypes of gradients.

Every rule is checked by ``array_checks.check_grads``: against central finite differences
along random directions, at first and second order, on several shapes.
"""

from __future__ import annotations

import numpy as np
import pytest

import dplus
from array_checks import check_grads

rng = np.random.default_rng(2212)


def arr(*shape):
    return rng.normal(size=shape)


# ---------------------------------------------------------------------------
# bugs found by autograd's test suite


@pytest.mark.parametrize("ashape,bshape", [((2, 3, 4), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (5, 4, 2)),
                                           ((3, 4), (4,)), ((2, 2, 3, 4), (4,))])
def test_dot_of_nd_arrays_and_vectors(ashape, bshape):
    # np.dot of a 3-D array and a vector raised AxisError in its reverse pass
    check_grads(np.dot, arr(*ashape), arr(*bshape))


def test_column_stack_of_one_vector():
    # np.column_stack(x) of a 1-D x reads each element as a 1x1 block: its reverse raised IndexError
    check_grads(np.column_stack, arr(3))
    check_grads(lambda x, y: np.column_stack((x, y)), arr(3), arr(3, 2))
    check_grads(lambda x, y: np.column_stack([x, y]), arr(4), arr(4), order=1)


LISTS_AT_SECOND_ORDER = pytest.mark.xfail(
    strict=True, reason="engine limit: derivatives of derivatives through lists are not supported (higher.py)")


@LISTS_AT_SECOND_ORDER
def test_column_stack_of_a_list_second_order():
    check_grads(lambda x, y: np.column_stack([x, y]), arr(4), arr(4))


@dplus.define_dplus
def _many_keywords(x, f=1.0, fn=1.0, obj=1.0, name=1.0, T=1.0, P=1.0, self=1.0, func=1.0, d=1.0):
    return x * f * fn * obj * name * T * P * self * func * d


def test_keyword_arguments_named_like_dplus_helpers_parameters():
    # `call(f, *args, **kwargs)` and the other call helpers took a keyword `f=` as their own
    # parameter: "TypeError: call() got multiple values for argument 'f'"
    def g(x):
        return _many_keywords(x, f=2.0, fn=x, obj=1.5, name=x, T=1.0, P=x, self=2.0, func=1.0, d=1.0)

    assert dplus.grad(g)(3.0) == (24 * 3.0 ** 3,)  # 6 x^4
    assert dplus.grad(dplus.grad1(g))(3.0) == (72 * 3.0 ** 2,)

    def through_partial(x):
        import functools
        return functools.partial(_many_keywords, func=x)(x, f=x)

    assert dplus.grad(through_partial)(3.0) == (27.0,)

    class C:
        @dplus.define_dplus
        def m(self, x, obj=1.0, name=2.0):
            return x * obj * name

    assert dplus.grad(lambda x: C().m(x, obj=x, name=x))(3.0) == (27.0,)

    def update(x):
        d = {}
        d.update(d=x)
        return d["d"] * x

    assert dplus.grad(update)(3.0) == (6.0,) and dplus.grad(dplus.grad1(update))(3.0) == (2.0,)
