"""``check_grads`` in autograd's style, for the NumPy and SciPy rule tests.

For ``f(*args)`` (arrays, numbers, or tuples of arrays as the result) and a random result
sensitivity ``S``, the loss ``L = Re <S, f(args)>`` is differentiated by ``dplus.grad`` and
the gradient compared with central finite differences of ``L`` along a random direction
``v`` of every argument at once: ``Re <g, v>`` against ``(L(x + h v) - L(x - h v)) / 2h``.
Complex arguments follow the convention of the rules: the sensitivity ``c`` of ``z`` pairs
with a change ``dz`` as ``Re(c * dz)``. At second order the same check is made of
``M = Re <grad L, u>`` for a random ``u``: reverse over reverse against finite differences
of the first-order gradient. Each gradient must also have its argument's shape and dtype,
and the general path (no fast paths) must give the same first-order gradient.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np

import dplus
from dplus.transform.transformer import general_paths_only


def random_like(x: Any, rng: np.random.Generator) -> Any:
    """A random value of ``x``'s kind: a float, an array of its shape and kind, a tuple of them."""
    if isinstance(x, (list, tuple)):
        return type(x)(random_like(e, rng) for e in x)
    if isinstance(x, np.ndarray):
        v = rng.normal(size=x.shape)
        if x.dtype.kind == "c":
            v = v + 1j * rng.normal(size=x.shape)
        return v.astype(x.dtype) if x.dtype.kind in "fc" else v
    if isinstance(x, complex):
        return complex(rng.normal(), rng.normal())
    return float(rng.normal())


@dplus.define_dplus
def pairing(s: Any, x: Any) -> Any:
    """``Re <s, x>``, written in code dplus differentiates (a loop over tuple parts)."""
    if isinstance(x, (list, tuple)):
        total = 0.0
        for i in range(len(x)):
            total = total + pairing(s[i], x[i])
        return total
    return np.real(np.sum(s * x))


def _moved(args: tuple, vs: tuple, t: float) -> tuple:
    return tuple(a + t * v for a, v in zip(args, vs))


def _directional_fd(L: Callable[..., Any], args: tuple, vs: tuple, h: float) -> float:
    up = _moved(args, vs, h)
    down = _moved(args, vs, -h)
    return float((L(*up) - L(*down)) / (2 * h))


def _predicted(gs: tuple, vs: tuple) -> float:
    return float(sum(np.real(np.sum(np.asarray(g) * v)) for g, v in zip(gs, vs)))


def _check_like_arguments(gs: tuple, args: tuple, what: str) -> None:
    assert len(gs) == len(args), what
    for i, (g, a) in enumerate(zip(gs, args)):
        if isinstance(a, np.ndarray):
            assert isinstance(g, np.ndarray), f"{what}: argument {i} got a {type(g).__name__}"
            assert g.shape == a.shape, f"{what}: argument {i} got shape {g.shape}, not {a.shape}"
            assert g.dtype == a.dtype, f"{what}: argument {i} got dtype {g.dtype}, not {a.dtype}"
        else:
            assert np.ndim(g) == 0, f"{what}: argument {i} (a number) got {g!r}"


def check_grads(
    f: Callable[..., Any],
    *args: Any,
    order: int = 2,
    rng: np.random.Generator | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    h: float = 1e-6,
) -> None:
    """Check ``f``'s derivatives in every argument, at first and (``order=2``) second order."""
    rng = rng if rng is not None else np.random.default_rng(0)
    what = getattr(f, "__name__", "f")
    if isinstance(f, types.FunctionType) and f.__module__.split(".")[0] not in ("numpy", "scipy"):
        f = dplus.define_dplus(f)  # a test's lambda: differentiated from its source
    expected = f(*args)
    _assert_same(
        dplus.lift_dplus(f)(*args).primal, expected, what
    )  # differentiating never changes the result
    S = random_like(expected, rng)

    def L(*a: Any) -> Any:
        return pairing(S, f(*a))

    _check_order(L, args, rng, rtol, atol, h, what + " (first order)")
    with general_paths_only():
        general = dplus.grad(L)(*args)
    for g, w in zip(dplus.grad(L)(*args), general):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=what + " general path")
    if order >= 2:
        us = tuple(random_like(a, rng) for a in args)
        gL = dplus.grad(L)

        def M(*a: Any) -> Any:
            return pairing(us, gL(*a))

        _check_order(M, args, rng, rtol * 10, atol * 10, h * 10, what + " (second order)")


def _assert_same(got: Any, want: Any, what: str) -> None:
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (
            what + ": the result changed"
        )
        for g, w in zip(got, want):
            _assert_same(g, w, what)
        return
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype, (
        what + ": the result changed"
    )
    assert np.array_equal(got, want, equal_nan=True), what + ": the result changed"


def _check_order(
    L: Callable[..., Any],
    args: tuple,
    rng: np.random.Generator,
    rtol: float,
    atol: float,
    h: float,
    what: str,
) -> None:
    before = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    gs = dplus.grad(L)(*args)
    for a, b in zip(args, before):  # differentiating never changes the arguments
        assert np.array_equal(a, b), what + ": an argument changed"
    _check_like_arguments(gs, args, what)
    for _ in range(2):
        vs = tuple(random_like(a, rng) for a in args)
        fd = _directional_fd(L, args, vs, h)
        got = _predicted(gs, vs)
        assert abs(got - fd) <= atol + rtol * max(abs(fd), 1.0), (
            f"{what}: <grad, v> = {got!r}, finite differences {fd!r}"
        )
