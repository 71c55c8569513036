"""NumPy linear-algebra rules beyond ``primitives.numpy`` (issue #22): ``cholesky``,
``eigh``, ``eigvalsh``, ``svd`` (``compute_uv=False``, or the reduced factors),
``svdvals``, ``pinv`` and ``lstsq`` (full rank), ``polyfit`` (full rank; no ``full``/``cov``), ``matrix_power``, ``multi_dot``, ``vector_norm``,
``matrix_norm``. Real matrices, batched over leading axes.

Conventions, stated because they decide the numbers:

* ``cholesky`` and ``eigh`` read one triangle of their argument (NumPy: the lower one;
  ``UPLO='U'``: the upper one). The gradient is the derivative of that function: it is
  zero on the triangle not read, and an off-diagonal element read stands for both of its
  symmetric places. (autograd and JAX return the symmetric gradient instead, the same
  numbers only for symmetric perturbations.)
* ``eigh``'s eigenvectors are differentiable only where the eigenvalues are distinct: a
  sensitivity reaching the eigenvectors of a matrix with a repeated eigenvalue raises
  ``NonDifferentiableError`` (autograd and JAX return infinities or NaNs). Eigenvalues
  alone are differentiated whatever their multiplicity (a subgradient where they repeat).
* ``svd``'s factors likewise need distinct non-zero singular values; ``full_matrices=True``
  is differentiated for square matrices only.

NumPy is optional: without it this module registers nothing.
"""

from __future__ import annotations

from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.errors import NonDifferentiableError
from dplus.markers import mark_derived
from dplus.runtime.linear import gen_zero, tuple_items

from ._numpy_composite import defcomposite

Z = gen_zero


def _T(x):
    return np.swapaxes(x, -1, -2)


def _refuse_complex(name: str, a: Any) -> None:
    if np.iscomplexobj(a):
        raise NonDifferentiableError(
            f"dplus differentiates numpy.linalg.{name} of real matrices only"
        )


def _read_triangle(G, lower=True):
    """The gradient of a function of a symmetric matrix that reads one triangle of its
    argument, from its symmetric-convention gradient ``G`` (not necessarily symmetric)."""
    n = np.shape(G)[-1]
    strict = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
    return G * np.eye(n) + (G + _T(G)) * strict


def _cholesky_grad_lower(G, L):
    """The gradient of ``L = cholesky(a)`` (``a`` read through its lower triangle)."""
    n = np.shape(L)[-1]
    P = np.matmul(_T(L), G)
    P = np.tril(P) * (1.0 - 0.5 * np.eye(n))  # the lower triangle, the diagonal halved
    Y = np.linalg.solve(_T(L), P)  # L^-T P
    S = _T(np.linalg.solve(_T(L), _T(Y)))  # L^-T P L^-1
    return _read_triangle(S, lower=True)


def _cholesky_grad(A, r, a, upper=False):
    _refuse_complex("cholesky", a)
    if upper:  # a = U^T U read through its upper triangle: the mirror image of the lower case
        return _T(_cholesky_grad_lower(_T(A), _T(r)))
    return _cholesky_grad_lower(A, r)


def _repeated(w) -> bool:
    """Whether two of the values ``w`` (eigenvalues or singular values, real or complex, along
    the last axis) are equal to rounding: the pairwise distances, as complex values have no
    order in which equal ones are neighbours."""
    w = np.asarray(w)
    n = np.shape(w)[-1]
    gaps = np.where(np.eye(n) > 0, np.inf, np.abs(w[..., :, None] - w[..., None, :]))
    scale = np.max(np.abs(w)) if w.size else 0.0
    return bool(np.any(gaps <= 64 * np.finfo(float).eps * max(scale, 1.0)))


def _eigh_grad_from(gw, gV, w, V, lower):
    # (both may be zero: the backward pass of values nothing read)
    inner = gw[..., None, :] * np.eye(np.shape(V)[-1]) if gw is not Z else np.zeros(np.shape(V))
    if gV is not Z:
        if _repeated(w):
            raise NonDifferentiableError(
                "the eigenvectors of numpy.linalg.eigh (or scipy.linalg.eigh) are not differentiable at a matrix "
                "with a repeated eigenvalue: they are not unique there. Differentiate a function of the "
                "eigenvalues, or of the projector onto the whole eigenspace"
            )
        n = np.shape(V)[-1]
        gaps = w[..., None, :] - w[..., :, None] + np.eye(n)  # w_j - w_i, 1 on the diagonal
        F = (1.0 - np.eye(n)) / gaps
        inner = inner + F * np.matmul(_T(V), gV)
    return _read_triangle(np.matmul(np.matmul(V, inner), _T(V)), lower)


