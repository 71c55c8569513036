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
    assert math.isclose(a, b, rel_tol=tol, abs_tol=tol), (a, b)
