"""The performance paths give the general path's results.

Generated code has type-guarded fast variants (float arithmetic inlined, loops over
lists and zips reversed by index, boundaries folding lists of numbers in one pass).
Every test here differentiates the same function twice, once as usual and once
transformed inside ``general_paths_only()``, and compares both with finite
differences or closed forms; and values that must fail a guard (objects with
arithmetic written in Python) must still be differentiated through their methods.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

import dplus
from dplus.transformer import general_paths_only

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)


def both_ways(f, *args):
    """``grad(f)(*args)`` with fast paths and with the general path only."""
    fast = dplus.grad(f)(*args)
    with general_paths_only():
        general = dplus.grad(f)(*args)
    return fast, general


def close(a, b, tol=1e-9):
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


# --------------------------------------------------------------------------
# values that must not take the float path: arithmetic written in Python


class Scaled:
    """A number-like object whose product is defined in Python (and so differentiated)."""

    def __init__(self, a):
        self.a = a

    def __mul__(self, other):
        return self.a * (other.a if isinstance(other, Scaled) else other) * 2.0

    def __rmul__(self, other):
        return self.a * other * 2.0


def product_through_copy(x, y):
    a = x
    return a * y


def product_through_unpack(p, y):
    x, _ = p
    return x * y


def product_after_arithmetic_then_unpack(p, y):
    t = y * 3.0
    x, _ = p
    return x * y + t


def dot(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s += x * y
    return s


@SETTINGS
@given(a=floats, y=floats)
def test_objects_reached_through_copies_and_unpacks_are_differentiated(a, y):
    # d(2 a y)/da = 2 y, d/dy = 2 a: the float path would see no sensitivity for ``a``
    g = dplus.grad(product_through_copy)(Scaled(a), y)
    close(g, ({"a": 2 * y}, 2 * a))
    g = dplus.grad(product_through_unpack)((Scaled(a), 1.0), y)
    close(g, (({"a": 2 * y}, 0.0), 2 * a))
    g = dplus.grad(product_after_arithmetic_then_unpack)((Scaled(a), 1.0), y)
    close(g, (({"a": 2 * y}, 0.0), 2 * a + 3.0))


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=6), data=st.data())
def test_loop_over_zip_of_objects(xs, data):
    ys = data.draw(st.lists(floats, min_size=len(xs), max_size=len(xs)))
    gx, gy = dplus.grad(dot)([Scaled(a) for a in xs], [Scaled(b) for b in ys])
    close(gx, [{"a": 2 * b} for b in ys])
    close(gy, [{"a": 2 * a} for a in xs])


@SETTINGS
@given(a=floats, y=floats)
def test_guarded_functions_agree_with_the_general_path(a, y):
    for f, args in [(product_through_copy, (a, y)), (product_through_unpack, ((a, 1.0), y)),
                    (product_after_arithmetic_then_unpack, ((a, 2.0), y))]:
        fast, general = both_ways(f, *args)
        close(fast, general)


def test_general_paths_only_really_transforms_without_fast_paths():
    from dplus.transformer import compile_function

    def f(x, y):
        return x * y + 1.0

    assert "NUM" in compile_function(f).source
    with general_paths_only():
        assert "NUM" not in compile_function(f).source
    assert "NUM" in compile_function(f).source