def _eigh_grad(A, r, a, UPLO="L"):
    _refuse_complex("eigh", a)
    gw, gV = tuple_items(A, 2)
    w, V = r
    return _eigh_grad_from(
        np.asarray(gw) if gw is not Z else Z,
        np.asarray(gV) if gV is not Z else Z,
        w,
        V,
        UPLO == "L",
    )


def _eigvalsh_grad(A, r, a, UPLO="L"):
    _refuse_complex("eigvalsh", a)
    w, V = np.linalg.eigh(a, UPLO)
    return _eigh_grad_from(A, Z, w, V, UPLO == "L")


def _largest_component(V):
    """A 0/1 matrix marking, in each column of ``V``, its largest component (which LAPACK's
    ``geev`` makes real: the gauge of the eigenvectors ``numpy.linalg.eig`` returns)."""
    m = np.argmax(np.abs(V), axis=-2)
    return (np.arange(np.shape(V)[-2])[:, None] == m[..., None, :]).astype(float)


def _eig_vectors_back(gV, V):
    """The transpose of the gauge NumPy's eigenvectors are in (each column of unit norm, its
    largest component real), applied to their sensitivity: what remains is the sensitivity of
    eigenvectors ``dV = V (F * (V^-1 dA V))``, which keeps ``diag(V^-1 dV) = 0``."""
    mark = _largest_component(V)
    largest = np.sum(V * mark, axis=-2)
    s = np.sum(gV * V, axis=-2)
    gV = gV + mark * (-1j * np.imag(s) / largest)[..., None, :]
    t = np.sum(gV * V, axis=-2)
    return gV - np.conj(V) * np.real(t)[..., None, :]


def _eig_grad_from(gw, gV, w, V, a):
    """``V^-T (diag(gw) + F * (V^T gV)) V^T``, ``F_ij = 1 / (w_j - w_i)`` off the diagonal
    (real for a real matrix: a real matrix's changes are real)."""
    if _repeated(w):
        raise NonDifferentiableError(
            "numpy.linalg.eig and eigvals are not differentiable at a matrix with a repeated "
            "eigenvalue (its eigenvalues and eigenvectors need not be smooth there). For a symmetric "
            "matrix use numpy.linalg.eigh or eigvalsh"
        )
    n = np.shape(V)[-1]
    eye = np.eye(n)
    inner = gw[..., None, :] * eye if gw is not Z else 0.0
    if gV is not Z:
        F = (1.0 - eye) / (w[..., None, :] - w[..., :, None] + eye)
        inner = inner + F * np.matmul(_T(V), _eig_vectors_back(gV, V))
    g = np.linalg.solve(_T(V), np.matmul(inner + np.zeros(np.shape(V)), _T(V)))
    return g if np.iscomplexobj(a) else np.real(g)


def _eig_grad(A, r, a):
    gw, gV = tuple_items(A, 2)
    w, V = r
    return _eig_grad_from(
        np.asarray(gw) if gw is not Z else Z, np.asarray(gV) if gV is not Z else Z, w, V, a
    )


def _eigvals_grad(A, r, a):
    w, V = np.linalg.eig(a)
    return _eig_grad_from(A, Z, w, V, a)


def _svd_grad(A, r, a, full_matrices=True, compute_uv=True, hermitian=False):
    _refuse_complex("svd", a)
    if hermitian:
        raise NonDifferentiableError(
            "dplus has no derivative for numpy.linalg.svd with hermitian=True: "
            "use numpy.linalg.eigh"
        )
    if not compute_uv:
        U, s, Vh = np.linalg.svd(a, full_matrices=False)
        return np.matmul(U * A[..., None, :], Vh)
    gU, gs, gVh = tuple_items(A, 3)
    U, s, Vh = r
    m, n = np.shape(a)[-2:]
    if full_matrices and m != n and (gU is not Z or gVh is not Z):
        raise NonDifferentiableError(
            "dplus differentiates the factors of numpy.linalg.svd with full_matrices=True for square matrices "
            "only (the extra columns are not unique): pass full_matrices=False"
        )
    return _svd_factors_grad(U, s, Vh, gU, gs, gVh)


