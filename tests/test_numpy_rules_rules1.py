"""NumPy rules found missing or unchecked (issues #22, #26): ``ufunc.accumulate`` of
``maximum minimum fmax fmin multiply``, and the refusal of an argument whose class takes
over NumPy's dispatch, for every NumPy rule (not only ``defgrad``'s).

Derivatives are checked by ``array_checks.check_grads`` (central differences along random
directions, first and second order) on a few shapes and axes.
"""

from __future__ import annotations

import numpy as np
import pytest
from array_checks import check_grads

import dplus

rng = np.random.default_rng(2226)

SHAPES_AXES = [((6,), 0), ((3, 4), 1), ((4, 2, 3), 0)]


@pytest.mark.parametrize("uf", [np.maximum, np.minimum, np.fmax, np.fmin, np.multiply])
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
def test_ufunc_accumulate(uf, shape, axis):
    check_grads(lambda x: uf.accumulate(x, axis=axis), rng.normal(size=shape))


def test_accumulate_positional_axis_and_default_axis():
    x = rng.normal(size=(3, 4))
    check_grads(lambda x: np.maximum.accumulate(x, 1), x, order=1)
    check_grads(lambda x: np.minimum.accumulate(x), x, order=1)


def _running_max_by_prefix(x, A):
    """The sensitivity of ``x`` as ``np.max`` of each prefix gives it: split between ties."""
    out = np.zeros_like(x)
    for i in range(len(x)):
        ties = np.flatnonzero(x[: i + 1] == x[: i + 1].max())
        out[ties] += A[i] / len(ties)
    return out


@pytest.mark.parametrize(
    "x",
    [
        [1.0, 3.0, 3.0, 2.0, 3.0, 5.0, 5.0],
        [2.0, 2.0, 2.0, 2.0],
        [4.0, 1.0, 4.0, 0.0, 4.0, 6.0, 1.0, 6.0],
    ],
)
def test_running_max_splits_ties_like_max_of_each_prefix(x):
    x = np.array(x)
    A = rng.normal(size=x.shape)
    (g,) = dplus.grad(lambda x: np.sum(np.maximum.accumulate(x) * A))(x)
    np.testing.assert_allclose(g, _running_max_by_prefix(x, A), rtol=1e-12, atol=1e-12)
    (g,) = dplus.grad(lambda x: np.sum(np.minimum.accumulate(-x) * A))(x)
    np.testing.assert_allclose(g, -_running_max_by_prefix(x, A), rtol=1e-12, atol=1e-12)


def test_running_product_is_exact_with_zeros():
    x = np.array([1.5, 0.0, 2.0, -1.0, 0.0, 3.0])
    A = rng.normal(size=x.shape)
    (g,) = dplus.grad(lambda x: np.sum(np.multiply.accumulate(x) * A))(x)
    expected = np.zeros_like(x)  # d/dx_j of sum_i A_i prod_{k<=i} x_k, term by term
    for i in range(len(x)):
        for j in range(i + 1):
            expected[j] += A[i] * np.prod(np.delete(x[: i + 1], j))
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, dplus.grad(lambda x: np.sum(np.cumprod(x) * A))(x)[0])


def test_accumulate_of_other_ufuncs_is_refused_by_name():
    x = rng.normal(size=4)
    with pytest.raises(dplus.DplusError, match=r"numpy\.arctan2\.accumulate"):
        dplus.grad(lambda x: np.sum(np.arctan2.accumulate(x)))(x)


# ---------------------------------------------------------------------------
# arguments whose class takes over NumPy's dispatch


def _unwrapped(x):
    if isinstance(x, Wrapper):
        return x.data
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrapped(e) for e in x)
    return x


class Wrapper:
    """Not an array: NumPy hands every function given one to ``__array_function__``, which
    here computes ``scale`` times the plain function."""

    scale = 1.0

    def __init__(self, data):
        self.data = np.asarray(data, dtype=float)

    def __array_function__(self, func, types, args, kwargs):
        return self.scale * func(*_unwrapped(args), **kwargs)

    def __array__(self, dtype=None, copy=None):
        return self.data


