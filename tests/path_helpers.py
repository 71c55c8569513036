"""Helpers of the tests that compare the fast paths with the general path."""

from __future__ import annotations

import math

import dplus
from dplus.transformer import general_paths_only


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
