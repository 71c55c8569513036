"""dplus.checkpoint and dplus.checkpoint_loop: the same numbers as the plain code, at every
order, on both paths; recomputation that would differ is refused, never silently used."""

from __future__ import annotations

import functools
import gc
import math
import random
import weakref

import numpy as np
import pytest
from dplus.primitives import revolve
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import check_fd, close, fd_gradient, fd_hessian

import dplus
from dplus import NonDifferentiableError, checkpoint, checkpoint_loop, define_dplus, grad, grad1
from dplus.rules import defnondiff
from dplus.runtime.closures import is_plus_function, user_function
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


# -- the binomial schedule ("revolve") -----------------------------------------------------


@functools.cache
def fewest_advances(l, s):
    """Exhaustive search: the fewest plain step evaluations that reverse ``l`` steps with ``s``
    states kept at once (the first included), the forward sweep included."""
    if l <= 1:
        return 0
    if s == 1:
        return l * (l - 1) // 2  # each step reached again from the first state
    return min(j + fewest_advances(l - j, s - 1) + fewest_advances(j, s) for j in range(1, l))


def advances_of_split(l, s):
    if l <= 1:
        return 0
    if s == 1:
        return l * (l - 1) // 2
    j = revolve.split(l, s)
    assert 1 <= j < l
    return j + advances_of_split(l - j, s - 1) + advances_of_split(j, s)


def test_revolve_arithmetic_is_the_optimum():
    for s in range(1, 7):
        for l in range(1, 130):
            best = fewest_advances(l, s)
            assert revolve.minimal_advances(l, s) == best, (l, s)
            assert advances_of_split(l, s) == best, (l, s)


STEP_CALLS = [0]


def count_step_call():
    STEP_CALLS[0] += 1


defnondiff(count_step_call)


def counted_oscillator_step(state, k, c):
    count_step_call()
    return oscillator_step(state, k, c)


define_dplus(counted_oscillator_step)


def make_revolve_sim(n, snapshots, step=oscillator_step):
    @define_dplus
    def sim(k, c, x0):
        s = checkpoint_loop(
            lambda s: step(s, k, c), (x0, 0.0), n, schedule="revolve", snapshots=snapshots
        )
        return s[0]

    return sim


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 16, 50, 101])
@pytest.mark.parametrize("snapshots", [1, 2, 3, 5, 200])
def test_revolve_equals_plain_loop(n, snapshots):
    sim, plain = make_revolve_sim(n, snapshots), make_plain_sim(n)
    for args in [(2.0, 0.1, 1.0), (0.5, 0.3, -0.4)]:
        assert sim(*args) == plain(*args)
        fast, general = both(sim, *args)
        ref = grad(plain)(*args)
        close(fast, ref, tol=1e-12)
        close(general, ref, tol=1e-12)


def test_revolve_finite_differences_and_second_order():
    # (the second order records the loop whatever the schedule: one number of snapshots)
    sim = make_revolve_sim(40, 3)
    for args in [(2.0, 0.1, 1.0), (0.7, 0.5, -1.2)]:
        check_fd(sim, *args)
        h = dplus.hessian(sim)(*args)
        close(h, fd_hessian(sim, args), tol=1e-5)
        close(h, dplus.hessian(make_plain_sim(40))(*args), tol=1e-10)


@pytest.mark.parametrize(
    "n,snapshots", [(1, 1), (2, 2), (7, 1), (20, 2), (20, 3), (57, 3), (57, 5), (300, 4), (60, 60)]
)
def test_revolve_recomputes_the_fewest_steps(n, snapshots):
    sim = make_revolve_sim(n, snapshots, counted_oscillator_step)
    grad(sim)(2.0, 0.1, 1.0)  # (transformations)
    STEP_CALLS[0] = 0
    grad(sim)(2.0, 0.1, 1.0)
    # each step recorded once, and the fewest plain evaluations with that many states
    assert STEP_CALLS[0] == n + revolve.minimal_advances(n, snapshots)
    assert STEP_CALLS[0] == n + fewest_advances(n, snapshots)


class LoopState(np.ndarray):
    """An array that counts how many of its kind are alive; arithmetic on it gives plain arrays."""

    __module__ = "numpy"  # (an array to dplus, not a user object)
    alive = [0]

    def __array_finalize__(self, obj):
        LoopState.alive[0] += 1
        weakref.finalize(self, LoopState.gone)

    @staticmethod
    def gone():
        LoopState.alive[0] -= 1

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, LoopState) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)


MOST_ALIVE = [0]


def as_loop_state(u):
    out = np.array(u).view(LoopState)
    MOST_ALIVE[0] = max(MOST_ALIVE[0], LoopState.alive[0])
    return out


dplus.register_primitive(
    as_loop_state, lambda u: dplus.ProcResult(as_loop_state(u), lambda A, Abox: ((), A))
)
MIX = np.array([[0.2, -0.1, 0.0], [0.05, 0.3, 0.1], [0.0, -0.2, 0.25]])


def make_array_loop(n, **schedule):
    def loss(theta):
        u0 = np.ones(3) * theta  # (a plain array: the loop's states are the steps' results)
        u = checkpoint_loop(
            lambda u: as_loop_state(np.tanh(MIX @ u) * theta + 0.5 * u), u0, n, **schedule
        )
        return np.sum(np.asarray(u) ** 2)

    return loss


