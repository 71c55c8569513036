"""Trust, third round (issues #18, #20, #26): regression tests of the bugs fixed on branch
trust3, each against central finite differences on several inputs, at first and second order
(third where the bug was there), on the fast and the general path. tests/fuzz/FINDINGS.md has
the reproductions and the mechanisms."""

from __future__ import annotations

import collections
import functools
import itertools
import math
import operator

import numpy as np
import pytest
from path_helpers import check_first_order, check_second_order, close, fd_gradient

import dplus
from dplus import grad, grad1
from dplus.transform.transformer import general_paths_only

POINTS = [(1.190105, -0.4), (-1.565679, 0.97367), (0.35, 1.7)]


# ---------------------------------------------------------------------------
# F14 (and the CI crash at seed 9910164): rules that call their function argument through
# _iterables.Calls, at the second order. Calls was a dplus class, run as it is by the default
# policy when its rule was differentiated again, with the function wrapped as a primal-only
# callable: the closure sensitivity came back in the wrapper's layout (a tuple added to a
# float, a raw TypeError) or, once Calls was differentiated from source, an object dplus did
# not track (its attributes' sensitivities were lost: a wrong Hessian).


def seed_9910164(x2, y):
    v6 = 0.5 * y
    xs7 = [x2]
    try:
        pass
    finally:
        g10 = lambda u11, w12=v6: functools.reduce(lambda a13, b14: w12, xs7, u11)
        v15 = g10(v6, w12=xs7[-1])
    return x2 * v15 + v6 * y


def reduce_reads_variable(x, y):
    t = (y, x, y)
    w = x * y
    return functools.reduce(lambda a, b: a * b + w, t, w)


def reduce_no_initial(x, y):
    return functools.reduce(lambda a, b: a * b * y, (x, x, y))


def reduce_of_a_global_function(x, y):
    return functools.reduce(operator.mul, [x, y, x * y], 1.5)


def map_reads_variable(x, y):
    return sum(map(lambda v: v * v * y, [x, y, x * y]))


def map_two_lists(x, y):
    return sum(list(map(lambda a, b: a * b + x, [x, y], [y, y * y])))


def accumulate_with_lambda(x, y):
    out = list(itertools.accumulate([x, y, x * y], lambda a, b: a * b + y))
    return out[-1] * out[1]


def accumulate_initial(x, y):
    return sum(itertools.accumulate([x, y], operator.mul, initial=y))


def starmap_reads_variable(x, y):
    return sum(itertools.starmap(lambda a, b: a * b * x, [(x, y), (y, y)]))


def partial_of_lambda(x, y):
    return functools.partial(lambda a, b: a * b * b, x)(y)


def partial_with_keywords(x, y):
    g = functools.partial(lambda a, b, c=1.0: a * b * c * c, x, c=y)
    return g(y) + g(x, c=x * y)


def partial_reads_variable(x, y):
    g = functools.partial(lambda a, b: a * b * b + y, x)
    return g(y) * g(x)


def _three(a, b, c=1.0):
    return a * b * c * c


def partial_bound_keyword_called_twice(x, y):
    # (a wrong Hessian before: the sum of two calls' keyword sensitivities was a plain dict,
    # which the next order took for a dict of the program's)
    g = functools.partial(_three, x, c=y)
    return g(y) + g(x)


def partial_of_lambda_bound_keyword_called_twice(x, y):
    g = functools.partial(lambda a, b, c=1.0: a * b * c * c, x, c=y)
    return g(y) + g(x)


F14 = [
    partial_bound_keyword_called_twice,
    partial_of_lambda_bound_keyword_called_twice,
    seed_9910164,
    reduce_reads_variable,
    reduce_no_initial,
    reduce_of_a_global_function,
    map_reads_variable,
    map_two_lists,
    accumulate_with_lambda,
    accumulate_initial,
    starmap_reads_variable,
    partial_of_lambda,
    partial_with_keywords,
    partial_reads_variable,
]


