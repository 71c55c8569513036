"""Trust on code written elsewhere (issues #18, #26): regression tests of what running SciPy's
global-optimisation benchmark functions through dplus found (tests/fuzz/FINDINGS.md, "Stop 35,
SciPy go_benchmark_functions"). The functions below are this project's own reproductions of
the constructs, each checked against central finite differences on several random inputs,
with fast paths and with the general path only, at first and second order."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dplus
from dplus.transform.transformer import general_paths_only

rng = np.random.default_rng(3518)


def _fd_gradient(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return g


def _fd_jacobian(g, x, eps=1e-5):
    cols = []
    for j in range(x.size):
        up, down = x.copy(), x.copy()
        up[j] += eps
        down[j] -= eps
        cols.append((np.asarray(g(up)) - np.asarray(g(down))) / (2 * eps))
    return np.stack(cols, axis=1)


def _check_both_orders(f, x):
    """The primal, the gradient against finite differences and the Hessian against finite
    differences of the gradient, with fast paths and with the general path only."""
    for general in (False, True):
        with general_paths_only() if general else _nothing():
            x_before = x.copy()
            value, g = dplus.value_and_grad(f)(x)
            assert np.array_equal(x, x_before)
            assert value == f(x.copy())
            assert np.all(np.isfinite(g)), g
            np.testing.assert_allclose(g, _fd_gradient(f, x), rtol=1e-6, atol=1e-6)
            h = np.asarray(dplus.hessian(f)(x)).reshape(x.size, x.size)

            def gradient(v):
                return dplus.grad(f)(v)[0]

            np.testing.assert_allclose(h, _fd_jacobian(gradient, x), rtol=1e-5, atol=1e-5)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _away_from_zero(n, low=0.2, high=3.0):
    """Random coordinates at least ``low`` away from 0 (the functions below step there)."""
    return rng.choice([-1.0, 1.0], size=n) * rng.uniform(low, high, size=n)


# ---------------------------------------------------------------------------
# float() of a comparison between array elements (an np.bool_) was refused with
# "sensitivity reached a bool converted with its __float__", although a comparison never
# carries sensitivity (SPEC §7): the float is a step, of zero derivative.


def three_legged(x):
    up0 = float(x[0] >= 0)
    up1 = float(x[1] >= 0)
    return up1 * (1.0 + up0) * x[0] ** 2 + np.abs(x[0] + 5.0 * up1 * (1.0 - 2.0 * up0)) * x[1] ** 2


def signs_weighting_a_sum(x):
    weights = [float(v > 0.0) - float(v < 0.0) for v in x]
    return sum(w * v**3 for w, v in zip(weights, x)) + float(np.sum(x) > 0) * np.prod(x)


@pytest.mark.parametrize("f", [three_legged, signs_weighting_a_sum])
@pytest.mark.parametrize("trial", range(4))
def test_float_of_an_array_comparison_is_a_step(f, trial):
    x = _away_from_zero(2 if f is three_legged else 3)
    if f is three_legged and abs(x[0] + 5.0 * (x[1] >= 0) * (1.0 - 2.0 * (x[0] >= 0))) < 0.1:
        x[0] += 0.5  # (away from the kink of the abs)
    _check_both_orders(f, x)


# ---------------------------------------------------------------------------
# A root at 0 that the result does not read: every pairwise distance includes the distance of
# a point to itself, sqrt(0), which np.tril (or np.where) then drops. The zero sensitivity
# times the root's infinite slope made every partial nan; the root now passes nothing back
# where both are 0, and still its infinite slope where the result reads it.


def pairwise_stress(x):
    targets = np.array([1.0, 2.5, 0.7, 1.9, 3.1])
    pts = np.concatenate(([0.0], x))
    diff = pts[:, None] - pts[None, :]
    dist = np.sqrt(diff**2 + (0.5 * diff) ** 2)
    stress = (dist - targets[: pts.size, None]) ** 2
    return np.sum(np.sum(np.tril(stress, -1), axis=1))


def root_of_the_positive_part(x):
    clipped = np.maximum(x, 0.0)
    return np.sum(np.where(x > 0, np.sqrt(clipped) * x, -(x**2))) + np.sum(
        np.where(x > 0, np.cbrt(clipped**2), 0.0) * x
    )


def pairwise_stress_by_powers(x):
    pts = np.concatenate(([0.0], x))
    diff = pts[:, None] - pts[None, :]
    dist = (diff**2) ** 0.5 + np.power(diff**4, 0.25)
    return np.sum(np.tril((dist - 1.5) ** 2, -1))


def scalar_roots_behind_a_zero(x):
    total = 0.0
    for i in range(x.size):
        for j in range(x.size):
            gap = float(x[i] - x[j]) if i != j else 0.0
            weight = 1.0 if i > j else 0.0
            total += weight * (
                math.sqrt(gap * gap) * x[i]
                + abs(gap) ** 0.5
                + math.cbrt(gap)
                + math.pow(gap * gap, 0.25)
            )
    return total


@pytest.mark.parametrize(
    "f",
    [
        pairwise_stress,
        root_of_the_positive_part,
        pairwise_stress_by_powers,
        scalar_roots_behind_a_zero,
    ],
)
@pytest.mark.parametrize("trial", range(4))
def test_a_root_the_result_does_not_read_gives_a_finite_gradient(f, trial):
    _check_both_orders(f, _away_from_zero(rng.integers(2, 5)))


def test_a_root_the_result_reads_at_zero_keeps_its_infinite_slope():
    with np.errstate(divide="ignore"):
        g = dplus.grad(lambda x: np.sum(np.sqrt(x) + np.cbrt(x) + x**0.5))(np.array([0.0, 4.0]))[0]
    assert g[0] == np.inf
    np.testing.assert_allclose(g[1], 0.5 + 1 / (3 * 4.0 ** (2 / 3)))
    assert dplus.grad(lambda x: math.sqrt(x) + math.cbrt(x) + x**0.5 + math.pow(x, 0.5))(0.0) == (
        math.inf,
    )


@pytest.mark.parametrize("trial", range(4))
def test_a_zero_sensitivity_through_a_nonzero_root_keeps_its_second_derivative(trial):
    """Only a zero sensitivity AND a zero root are dropped: with y = 0 the gradient in x is
    0, but the mixed second derivative 1/(2 sqrt x) of y sqrt(x) must survive."""
    x = float(rng.uniform(0.5, 4.0))

    def scaled_root(x, y):
        return y * np.sqrt(x) + y * np.cbrt(x) + y * np.power(x, 0.5)

    def scaled_scalar_root(x, y):
        return y * math.sqrt(x) + y * math.cbrt(x) + y * x**0.5

    def scaled_math_pow(x, y):
        return y * math.pow(x, 0.5) + y * math.sqrt(x) + y * np.cbrt(x)

    mixed = 1 / np.sqrt(x) + 1 / (3 * np.cbrt(x) ** 2)
    for f in (scaled_root, scaled_scalar_root, scaled_math_pow):
        h = dplus.hessian(f)(x, 0.0)
        np.testing.assert_allclose(np.asarray(h, dtype=float), [[0.0, mixed], [mixed, 0.0]])
