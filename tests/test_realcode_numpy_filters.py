"""NumPy code as scientists write it (stop 38, issues #18 and #26), found on filterpy's
Kalman filters and numpy-ml's losses; the reproductions are written anew here.

- A method that keeps a copy of what it was given (``self.z = copy.deepcopy(z)`` at the end
  of a filter's ``update``) had a wrong second derivative: ``copy.deepcopy`` calls
  ``z.__deepcopy__(memo)``, a method dplus runs as it is, and at the second order the
  sensitivity of that bound method was taken from the closure of the policy's
  plus-function (the method and its name) instead of the method's own layout. Its ``()``
  became the sensitivity of ``z``: the Hessian of ``x * x * x`` after ``x.__deepcopy__({})``
  was ``array([])`` for a NumPy scalar (``np.float64 + ()`` broadcasts) and a refusal
  ("cannot add a tuple of 0 and an array") for an array.
- A symmetric matrix's eigen-decomposition kept on an object and never read (scipy's
  ``multivariate_normal`` does this for a filter's log-likelihood: ``_PSD`` holds
  ``u * sqrt(1 / s)``) crashed the backward pass with a raw ``ValueError`` from ``matmul``:
  the eigh rule, given zero for both the eigenvalues and the eigenvectors, multiplied by
  a scalar ``0.0`` where a matrix was needed.
- A module handed to a helper dplus runs as it is (SciPy's array-API code passes its
  namespace ``xp`` to an ``lru_cache``'d ``is_numpy_namespace(xp)``, reached from
  filterpy's ``Q_discrete_white_noise`` through ``scipy.linalg.block_diag``) was refused,
  the message naming dplus's own ``setitem_plus``: the check for the user's functions held
  in what such code is given walked into the module, and from it into every module.
- ``np.finfo(float).eps`` added inside a log (a cross-entropy) was refused: the attribute
  of a ``finfo`` was an unknown read whose result received a sensitivity. ``finfo`` and
  ``iinfo`` describe a dtype; what they hold is constant.

Each function is checked against central differences at first and second order, on the
fast paths (two points) and on the general path (a third), each point along random
directions.
"""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
import scipy.linalg
from array_checks import check_grads

from dplus import SensitivityError, current_unknown_transform, transform_from_source
from dplus.runtime.linear import add
from dplus.transform.transformer import general_paths_only


class Tracker:
    """A filter-like object: its state arrays are replaced by each step, and the last
    measurement is kept as a copy."""

    def __init__(self, q):
        self.x = np.array([[0.5], [-0.2]])
        self.P = np.eye(2) * 2.0
        self.H = np.array([[1.0, 0.0]])
        self.Q = np.array([[0.25, 0.5], [0.5, 1.0]]) * q
        self.solve = np.linalg.inv

    def step(self, z):
        F = np.array([[1.0, 1.0], [0.0, 1.0]])
        self.x = np.dot(F, self.x)
        self.P = np.dot(np.dot(F, self.P), F.T) + self.Q
        residual = np.atleast_2d(z).T - np.dot(self.H, self.x)
        S = np.dot(self.H, np.dot(self.P, self.H.T)) + 1.0
        K = np.dot(np.dot(self.P, self.H.T), self.solve(S))
        self.x = self.x + np.dot(K, residual)
        self.P = self.P - np.dot(K, np.dot(self.H, self.P))
        self.z = copy.deepcopy(z)


def tracked(q, zs):
    t = Tracker(q)
    for z in zs:
        t.step(z)
    return t.x[0, 0] + t.P[0, 0] + np.sum(t.x * t.x)


def kept_copy_of_array(x):
    log = {"seen": x.__deepcopy__({})}  # (a copy nothing reads: its sensitivity is zero)
    return np.sum(x * x * x) + len(log)


def kept_copy_of_scalar(x):
    x.__copy__()
    x.__deepcopy__({})
    return x * x * np.sin(x)


class Decomposed:
    def __init__(self, M):
        s, u = scipy.linalg.eigh(M)
        self.whitening = np.multiply(u, np.sqrt(1.0 / s))  # (read by nothing below)
        w = np.linalg.eigvalsh(M)
        self.log_det = np.sum(np.log(w))


def unread_eigen_decomposition(a):
    M = np.array([[a[0] ** 2 + 2.0, 0.3], [0.3, a[1] ** 2 + 1.0]])
    return Decomposed(M).log_det + np.sum(a**3)


@functools.lru_cache(8)
def is_numpy(xp):
    return xp is np


def leading(a, xp):
    return a[0] if is_numpy(xp) else a


def namespace_handed_around(x):
    return np.sum(leading(x * x, np) * x[1])


def eps_in_a_log(p):
    eps = np.finfo(float).eps
    tiny = np.finfo(np.float32).tiny  # (a cached property)
    big = np.iinfo(np.int32).max
    return -np.sum(np.log(p + eps)) + np.sum(p * p) * (tiny / tiny) * big / big


# (the tracker runs with the policy of docs/policies.md that transforms the methods and
# copy.deepcopy from their source: deepcopy then calls the array's __deepcopy__ method)
CASES = [
    (tracked, lambda rng: (float(rng.uniform(0.05, 0.5)), np.cumsum(rng.uniform(0.5, 1.5, 2)))),
    (kept_copy_of_array, lambda rng: (rng.normal(size=3),)),
    (kept_copy_of_scalar, lambda rng: (np.float64(rng.uniform(-2, 2)),)),
    (eps_in_a_log, lambda rng: (rng.uniform(0.1, 1.0, 3),)),
    (unread_eigen_decomposition, lambda rng: (rng.uniform(-1.0, 1.0, 2),)),
    (namespace_handed_around, lambda rng: (rng.normal(size=(2, 3)),)),
]


@pytest.mark.parametrize("f, draw", CASES, ids=[f.__name__ for f, _ in CASES])
def test_second_order_on_both_paths(f, draw):
    rng = np.random.default_rng(38)
    with current_unknown_transform(transform_from_source):
        for _ in range(2):
            check_grads(f, *draw(rng), order=2, rng=rng, rtol=1e-4)
        with general_paths_only():
            check_grads(f, *draw(rng), order=2, rng=rng, rtol=1e-4)


@pytest.mark.parametrize("zero", [(), [], {}])
def test_a_number_plus_a_container_sensitivity_raises(zero):
    # (NumPy would broadcast: np.float64(1.0) + () is array([]), a silently wrong value)
    for number in (np.float64(1.5), 1.5, np.float32(1.5)):
        with pytest.raises(SensitivityError):
            add(number, zero)