@pytest.mark.parametrize("f", F14, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args", POINTS)
def test_function_arguments_first_order(f, args):
    check_first_order(f, *args)


@pytest.mark.parametrize("f", F14, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args", POINTS)
def test_function_arguments_second_order(f, args):
    check_second_order(f, *args)


def test_the_ci_crash_reproduction_as_it_was_found():
    def f(x2):
        v6 = 0.5
        xs7 = [x2]
        try:
            pass
        finally:
            g10 = lambda u11, w12=v6: functools.reduce(lambda a13, b14: w12, xs7, u11)
            g10(v6, w12=xs7[-1])
        return x2

    for x in (1.190105, -0.3, 2.5):
        assert dplus.hessian(f)(x) == ((0.0,),)
        assert grad(f)(x) == (1.0,)


@pytest.mark.parametrize("x", [0.4, 1.3, -0.7])
def test_reduce_third_order(x):
    def f(s):
        return functools.reduce(lambda a, b: a * b + s, (s, s, 2.0))

    d3 = grad1(grad1(grad1(f)))(x)
    h = 1e-4
    fd = (grad1(grad1(f))(x + h) - grad1(grad1(f))(x - h)) / (2 * h)
    assert math.isclose(d3, fd, rel_tol=1e-5, abs_tol=1e-6)


# ---------------------------------------------------------------------------
# np.ndindex inside differentiated code: a class constructed from its __init__'s source, where
# itertools.product was an eager list, and its __next__ called next() on it (a raw TypeError).
# It yields index tuples: registered as non-differentiable, run as it is.


def ndindex_of_shape(A):
    s = 0.0
    for idx in np.ndindex(A.shape):
        s = s + A[idx] * A[idx] * A[0, 0]
    return s


def ndindex_of_sizes(A):
    s = 0.0
    for i, j in np.ndindex(*A.shape):
        s = s + np.sin(A[i, j]) * (i + 1.0) * A[j, i]
    return s


ARRAYS = [
    np.array([[0.5, -1.0], [2.0, 0.3]]),
    np.array([[1.2, 0.1, -0.6], [0.4, 0.9, 1.5]]),
    np.array([[-0.2, 0.8], [0.6, -1.4]]),
]


def _fd_array_gradient(f, A, eps=1e-6):
    out = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        up, down = A.copy(), A.copy()
        up[idx] += eps
        down[idx] -= eps
        out[idx] = (f(up) - f(down)) / (2 * eps)
    return out


@pytest.mark.parametrize("f", [ndindex_of_shape, ndindex_of_sizes], ids=lambda f: f.__name__)
@pytest.mark.parametrize("k", range(len(ARRAYS)))
def test_ndindex_first_order(f, k):
    A = ARRAYS[k]
    if f is ndindex_of_sizes and A.shape[0] != A.shape[1]:
        A = A[:, :2]
    before = A.copy()
    assert dplus.dplus(f)(A).primal == f(A)
    (g,) = grad(f)(A)
    np.testing.assert_allclose(g, _fd_array_gradient(f, A), rtol=1e-6, atol=1e-7)
    with general_paths_only():
        np.testing.assert_allclose(grad(f)(A)[0], g, rtol=1e-12)
    np.testing.assert_array_equal(A, before)


@pytest.mark.parametrize("f", [ndindex_of_shape, ndindex_of_sizes], ids=lambda f: f.__name__)
@pytest.mark.parametrize("k", range(len(ARRAYS)))
def test_ndindex_second_order(f, k):
    A = ARRAYS[k]
    if f is ndindex_of_sizes and A.shape[0] != A.shape[1]:
        A = A[:, :2]
    direction = np.linspace(-1.0, 1.0, A.size).reshape(A.shape)
    (hv,) = dplus.hvp(f)((A,), (direction,))
    h = 1e-5
    fd = (grad(f)(A + h * direction)[0] - grad(f)(A - h * direction)[0]) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# collections.deque at the second order: the box map's transposes (dplus.higher.box_map) took a deque
# for an object (a dict of attributes): SensitivityError "a dict was given as the sensitivity
# of a list". And at first order a deque read whole (max, list, copy) and then grown was
# refused ("a sensitivity of length 3 was given for a list of length 4"), where a list works.


def deque_read_whole_then_grown(x, y):
    d = collections.deque([x, y, x * y])
    d.append(max(d))
    d.append(list(d)[-1] * sorted(d)[0])
    e = d.copy()
    e.reverse()
    d.appendleft(e[0] * y)
    return sum(d) * d[0] + x * d[-1]


def deque_window(x, y):
    d = collections.deque(maxlen=3)
    for v in (x, y, x * y, y * y):
        d.append(v * x)
    d.rotate(1)
    v = d.popleft()
    d.extendleft((v, y))
    t = 0.0
    for e in d:
        t += e * e
    return t + d[1] * d[-1]


DEQUES = [deque_read_whole_then_grown, deque_window]


@pytest.mark.parametrize("f", DEQUES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args", POINTS)
def test_deque_first_order(f, args):
    check_first_order(f, *args)


@pytest.mark.parametrize("f", DEQUES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args", POINTS)
def test_deque_second_order(f, args):
    check_second_order(f, *args)


# ---------------------------------------------------------------------------
# max((s, s * s)) * s at the third order: SensitivityError "cannot add tuple sensitivities of
# lengths 2 and 0". max's rule picked its index with a helper (a call of max, then
# tuple.index) that the third order differentiated from its source; the index is piecewise
# constant: the helper is now registered as non-differentiable.


@pytest.mark.parametrize("s", [0.5, 1.7, -0.3, 2.4])
def test_max_of_a_tuple_third_order(s):
    def f(s):
        return max((s, s * s)) * s + min([s * 3.0, s * s * s]) * s

    def d2(v):
        return grad1(grad1(f))(v)

    h = 1e-4
    fd = (d2(s + h) - d2(s - h)) / (2 * h)
    assert math.isclose(grad1(grad1(grad1(f)))(s), fd, rel_tol=1e-5, abs_tol=1e-5)
    close(fd_gradient(f, (s,)), (grad1(f)(s),), tol=1e-5)
