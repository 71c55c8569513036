"""Helpers of the tests that compare the fast paths with the general path."""

from __future__ import annotations

import math

import dplus
from dplus import grad
from dplus.transform.transformer import general_paths_only


def both_ways(f, *args):
    """``grad(f)(*args)`` with fast paths (and inlining) and with the general path only."""
    fast = dplus.grad(f)(*args)
    with general_paths_only():
        general = dplus.grad(f)(*args)
    return fast, general


def close(a, b, tol=1e-9):
    """``a`` and ``b`` are the same nest of lists, tuples and dicts, with numbers close."""
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (a, b)
        for k in a:
            close(a[k], b[k], tol)
        return
    if a is None or b is None:  # (the sensitivity of a bool)
        assert a is b, (a, b)
        return
    assert math.isclose(a, b, rel_tol=tol, abs_tol=tol), (a, b)


def check_fd(f, *args):
    """``dplus.check_grad`` with an absolute tolerance that scales with ``|f|``: central
    differences lose about ``|f| * 1e-16 / eps`` to rounding (found by hypothesis on
    values near 1e3, where the default 1e-7 is below the rounding error)."""
    import copy

    value = f(*copy.deepcopy(args))
    scale = abs(value) if isinstance(value, (int, float)) else 1.0
    dplus.check_grad(f, *args, atol=max(1e-7, 1e-8 * scale))


def fd_gradient(f, args, eps=1e-6):
    out = []
    for i in range(len(args)):
        up = list(args)
        down = list(args)
        up[i] += eps
        down[i] -= eps
        out.append((f(*up) - f(*down)) / (2 * eps))
    return tuple(out)


def fd_hessian(f, args, eps=1e-5):
    """The Hessian by central differences of dplus's gradient (checked itself in test_trust_closures)."""
    g = grad(f)
    cols = []
    for j in range(len(args)):
        up = list(args)
        down = list(args)
        up[j] += eps
        down[j] -= eps
        gu, gd = g(*up), g(*down)
        cols.append([(a - b) / (2 * eps) for a, b in zip(gu, gd)])
    return tuple(tuple(cols[j][i] for j in range(len(args))) for i in range(len(args)))


def check_first_order(f, *args):
    """The primal is unchanged, both paths agree with each other and with finite differences."""
    r = dplus.lift_dplus(f)(*args)
    assert r.primal == f(*args)
    fast, general = both_ways(f, *args)
    close(fast, general)
    if all(isinstance(a, float) for a in args):
        close(fast, fd_gradient(f, args), tol=1e-5)
    check_fd(f, *args)
    with general_paths_only():
        check_fd(f, *args)


def check_second_order(f, *args):
    h = dplus.hessian(f)(*args)
    close(h, fd_hessian(f, args), tol=1e-5)
    with general_paths_only():
        close(dplus.hessian(f)(*args), h)