def _svd_factors_grad(U, s, Vh, gU, gs, gVh):
    """Townsend's formula for the reduced SVD ``a = U diag(s) Vh`` (distinct, non-zero ``s``)."""
    k = np.shape(s)[-1]
    V = _T(Vh)
    eye = np.eye(k)
    # (all three may be zero: the backward pass of values nothing read)
    inner = gs[..., None, :] * eye if gs is not Z else np.zeros(np.shape(s)[:-1] + (k, k))
    out = 0.0
    if gU is not Z or gVh is not Z:
        if _repeated(s) or np.any(s == 0):
            raise NonDifferentiableError(
                "the singular vectors of numpy.linalg.svd are not differentiable at a matrix with repeated or zero "
                "singular values. Differentiate a function of the singular values instead"
            )
        F = (1.0 - eye) / (s[..., None, :] ** 2 - s[..., :, None] ** 2 + eye)
        if gU is not Z:
            UtgU = np.matmul(_T(U), gU)
            inner = inner + F * (UtgU - _T(UtgU)) * s[..., None, :]
            rest_u = gU - np.matmul(U, UtgU)  # (I - U U^T) gU
            out = out + np.matmul(rest_u / s[..., None, :], Vh)
        if gVh is not Z:
            gV = _T(gVh)
            VtgV = np.matmul(_T(V), gV)
            inner = inner + s[..., :, None] * (F * (VtgV - _T(VtgV)))
            rest_v = gV - np.matmul(V, VtgV)  # (I - V V^T) gV
            out = out + np.matmul(U / s[..., None, :], _T(rest_v))
    return np.matmul(np.matmul(U, inner), Vh) + out


def _qr_grad(A, r, a, mode="reduced"):
    """The reduced QR factorisation ``a = Q R`` of an m x n matrix, m >= n, R invertible:
    with ``B = triu(gR R^T - Q^T gQ)`` and ``S = B + B^T - diag(B)``, ``ga = (gQ + Q S) R^-T``."""
    _refuse_complex("qr", a)
    m, n = np.shape(a)[-2:]
    if mode == "r":
        Q, R = np.linalg.qr(a)
        gQ, gR = Z, A
    elif mode == "reduced" or (mode == "complete" and m == n):
        Q, R = r
        gQ, gR = tuple_items(A, 2)
    else:
        raise NonDifferentiableError(
            f"dplus differentiates numpy.linalg.qr with mode='reduced' or 'r' (mode={mode!r} "
            "adds columns that are not unique): pass mode='reduced'"
        )
    if m < n:
        raise NonDifferentiableError(
            "dplus differentiates numpy.linalg.qr of a matrix with at least as many rows as "
            f"columns (this one is {m} x {n}): factor its transpose instead"
        )
    gQ = np.zeros(np.shape(Q)) if gQ is Z else np.asarray(gQ)
    gR = np.zeros(np.shape(R)) if gR is Z else np.asarray(gR)
    B = np.triu(np.matmul(gR, _T(R)) - np.matmul(_T(Q), gQ))
    S = B + _T(B) - B * np.eye(n)
    return _T(np.linalg.solve(R, _T(gQ + np.matmul(Q, S))))


def _svdvals(x):
    return np.linalg.svd(x, compute_uv=False)


def _pinv(a, rcond=None, hermitian=False, *, rtol=None):
    a = np.asarray(a)
    m, n = np.shape(a)[-2:]
    if _rank_deficient(a):
        raise NonDifferentiableError(
            "dplus differentiates numpy.linalg.pinv of full-rank matrices only: the pseudo-inverse is not "
            "differentiable where the rank can change"
        )
    if m >= n:
        return np.matmul(np.linalg.inv(np.matmul(_T(a), a)), _T(a))
    return np.matmul(_T(a), np.linalg.inv(np.matmul(a, _T(a))))


def _rank_deficient(a) -> bool:
    return bool(np.any(np.linalg.matrix_rank(a) < min(np.shape(a)[-2:])))