class Doubling(Wrapper):
    scale = 2.0


class UfuncWrapper(Wrapper):
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return getattr(ufunc, method)(*_unwrapped(inputs), **kwargs)


CONSTANT = np.array([3.0, -1.0, 2.0])


@pytest.mark.parametrize(
    "name,f",
    [
        ("numpy.sum", lambda x: np.sum(Wrapper(x * x))),
        ("numpy.dot", lambda x: np.dot(Wrapper(x), x)),
        ("numpy.dot", lambda x: np.dot(Doubling(CONSTANT), x)),  # the result is a plain number
        ("numpy.mean", lambda x: x[0] * np.mean(Doubling(CONSTANT))),
        ("numpy.concatenate", lambda x: np.sum(np.concatenate([Doubling(CONSTANT), x]))),
        ("numpy.stack", lambda x: np.sum(np.stack([[x, Doubling(CONSTANT)]]))),
        ("numpy.einsum", lambda x: np.einsum("i,i", Doubling(CONSTANT), x)),
        ("numpy.sin", lambda x: np.sum(np.sin(UfuncWrapper(x)))),
        ("numpy.add.reduce", lambda x: np.add.reduce(UfuncWrapper(x)) + np.sum(x)),
    ],
)
def test_a_dispatch_override_is_refused_by_name(name, f):
    x = np.array([0.5, 1.0, -2.0])
    with pytest.raises(dplus.NonDifferentiableError, match=rf"{name} was given a \w+"):
        dplus.grad(f)(x)


# ---------------------------------------------------------------------------
# np.fromiter


@pytest.mark.parametrize("n", [1, 4, 7])
def test_fromiter_of_a_generator_a_list_and_map(n):
    x = rng.normal(size=n)
    check_grads(lambda x: np.fromiter((np.sin(v) * v for v in x), float), x)
    check_grads(lambda x: np.fromiter([v * v for v in x], dtype=float) * x, x)
    check_grads(lambda x: np.fromiter(map(np.exp, x), np.float64, n), x, order=1)


def test_fromiter_with_count_takes_only_count_values():
    def f(xs):
        it = iter(xs)
        head = np.fromiter(it, float, 2)
        return np.sum(head * head) + 10.0 * next(it)  # the iterator goes on after the head

    xs = [1.0, 2.0, 3.0, 4.0]
    assert f(xs) == 35.0
    assert dplus.grad(f)(xs) == ([2.0, 4.0, 10.0, 0.0],)
    x = rng.normal(size=5)
    check_grads(lambda x: np.fromiter((v * v for v in x), float, count=3), x)


def test_fromiter_of_integers_carries_nothing_and_a_plain_iterator_refuses():
    assert dplus.grad(lambda x: x * np.sum(np.fromiter(range(4), int)))(2.0) == (6.0,)

    class Values:
        def __init__(self, v):
            self.v = v

        def __iter__(self):
            return iter((self.v, 2.0 * self.v))

    with pytest.raises(dplus.DplusError, match=r"numpy\.fromiter\(\)"):
        dplus.grad(lambda x: np.sum(np.fromiter(Values(x), float)))(1.5)


# ---------------------------------------------------------------------------
# np.apply_along_axis and np.vectorize: the Python function through its transform


@dplus.define_dplus
def _norm(v):
    return np.sqrt(np.sum(v * v))


@dplus.define_dplus
def _moments(v, p):
    return np.array([np.sum(v), np.sum(v**p) / len(v)])


@pytest.mark.parametrize(
    "shape,axis", [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 2), -1), ((2, 3, 2), 1)]
)
def test_apply_along_axis(shape, axis):
    x = rng.normal(size=shape)
    check_grads(lambda x: np.apply_along_axis(_norm, axis, x), x)
    check_grads(lambda x: np.apply_along_axis(_moments, axis, x, 3), x, order=1)


