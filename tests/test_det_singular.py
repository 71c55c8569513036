"""``np.linalg.det`` at a singular matrix (probe2, stop 39).

The rule was ``det * inv(a)^T``, which raised NumPy's ``LinAlgError`` (a raw crash from
inside dplus) wherever the matrix is singular, though det is a polynomial and its derivative
(the cofactor matrix) exists everywhere: ``np.linalg.det(M[:2])`` of rows ``[a, b]`` and
``2 * [a, b]`` stopped ``grad``. Now the cofactors are computed from the minors there; at
second order the minors may be singular in turn (rank-1 3x3), and a stack with one
singular matrix takes the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from path_helpers import close, fd_gradient, fd_hessian

import dplus


def det_2x2(a, b, c, d):
    return np.linalg.det(np.array([[a, b], [c, d]])) * (1.0 + a)


def det_rank_one_3x3(a, b, c, d):
    # (all ones at a = b = c = d = 1: gradient 0 there, Hessian not)
    return np.linalg.det(np.array([[a, b, 1.0], [c, d, 1.0], [1.0, 1.0, 1.0]]))


def det_stack(a, b, c, d):
    stack = np.array([[[a, b], [c, d]], [[a, 1.0], [b, c * d]]])
    return float(np.linalg.det(stack) @ np.array([1.0, 2.0]))


def det_of_proportional_rows(a, b, c, d):
    rows = [np.array([a, b]) * k for k in (1.0, 2.0)]
    return np.linalg.det(np.array(rows)) + c * d


@pytest.mark.parametrize(
    "f, point",
    [
        (det_2x2, (1.0, 2.0, 2.0, 4.0)),
        (det_rank_one_3x3, (1.0, 1.0, 1.0, 1.0)),
        (det_rank_one_3x3, (1.0, 2.0, 1.0, 2.0)),
        (det_stack, (1.0, 2.0, 2.0, 4.0)),
        (det_of_proportional_rows, (0.7, 1.3, 0.5, -2.0)),
    ],
)
def test_det_at_a_singular_matrix(f, point):
    g = dplus.grad(f)(*point)
    close(g, fd_gradient(f, point), tol=1e-5)
    close(dplus.hessian(f)(*point), fd_hessian(f, point), tol=1e-5)


def det_nearly_singular(a, b):
    # (at (1.9, -0.6) det is 4e-16, not 0: inv does not raise, and det * inv^T gave the
    # Hessian ((0, 0), (-0.737, 0)), not symmetric, where it is 0)
    return np.linalg.det(np.array([[a, b], [2 * a, 2 * b]]))


@pytest.mark.parametrize("point", [(1.9, -0.6), (0.7, 1.3)])
def test_det_near_a_singular_matrix_at_second_order(point):
    assert np.abs(np.array(dplus.hessian(det_nearly_singular)(*point))).max() < 1e-9
    close(dplus.grad(det_nearly_singular)(*point), (0.0, 0.0), tol=1e-9)
