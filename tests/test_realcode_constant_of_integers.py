"""A compiled function of a module given only integers (stop 39, realcode9, issues #18 and
#26), found on astropy's ``AiryDisk2D``: its ``evaluate`` caches ``cls._rz =
jn_zeros(1, 1)[0] / np.pi`` on the first call. Under ``transform_from_source`` SciPy's
``jn_zeros`` and ``jnyn_zeros`` are differentiated from their source, and the compiled
``_specfun.jyzo(abs(n), nt)`` they end in was refused once the radius's sensitivity reached
the zero it returned ("no derivative is known for scipy.special._specfun.jyzo"): its
arguments are integers held in variables, not literals, so the rule for calls of constants
did not see them. A compiled module function given only integers, strings and ``None``
holds nothing of the run and reads nothing differentiable: its result is a constant.
Python functions stay checked (they may read globals the run wrote).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import jn_zeros

import dplus
from dplus import UnknownTransformError, current_unknown_transform, transform_from_source
from dplus.transform.transformer import general_paths_only


class Airy:
    _rz = None

    @classmethod
    def evaluate(cls, r, radius, order):
        if cls._rz is None:
            cls._rz = jn_zeros(order, 1)[0] / np.pi
        z = np.pi * r / (radius / cls._rz)
        return np.sum((2.0 * np.sin(z) / z) ** 2)


def first_call(radius):
    Airy._rz = None  # (the cache filled under differentiation, as on a first call)
    return Airy.evaluate(np.array([0.3, 0.7, 1.1]), radius, 1)


def fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("radius", [0.8, 1.4])
def test_a_compiled_function_of_integers_is_a_constant(radius):
    with current_unknown_transform(transform_from_source):
        (g,) = dplus.grad(first_call)(radius)
        with general_paths_only():
            (g_general,) = dplus.grad(first_call)(radius)
        h = dplus.grad(lambda r: dplus.grad(first_call)(r)[0])(radius)[0]
    assert g == g_general == pytest.approx(fd(first_call, radius), rel=1e-6)
    gradient = lambda r: dplus.grad(first_call)(r)[0]
    with current_unknown_transform(transform_from_source):
        assert h == pytest.approx(fd(gradient, radius, 1e-5), rel=1e-5)


state = {"v": 0.0}


def read_state(k):  # Python: reads what the run wrote, so it stays checked
    return state["v"] * k


def through_global_state(x):
    state["v"] = x
    k = 2
    return read_state(k)


def test_a_python_function_of_integers_is_still_checked():
    with pytest.raises(UnknownTransformError, match="read_state"):
        dplus.grad(through_global_state)(2.0)