def test_apply_along_axis_of_a_nested_function_and_keywords():
    x = rng.normal(size=(3, 4))
    check_grads(lambda x: np.apply_along_axis(lambda v, s=1.0: s * np.max(v) * v, 1, x, s=2.0), x)


@dplus.define_dplus
def _branchy(a, b):
    return a * np.sin(b) if a > 0 else b * b


def test_vectorize():
    x, y = rng.normal(size=(2, 3)), rng.normal(size=3)
    check_grads(lambda x, y: np.vectorize(_branchy)(x, y), x, y)
    check_grads(lambda x: np.vectorize(lambda t: t**3, otypes=[float])(x), rng.normal(size=5))
    check_grads(lambda x, y: np.vectorize(_branchy)(x, 0.5) * y, 1.3, rng.normal(size=2))
    check_grads(lambda x, y: np.vectorize(_branchy)(x, b=y), x, y, order=1)  # keywords too


def test_callbacks_are_called_as_numpy_calls_them():
    seen = []

    def f(x):
        def logged(t):
            seen.append(t)
            return t * t

        return np.sum(np.vectorize(logged)(x)) + np.sum(np.apply_along_axis(logged, 0, x))

    x = np.array([1.0, 2.0, 3.0])
    plain = f(x)
    calls = list(seen)
    seen.clear()
    (g,) = dplus.grad(f)(x)
    assert len(seen) == len(calls) == 5  # vectorize: one extra call on the first element
    for got, want in zip(seen, calls):
        assert type(got) is type(want) and np.array_equal(got, want)
    np.testing.assert_allclose(g, 4 * x)
    assert dplus.lift_dplus(f)(x).primal == plain
    # an integer result, as NumPy types it from the first call: no sensitivity
    assert dplus.grad(lambda x: x * np.sum(np.vectorize(lambda t: int(t))(x * np.ones(3))))(
        2.5
    ) == (6.0,)


def test_vectorize_refuses_what_it_does_not_cover_by_name():
    x = rng.normal(size=3)
    with pytest.raises(dplus.DplusError, match=r"numpy\.vectorize with signature="):
        dplus.grad(lambda x: np.sum(np.vectorize(np.sum, signature="(n)->()")(x)))(x)


# ---------------------------------------------------------------------------
# np.polyfit: a least-squares solve, in y, x and the weights where it has full rank

_FIT_X = np.linspace(-1.0, 1.0, 7) + 0.05 * rng.normal(size=7)


@pytest.mark.parametrize("deg", [1, 3])
def test_polyfit(deg):
    y, Y, w = rng.normal(size=7), rng.normal(size=(7, 2)), rng.uniform(0.5, 2.0, size=7)
    check_grads(lambda x, y: np.polyfit(x, y, deg), _FIT_X, y)
    check_grads(lambda x, Y: np.polyfit(x, Y, deg), _FIT_X, Y, order=1)
    check_grads(lambda y, w: np.polyfit(_FIT_X, y, deg, w=w), y, w, order=1)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.RankWarning")
def test_polyfit_refuses_full_and_a_rank_deficient_fit_by_name():
    y = rng.normal(size=7)
    with pytest.raises(dplus.DplusError, match=r"numpy\.polyfit without full="):
        dplus.grad(lambda y: np.sum(np.polyfit(_FIT_X, y, 2, full=True)[0]))(y)
    repeated = np.array([0.0, 0.0, 1.0, 1.0])  # two distinct points, degree 2: rank 2 of 3
    with pytest.raises(dplus.DplusError, match=r"full-rank"):
        dplus.grad(lambda y: np.sum(np.polyfit(repeated, y, 2)))(y[:4])


def test_the_generic_zero_is_not_a_dispatch_override():
    # (its class sets __array_ufunc__ = None, which makes NumPy refuse ufuncs: no code of it runs)
    from dplus.primitives.numpy import _overridden

    assert not _overridden((dplus.gen_zero, [np.ones(2), 1.0], (2, None)), {"axis": 0})
    assert _overridden((np.ones(2), [[Wrapper([1.0])]]), {})