@pytest.mark.parametrize("n,snapshots", [(20, 1), (20, 2), (57, 3), (57, 5), (200, 4), (200, 9)])
def test_revolve_keeps_at_most_its_snapshots(n, snapshots):
    loss = make_array_loop(n, schedule="revolve", snapshots=snapshots)
    g = grad1(loss)(0.7)
    gc.collect()  # (what earlier gradients left in reference cycles)
    assert LoopState.alive[0] == 0
    MOST_ALIVE[0] = 0
    assert grad1(loss)(0.7) == g
    # the snapshots but the first (a copy of the plain initial array), the loop's result (the
    # caller's), the state being advanced and the next one, and the state of the last step
    # reversed (the next one reversed must recompute it)
    assert MOST_ALIVE[0] <= (snapshots - 1) + 4
    assert LoopState.alive[0] == 0
    MOST_ALIVE[0] = 0
    grad1(make_array_loop(n, schedule="none"))(0.7)
    assert MOST_ALIVE[0] >= n  # (what the count would see of a schedule keeping every state)
    plain = make_array_loop(n, schedule="none")
    assert g == pytest.approx(grad1(plain)(0.7), rel=1e-12)


def test_revolve_backprop_runs_again():
    # a jacobian runs the backprop once per output: the second run starts from the first state
    def two(k):
        s = checkpoint_loop(
            lambda s: oscillator_step(s, k, 0.2), (1.0, 0.0), 30, schedule="revolve", snapshots=3
        )
        return s[0], s[1] * k

    def two_plain(k):
        s = (1.0, 0.0)
        for _ in range(30):
            s = oscillator_step(s, k, 0.2)
        return s[0], s[1] * k

    for k in (0.5, 2.0):
        close(dplus.jacobian(two)(k), dplus.jacobian(two_plain)(k), tol=1e-12)


def test_revolve_refuses_a_recomputation_that_differs():
    box = [1.0]

    def sim(k):
        def step(s):
            box[0] += 1.0
            return s * k + (box[0] % 2) * 0.01

        return checkpoint_loop(step, 1.0, 9, schedule="revolve", snapshots=2)

    with pytest.raises(NonDifferentiableError, match="different result"):
        grad1(sim)(1.1)


def test_revolve_arguments():
    with pytest.raises(dplus.ArgumentError, match="snapshots=k"):
        checkpoint_loop(lambda s: s, 1.0, 3, schedule="revolve")
    with pytest.raises(dplus.ArgumentError, match="snapshots=k"):
        checkpoint_loop(lambda s: s, 1.0, 3, schedule="revolve", snapshots=0)
    with pytest.raises(dplus.ArgumentError, match="is for schedule='revolve'"):
        checkpoint_loop(lambda s: s, 1.0, 3, snapshots=2)
    with pytest.raises(dplus.ArgumentError, match="snapshots=k"):
        grad1(lambda x: checkpoint_loop(lambda s: s * x, 1.0, 3, schedule="revolve"))(2.0)
    assert checkpoint_loop(lambda s: s * 2, 1, 5, schedule="revolve", snapshots=2) == 32


# -- recomputing at the primal's speed: the user's function behind a plus-function -----------

SEEN = []


def see(f):
    SEEN.append(f)
    return 0.0


defnondiff(see)
OFFSET = 0.25


def makes_steps(c, d):
    def named(s):
        return s * c + OFFSET

    with_default = lambda s, k=3.0: s * d * k
    inner = lambda s: s * c
    calls_inner = lambda s: inner(s) + d
    total = 0.0
    for f in (named, with_default, calls_inner):
        see(f)
        total += f(c)
    return total


def test_user_function_rebuilt_only_when_it_means_the_same():
    SEEN.clear()
    grad(makes_steps)(1.5, 2.0)
    named, with_default, calls_inner = SEEN
    rebuilt = user_function(named, 1)
    assert rebuilt is not None and not is_plus_function(rebuilt)
    consts = makes_steps.__code__.co_consts
    assert rebuilt.__code__ is next(c for c in consts if getattr(c, "co_name", "") == "named")
    assert rebuilt(2.0) == 2.0 * 1.5 + OFFSET == named(2.0).primal
    assert user_function(named, 2) is None  # (a call with another number of arguments)
    rebuilt = user_function(with_default, 1)  # its default is not rebuilt: refused
    assert rebuilt is None
    assert user_function(with_default, 2)(2.0, 5.0) == 2.0 * 2.0 * 5.0
    assert user_function(calls_inner, 1) is None  # a plain call of a plus-function: refused


def make_loop_with(kind):
    @define_dplus
    def sim(k, c, x0):
        g = lambda s: oscillator_step(s, k, c)
        steps = {
            "lambda": lambda s: oscillator_step(s, k, c),
            "default": lambda s, k=k: oscillator_step(s, k, c),
            "captures a closure": lambda s: g(s),
        }
        s = checkpoint_loop(steps[kind], (x0, 0.0), 30, schedule="revolve", snapshots=3)
        return s[0]

    return sim


@pytest.mark.parametrize("kind", ["lambda", "default", "captures a closure"])
def test_loop_steps_made_inside_differentiated_code(kind):
    sim, plain = make_loop_with(kind), make_plain_sim(30)
    for args in [(2.0, 0.1, 1.0), (0.5, 0.3, -0.4)]:
        close(grad(sim)(*args), grad(plain)(*args), tol=1e-12)
