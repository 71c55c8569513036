"""dplus.checkpoint and dplus.checkpoint_loop: the same numbers as the plain code, at every
order, on both paths; recomputation that would differ is refused, never silently used."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import check_fd, close, fd_gradient, fd_hessian

import dplus
from dplus import NonDifferentiableError, checkpoint, checkpoint_loop, define_dplus, grad, grad1
from dplus.transform.transformer import general_paths_only

finite = st.floats(-2.0, 2.0, allow_nan=False)


# -- a function checkpointed as a whole ---------------------------------------------------


def model(x, y):
    t = x
    for k in range(4):
        t = math.sin(t) * y + 0.1 * k * x
    return t * t + y


cmodel = checkpoint(model)
define_dplus(model)  # the reference: the same function differentiated with its record


@define_dplus
def uses_checkpoint(x, y):
    return cmodel(x, y) * 2.0 + cmodel(y * y, x) - x


@define_dplus
def uses_plain(x, y):
    return model(x, y) * 2.0 + model(y * y, x) - x


def both(f, *args):
    fast = grad(f)(*args)
    with general_paths_only():
        general = grad(f)(*args)
    return fast, general


@settings(max_examples=25, deadline=None)
@given(finite, finite)
def test_checkpointed_call_equals_plain_gradient(x, y):
    fast, general = both(uses_checkpoint, x, y)
    ref = grad(uses_plain)(x, y)
    close(fast, ref)
    close(general, ref)
    close(fast, fd_gradient(uses_checkpoint, (x, y)), tol=1e-5)


@pytest.mark.parametrize("x,y", [(0.3, 0.7), (-1.1, 0.4), (1.7, -0.9)])
def test_checkpointed_call_second_order(x, y):
    h = dplus.hessian(uses_checkpoint)(x, y)
    close(h, dplus.hessian(uses_plain)(x, y))
    close(h, fd_hessian(uses_checkpoint, (x, y)), tol=1e-5)


def test_checkpointed_call_third_order():
    d3 = grad1(grad1(grad1(lambda x: uses_checkpoint(x, 0.6))))
    ref = grad1(grad1(grad1(lambda x: uses_plain(x, 0.6))))
    for x in (0.2, -0.7, 1.3):
        assert math.isclose(d3(x), ref(x), rel_tol=1e-9, abs_tol=1e-12)


@define_dplus
def closure_checkpointed(x, w):
    scaled = checkpoint(lambda y: math.sin(y) * w + x * y)  # made inside differentiated code
    return scaled(x * x) * w + scaled(w)


@define_dplus
def closure_plain(x, w):
    scaled = lambda y: math.sin(y) * w + x * y
    return scaled(x * x) * w + scaled(w)


@pytest.mark.parametrize("x,w", [(0.4, 1.2), (-0.8, 0.3), (1.5, -1.1)])
def test_closure_made_inside_differentiated_code(x, w):
    fast, general = both(closure_checkpointed, x, w)
    ref = grad(closure_plain)(x, w)
    close(fast, ref)
    close(general, ref)
    close(dplus.hessian(closure_checkpointed)(x, w), dplus.hessian(closure_plain)(x, w))
    check_fd(closure_checkpointed, x, w)


def test_arrays_and_keywords():
    def layer(x, W, *, scale):
        return np.tanh(W @ x) * scale

    clayer = checkpoint(layer)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 3))

    def loss(x):
        return np.sum(clayer(x, W, scale=2.0) ** 2)

    def loss_plain(x):
        return np.sum(layer(x, W, scale=2.0) ** 2)

    define_dplus(layer)
    for _ in range(3):
        x = rng.normal(size=3)
        g = grad1(loss)(x)
        assert g.shape == (3,)
        assert np.allclose(g, grad1(loss_plain)(x), rtol=1e-12, atol=1e-12)
        eps = 1e-6
        fd = [(loss(x + eps * e) - loss(x - eps * e)) / (2 * eps) for e in np.eye(3)]
        assert np.allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_plain_semantics_without_gradient():
    calls = []

    def f(x, y=1.0):
        calls.append((x, y))
        return x * y

    cf = checkpoint(f)
    assert cf(2.0, y=3.0) == 6.0
    assert calls == [(2.0, 3.0)]
    assert cf.__name__ == "f"
    assert checkpoint_loop(lambda s: s * 2, 1, 5) == 32


# -- refusals -------------------------------------------------------------------------------


def test_list_argument_is_refused():
    def total(xs):
        return xs[0] * xs[1]

    ctotal = checkpoint(total)
    with pytest.raises(NonDifferentiableError, match="checkpoint.*list.*tuple or an array"):
        grad1(lambda x: ctotal([x, x * 2.0]))(1.0)


def test_randomness_is_refused_not_silently_wrong():
    rng = random.Random(0)

    def noisy(x):
        return x * rng.random()

    cnoisy = checkpoint(noisy)
    with pytest.raises(NonDifferentiableError, match="different result"):
        grad1(lambda x: cnoisy(x) * x)(1.0)


def test_bad_loop_arguments():
    with pytest.raises(dplus.ArgumentError):
        checkpoint_loop(lambda s: s, 1.0, 2.5)
    with pytest.raises(dplus.ArgumentError):
        checkpoint_loop(lambda s: s, 1.0, 3, schedule="revolve?")
    with pytest.raises(dplus.ArgumentError):
        checkpoint(3.0)


# -- a checkpointed loop ----------------------------------------------------------------------

DT = 0.01


def oscillator_step(state, k, c):
    x, v = state
    a = -k * math.sin(x) - c * v
    return (x + DT * v, v + DT * a)


define_dplus(oscillator_step)


def make_sim(n, schedule):
    @define_dplus
    def sim(k, c, x0):
        return checkpoint_loop(lambda s: oscillator_step(s, k, c), (x0, 0.0), n, schedule=schedule)[
            0
        ]

    return sim


def make_plain_sim(n):
    @define_dplus
    def sim(k, c, x0):
        s = (x0, 0.0)
        for _ in range(n):
            s = oscillator_step(s, k, c)
        return s[0]

    return sim


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 16, 50, 101])
@pytest.mark.parametrize("schedule", ["sqrt", "bisection", "none"])
def test_loop_equals_plain_loop(n, schedule):
    sim, plain = make_sim(n, schedule), make_plain_sim(n)
    for args in [(2.0, 0.1, 1.0), (0.5, 0.3, -0.4)]:
        assert sim(*args) == plain(*args)
        fast, general = both(sim, *args)
        ref = grad(plain)(*args)
        close(fast, ref, tol=1e-12)
        close(general, ref, tol=1e-12)


@pytest.mark.parametrize("schedule", ["sqrt", "bisection"])
def test_loop_finite_differences_and_second_order(schedule):
    sim = make_sim(40, schedule)
    for args in [(2.0, 0.1, 1.0), (0.7, 0.5, -1.2)]:
        check_fd(sim, *args)
        close(dplus.hessian(sim)(*args), fd_hessian(sim, args), tol=1e-5)
        close(dplus.hessian(sim)(*args), dplus.hessian(make_plain_sim(40))(*args), tol=1e-10)


def test_loop_over_array_state():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 3)) * 0.3

    def sim(theta):
        return np.sum(
            checkpoint_loop(lambda u: np.tanh(A @ u) * theta + u * 0.5, np.ones(3) * theta, 30) ** 2
        )

    def plain(theta):
        u = np.ones(3) * theta
        for _ in range(30):
            u = np.tanh(A @ u) * theta + u * 0.5
        return np.sum(u**2)

    for theta in (0.3, 1.1, -0.8):
        assert math.isclose(grad1(sim)(theta), grad1(plain)(theta), rel_tol=1e-10)
        eps = 1e-6
        assert math.isclose(
            grad1(sim)(theta), (plain(theta + eps) - plain(theta - eps)) / (2 * eps), rel_tol=1e-5
        )


def test_loop_state_changed_between_passes_is_refused():
    box = [1.0]

    def sim(k):
        def step(s):
            box[0] += 1.0  # state outside the loop's own: a recomputation would differ
            return s * k + box[0] * 0.0 + (box[0] % 2) * 0.01

        return checkpoint_loop(step, 1.0, 9)

    with pytest.raises(NonDifferentiableError, match="different result"):
        grad1(sim)(1.1)


def test_loop_record_is_smaller():
    """The forward record of the checkpointed loop keeps O(sqrt n) states, not n backprops."""
    import gc
    import tracemalloc

    n = 4000
    plain, sim = make_plain_sim(n), make_sim(n, "sqrt")
    peaks = {}
    for name, f in (("plain", plain), ("sqrt", sim), ("bisection", make_sim(n, "bisection"))):
        grad(f)(2.0, 0.1, 1.0)  # transform first
        gc.collect()
        tracemalloc.start()
        grad(f)(2.0, 0.1, 1.0)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks["sqrt"] < peaks["plain"] / 4, peaks
    assert peaks["bisection"] < peaks["plain"] / 4, peaks
