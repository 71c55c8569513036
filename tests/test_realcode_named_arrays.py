"""Naming a result where the type allows it (stop 39, realcode9, issues #18 and #26): pvlib
names what it returns for pandas (``projection.name = 'aoi_projection'`` inside
``try: ... except AttributeError: pass``, in ``aoi_projection`` and ``get_ground_diffuse``,
so under every irradiance model). On an ndarray or a NumPy or Python number the assignment
raises ``AttributeError`` and the program goes on; under dplus it raised
``NonDifferentiableError``, which the ``except`` does not catch: every irradiance function
refused. An attribute the type does not have and the value has no ``__dict__`` to keep is
now Python's own ``AttributeError``. One the type has (``a.shape = ...``, which reshapes in
place) stays refused. The reproduction is written anew here.
"""

from __future__ import annotations

import numpy as np
import pytest

import dplus
from dplus import NonDifferentiableError
from dplus.transform.transformer import general_paths_only


def named_projection(x):
    p = np.clip(x * 2.0, -1, 1)
    try:
        p.name = "aoi_projection"
    except AttributeError:
        pass
    return np.sum(p * x)


def named_scalar(x):
    p = np.float64(x) * 3.0
    try:
        p.name = "scaled"
    except AttributeError:
        p = p * 2.0
    return p * x


def reshaped_in_place(x):
    p = x * 2.0
    p.shape = (3, 1)
    return np.sum(p)


def test_attribute_error_of_a_named_array_is_caught_as_without_dplus():
    for x in (np.array([0.1, 0.3, -0.2]), np.array([0.45, -0.1, 0.2])):
        want = np.where(np.abs(2 * x) < 1, 4 * x, np.sign(x))
        (g,) = dplus.grad(named_projection)(x)
        with general_paths_only():
            (g_general,) = dplus.grad(named_projection)(x)
        np.testing.assert_allclose(g, want)
        np.testing.assert_array_equal(g, g_general)
        hessian_row = dplus.grad(lambda x: dplus.grad(named_projection)(x)[0][1])(x)[0]
        np.testing.assert_allclose(hessian_row, [0.0, 4.0, 0.0])


@pytest.mark.parametrize("x", [0.5, -1.25])
def test_attribute_error_of_a_named_number_is_caught_as_without_dplus(x):
    assert named_scalar(x) == 6.0 * x * x
    assert dplus.grad(named_scalar)(x)[0] == pytest.approx(12.0 * x)
    assert dplus.grad(lambda x: dplus.grad(named_scalar)(x)[0])(x)[0] == pytest.approx(12.0)


def test_an_attribute_the_array_has_is_still_refused():
    with pytest.raises(NonDifferentiableError, match="assigning the attribute 'shape'"):
        dplus.grad(reshaped_in_place)(np.array([1.0, 2.0, 3.0]))
