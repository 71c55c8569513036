"""The scipy.special and scipy.linalg rules (primitives/scipy_special.py, scipy_linalg.py):
every call of tests/scipy_api_table.py against finite differences at first and second
order, the lazy registration (dplus never imports SciPy), and the refusals."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

scipy = pytest.importorskip("scipy")

import scipy.linalg as sla  # noqa: E402
import scipy.special as sc  # noqa: E402
from array_checks import check_grads  # noqa: E402
from scipy_api_table import ENTRIES  # noqa: E402

import dplus  # noqa: E402

_BY_NAME = {name: (fn, make) for name, fn, make in ENTRIES}


@pytest.mark.parametrize("name", list(_BY_NAME))
def test_scipy_first_and_second_order(name):
    fn, make = _BY_NAME[name]
    check_grads(fn, *make(), order=2)


def test_dplus_does_not_import_scipy_and_registers_its_rules_on_import(tmp_path):
    code = (
        "import sys, dplus, numpy as np\n"
        "assert 'scipy' not in sys.modules\n"
        "from scipy.special import gammaln\n"
        "(g,) = dplus.grad(lambda x: np.sum(gammaln(x)))(np.array([1.5, 2.0]))\n"
        "from scipy.special import digamma\n"
        "assert np.allclose(g, digamma(np.array([1.5, 2.0])))\n"
        "import scipy.linalg as sla\n"
        "(g,) = dplus.grad(lambda m: sla.det(m))(np.eye(2) * 2.0)\n"
        "assert np.allclose(g, [[2.0, 0.0], [0.0, 2.0]])\n"
    )
    script = tmp_path / "uses_scipy.py"  # (a file: dplus reads the lambdas' source)
    script.write_text(code)
    subprocess.run([sys.executable, str(script)], check=True, timeout=120)


def test_eigenvectors_at_a_repeated_eigenvalue_refuse():
    m = np.diag([1.0, 1.0, 3.0])
    with pytest.raises(dplus.NonDifferentiableError, match="repeated eigenvalue"):
        dplus.grad(lambda m: np.sum(sla.eigh(m)[1] ** 3))(m)
    with pytest.raises(dplus.NonDifferentiableError, match="repeated eigenvalue"):
        dplus.grad(lambda m: np.sum(np.linalg.eigh(m)[1] ** 3))(m)
    # the eigenvalues alone are still differentiated (a subgradient where they repeat)
    (g,) = dplus.grad(lambda m: np.sum(sla.eigh(m, eigvals_only=True)))(m)
    np.testing.assert_allclose(g, np.eye(3))


def test_triangle_read_convention_agrees_with_the_symmetric_one_on_symmetric_directions():
    # cholesky reads one triangle: dplus's gradient is zero on the other one, and pairs with a
    # symmetric perturbation exactly as autograd's symmetric gradient does
    m = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    (g,) = dplus.grad(lambda m: np.sum(sla.cholesky(m) ** 2))(m)
    assert np.all(np.tril(g, -1) == 0)  # scipy reads the upper triangle by default
    v = np.random.default_rng(0).normal(size=(3, 3))
    v = v + v.T
    h = 1e-6
    fd = (np.sum(sla.cholesky(m + h * v) ** 2) - np.sum(sla.cholesky(m - h * v) ** 2)) / (2 * h)
    assert abs(np.sum(g * v) - fd) < 1e-6


def test_overwrite_arguments_refuse():
    m = np.eye(3) * 2.0
    with pytest.raises(dplus.NonDifferentiableError, match="overwrite"):
        dplus.grad(lambda m: np.sum(sla.inv(m, overwrite_a=True)))(m.copy())


def test_logsumexp_with_return_sign_refuses():
    with pytest.raises(dplus.NonDifferentiableError, match="return_sign"):
        dplus.grad(lambda x: sc.logsumexp(x, return_sign=True)[0])(np.array([0.5, 1.0]))


def test_bessel_function_of_a_float_order_refuses_and_of_an_int_order_is_differentiated():
    x = np.array([0.5, 1.5, 2.5])
    with pytest.raises(dplus.NonDifferentiableError, match="order"):
        dplus.grad(lambda x: np.sum(sc.jv(1.5, x)))(x)
    (g,) = dplus.grad(lambda x: np.sum(sc.jv(1, x)))(x)
    np.testing.assert_allclose(g, (sc.j0(x) - sc.jv(2, x)) / 2, rtol=1e-12)
    (g,) = dplus.grad(lambda x: np.sum(sc.gammasgn(x) * x))(x)  # piecewise constant
    np.testing.assert_array_equal(g, np.ones(3))
