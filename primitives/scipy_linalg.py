"""Rules for ``scipy.linalg`` (an optional extra: ``pip install dplus[scipy]``).

Registered when the user's program imports ``scipy.linalg`` (``registry.register_lazy_rules``).
Real matrices. Covered: ``solve_triangular`` (``trans``, ``lower``, ``unit_diagonal``),
``cholesky`` (``lower``), ``solve`` (``assume_a`` general, symmetric or positive
definite, ``lower``), ``inv``, ``det``, ``eigh`` (``lower``, ``eigvals_only``; a standard
problem, ``b=None``), ``expm``.

As in ``primitives.numpy_linalg``: a function that reads one triangle of a matrix
(``cholesky``, ``eigh``, ``solve_triangular``, ``solve`` with ``assume_a='sym'``/``'pos'``)
gets the derivative of that function (zero on the other triangle), and the eigenvectors
of ``eigh`` refuse at a repeated eigenvalue. ``overwrite_a=True`` / ``overwrite_b=True``
raise when a sensitivity reaches the call: the argument the reverse pass needs is gone.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.runtime.linear import gen_zero, tuple_items
from dplus.runtime.memory import results_take_entries

from .numpy import defgrad, defvjp_joint
from .numpy_linalg import _T, _cholesky_grad, _eigh_grad_from, _read_triangle, _refuse_complex
from .numpy_products import _det_grad, _inv_grad

Z = gen_zero
_SYMMETRIC = ("sym", "her", "pos", "positive definite", "symmetric", "hermitian")


def _refuse_overwrite(name: str, overwrite_a: bool = False, overwrite_b: bool = False) -> None:
    if overwrite_a or overwrite_b:
        raise NonDifferentiableError(
            f"dplus cannot differentiate scipy.linalg.{name} with overwrite_a/overwrite_b=True: the reverse pass "
            "needs the argument it overwrites. Leave them False"
        )


def _triangle(a, lower, unit_diagonal):
    n = np.shape(a)[-1]
    mask = (
        np.tril(np.ones((n, n)), -1 if unit_diagonal else 0)
        if lower
        else np.triu(np.ones((n, n)), 1 if unit_diagonal else 0)
    )
    return mask


def _solve_triangular_vjp(
    A, r, a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True
):
    _refuse_complex("solve_triangular", a)
    _refuse_overwrite("solve_triangular", overwrite_b=overwrite_b)
    transposed = trans in (1, 2, "T", "C")
    gb = sla.solve_triangular(
        a, A, trans=0 if transposed else 1, lower=lower, unit_diagonal=unit_diagonal
    )
    gb2 = gb if np.ndim(gb) == np.ndim(a) else gb[..., None]
    x2 = r if np.ndim(r) == np.ndim(a) else np.asarray(r)[..., None]
    ga = -np.matmul(x2, _T(gb2)) if transposed else -np.matmul(gb2, _T(x2))
    return ga * _triangle(a, lower, unit_diagonal), gb


def _cholesky_grad_scipy(A, r, a, lower=False, overwrite_a=False, check_finite=True):
    _refuse_overwrite("cholesky", overwrite_a)
    return _cholesky_grad(A, r, a, upper=not lower)


def _solve_vjp(
    A,
    r,
    a,
    b,
    lower=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    assume_a=None,
    transposed=False,
):
    _refuse_complex("solve", a)
    _refuse_overwrite("solve", overwrite_a, overwrite_b)
    if transposed:
        raise NonDifferentiableError(
            "dplus has no derivative for scipy.linalg.solve with transposed=True: "
            "solve with the transposed matrix instead"
        )
    gb = np.linalg.solve(_T(a), A if np.ndim(A) == np.ndim(a) else np.asarray(A)[..., None])
    x2 = r if np.ndim(r) == np.ndim(a) else np.asarray(r)[..., None]
    ga = -np.matmul(gb, _T(x2))
    gb = gb if np.ndim(A) == np.ndim(a) else gb[..., 0]
    if assume_a in _SYMMETRIC:  # only one triangle of a is read
        ga = _read_triangle(ga, lower)
    return ga, gb


def _inv_grad_scipy(A, r, a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    _refuse_overwrite("inv", overwrite_a)
    g = _inv_grad(A, r, a)
    return _read_triangle(g, lower) if assume_a in _SYMMETRIC else g


def _det_grad_scipy(A, r, a, overwrite_a=False, check_finite=True):
    _refuse_overwrite("det", overwrite_a)
    return _det_grad(A, r, a)


def _eigh_grad_scipy(
    A,
    r,
    a,
    b=None,
    *,
    lower=True,
    eigvals_only=False,
    overwrite_a=False,
    overwrite_b=False,
    type=1,
    check_finite=True,
    subset_by_index=None,
    subset_by_value=None,
    driver=None,
):
    _refuse_complex("eigh", a)
    _refuse_overwrite("eigh", overwrite_a, overwrite_b)
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise NonDifferentiableError(
            "dplus differentiates scipy.linalg.eigh of a standard problem (b=None) "
            "for all eigenvalues only"
        )
    if eigvals_only:
        w, V = sla.eigh(a, lower=lower)
        return _eigh_grad_from(A, Z, w, V, lower)
    gw, gV = tuple_items(A, 2)
    w, V = r
    return _eigh_grad_from(
        np.asarray(gw) if gw is not Z else Z, np.asarray(gV) if gV is not Z else Z, w, V, lower
    )


def _expm_grad(A, r, a):
    """The adjoint Fréchet derivative: the upper-right block of expm([[a^T, A], [0, a^T]])."""
    _refuse_complex("expm", a)
    n = np.shape(a)[-1]
    at = _T(a)
    block = np.concatenate(
        (np.concatenate((at, A), axis=-1), np.concatenate((np.zeros(np.shape(a)), at), axis=-1)),
        axis=-2,
    )
    return sla.expm(block)[..., :n, n:]


def register_scipy_linalg_rules() -> None:
    defvjp_joint(sla.solve_triangular, _solve_triangular_vjp)
    defgrad(sla.cholesky, _cholesky_grad_scipy)
    defvjp_joint(sla.solve, _solve_vjp)
    defgrad(sla.inv, _inv_grad_scipy)
    defgrad(sla.det, _det_grad_scipy)
    defgrad(sla.eigh, _eigh_grad_scipy)
    defgrad(sla.expm, _expm_grad)
    for name, obj in list(globals().items()):
        if name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == __name__:
            mark_derived(obj, "rule helper")


register_scipy_linalg_rules()

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
