"""A DplusError raised inside a ``try`` body is never caught by the user's handlers (fuzzer
finding N2): caught, the program would go on differently under ``grad`` than without it."""

from __future__ import annotations

import numpy as np
import pytest

import dplus
from dplus.transform.transformer import general_paths_only


def bump_in_try(A):
    try:
        A += 1.0
    except ValueError:
        pass
    return float(np.sum(A))


def bump_view_in_try(A):
    try:
        view = A.reshape(-1)
        view += 1.0
    except Exception:
        pass
    return float(np.sum(A))


def user_error_still_caught(x):
    try:
        y = x * 2.0
        raise ValueError("the user's own")
    except ValueError:
        y = x * 3.0
    return y


@pytest.mark.parametrize("f", [bump_in_try, bump_view_in_try])
@pytest.mark.parametrize("general", [False, True])
def test_an_in_place_write_inside_try_runs_as_in_python(f, general):
    # (refused before in-place writes on arrays were followed; the fuzzer's N2 was this write
    # silently dropped inside try)
    A = np.array([-0.127937, -0.072043, 1.293936])
    plain = A.copy()
    expected = f(plain)
    if general:
        with general_paths_only():
            r = dplus.dplus(f)(A)
    else:
        r = dplus.dplus(f)(A)
    assert r.primal == expected and np.array_equal(A, plain)
    assert np.array_equal(r.backprop(1.0)[0], np.ones(3))


@pytest.mark.parametrize("x", [0.5, -1.25, 2.0])
def test_the_users_own_exceptions_are_still_caught(x):
    assert dplus.grad(user_error_still_caught)(x) == (3.0,)
    assert dplus.hessian(user_error_still_caught)(x) == ((0.0,),)