def _lstsq(a, b, rcond=None):
    a = np.asarray(a)
    m, n = np.shape(a)
    if _rank_deficient(a):
        raise NonDifferentiableError(
            "dplus differentiates numpy.linalg.lstsq of full-rank matrices only: the solution is not "
            "differentiable where the rank can change"
        )
    if m >= n:
        x = np.linalg.solve(np.matmul(_T(a), a), np.matmul(_T(a), b))
    else:
        x = np.matmul(_T(a), np.linalg.solve(np.matmul(a, _T(a)), b))
    if m > n:
        residuals = np.reshape(np.sum(np.square(b - np.matmul(a, x)), axis=0), (-1,))
    else:
        residuals = np.zeros((0,))
    return x, residuals, np.linalg.matrix_rank(a), np.linalg.svd(a, compute_uv=False)


def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's least-squares fit, as NumPy computes it (scaled Vandermonde columns, ``lstsq``):
    differentiable in ``y``, ``x`` and ``w`` where the Vandermonde matrix has full rank."""
    if full or cov:
        raise NonDifferentiableError(
            "dplus differentiates numpy.polyfit without full= and cov= only: call "
            "np.linalg.lstsq on np.vander(x, deg + 1) for the residuals and the rank"
        )
    x = np.asarray(x) + 0.0
    y = np.asarray(y) + 0.0
    lhs = np.vander(x, int(deg) + 1)
    rhs = y
    if w is not None:
        w = np.asarray(w) + 0.0
        lhs = lhs * np.reshape(w, (-1, 1))
        rhs = rhs * (np.reshape(w, (-1, 1)) if np.ndim(rhs) == 2 else w)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    c = np.linalg.lstsq(lhs / scale, rhs, rcond=rcond)[0]
    return _T(_T(c) / scale) if np.ndim(c) == 2 else c / scale


def _matrix_power(a, n):
    if n < 0:
        return _matrix_power(np.linalg.inv(a), -n)
    result = np.broadcast_to(np.eye(np.shape(a)[-1]), np.shape(a))
    for _ in range(n):
        result = np.matmul(result, a)
    return result


def _multi_dot(arrays, *, out=None):
    result = arrays[0]
    for i in range(1, len(arrays)):
        result = np.dot(result, arrays[i])
    return result


def _vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    if axis is None:
        r = np.linalg.norm(np.ravel(x), ord=ord)
        return np.reshape(r, (1,) * np.ndim(x)) if keepdims else r
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def register_numpy_linalg_rules() -> None:
    from dplus.rules import defnondiff

    from .numpy import defgrad

    la = np.linalg
    defgrad(la.cholesky, _cholesky_grad)
    defgrad(la.eigh, _eigh_grad)
    defgrad(la.eigvalsh, _eigvalsh_grad)
    defgrad(la.eig, _eig_grad)
    defgrad(la.eigvals, _eigvals_grad)
    defgrad(la.svd, _svd_grad)
    defgrad(la.qr, _qr_grad)
    defnondiff(la.matrix_rank, note="non-differentiable: an integer")
    defnondiff(_rank_deficient, note="internal: a test of a NumPy rule")
    defnondiff(_repeated, note="internal: a test of a NumPy rule")
    defnondiff(_largest_component, note="internal: a constant of a NumPy rule")
    for fn, impl in (
        (getattr(la, "svdvals", None), _svdvals),
        (la.pinv, _pinv),
        (la.lstsq, _lstsq),
        (np.polyfit, _polyfit),
        (la.matrix_power, _matrix_power),
        (la.multi_dot, _multi_dot),
        (getattr(la, "vector_norm", None), _vector_norm),
        (getattr(la, "matrix_norm", None), _matrix_norm),
    ):
        if fn is not None:
            defcomposite(fn, impl)
    for helper in (
        _T,
        _read_triangle,
        _cholesky_grad_lower,
        _cholesky_grad,
        _eigh_grad_from,
        _eigh_grad,
        _eigvalsh_grad,
        _eig_vectors_back,
        _eig_grad_from,
        _eig_grad,
        _eigvals_grad,
        _svd_grad,
        _svd_factors_grad,
        _qr_grad,
        _refuse_complex,
    ):
        mark_derived(helper, "rule helper")


if np is not None:
    register_numpy_linalg_rules()

# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
