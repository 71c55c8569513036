"""NumPy gradients of products (``dot matmul inner outer tensordot einsum``) and of linear
algebra (``linalg.norm inv det slogdet solve``, ``trace``, ``diag``, ``diagonal``).
Registered by :mod:`primitives.numpy_table`; the conventions and the list of what is covered
are in :mod:`primitives.numpy`.
"""

from __future__ import annotations

from typing import Any

from dplus.runtime.memory import results_take_entries

try:
    import numpy as np
except ImportError:  # dplus works without NumPy; then there is nothing to register
    np = None  # type: ignore[assignment]  # (the module registers nothing then: `if np is not None`)

from dplus.runtime.linear import gen_zero, tuple_items

from .container_reads import scatter_add
from .numpy_ufuncs import _T, _expand, _matmul_grads, _safe_div, _sign_conj, _sum_to, _unsupported

Z = gen_zero


# --- products


def _dot_vjp(A, r, a, b, out=None, *, constant=(False, False)):
    an, bn = np.ndim(a), np.ndim(b)
    if an == 0 or bn == 0:
        return A * b, A * a
    if an <= 2 and bn <= 2:
        return _matmul_grads(A, a, b, constant[0], constant[1])
    a = np.asarray(a)
    b = np.asarray(b)
    if bn == 1:  # np.dot(a, b)[i...] = sum_m a[i..., m] b[m]
        return np.expand_dims(A, -1) * b, np.tensordot(A, a, an - 1)
    # np.dot(a, b)[i..., j..., k] = sum_m a[i..., m] b[j..., m, k]
    ga = np.tensordot(A, np.swapaxes(b, -1, -2), bn - 1)
    gb = np.swapaxes(
        np.tensordot(A, a, [list(range(-an - bn + 2, -bn + 1)), list(range(an - 1))]), -1, -2
    )
    return ga, gb


def _matmul_vjp(A, r, x1, x2, *, constant=(False, False), **kw):
    return _matmul_grads(A, x1, x2, constant[0], constant[1])


def _tensordot_axes(axes: Any, an: int, bn: int) -> tuple[list, list]:
    if isinstance(axes, int):
        return list(range(an - axes, an)), list(range(axes))
    xa, xb = axes
    xa = [xa] if isinstance(xa, int) else list(xa)
    xb = [xb] if isinstance(xb, int) else list(xb)
    return [i % an for i in xa], [i % bn for i in xb]


def _tensordot_grads(A: Any, a: Any, b: Any, axes: Any) -> tuple:
    a = np.asarray(a)
    b = np.asarray(b)
    an, bn = a.ndim, b.ndim
    ca, cb = _tensordot_axes(axes, an, bn)
    fa = [i for i in range(an) if i not in ca]
    fb = [i for i in range(bn) if i not in cb]
    nfa, nfb = len(fa), len(fb)
    A = np.asarray(A).reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[i] for i in fb))
    # a: contract A's b-axes with b's free axes; what is left of b comes in b's axis order
    ga = np.tensordot(A, b, (list(range(nfa, nfa + nfb)), fb))
    order_b = sorted(cb)
    ga_axes = fa + [ca[cb.index(j)] for j in order_b]
    ga = np.transpose(ga, np.argsort(ga_axes))
    gb = np.tensordot(a, A, (fa, list(range(nfa))))
    order_a = sorted(ca)
    gb_axes = [cb[ca.index(i)] for i in order_a] + fb
    gb = np.transpose(gb, np.argsort(gb_axes))
    return ga, gb


def _tensordot_vjp(A, r, a, b, axes=2):
    return _tensordot_grads(A, a, b, axes)


def _inner_vjp(A, r, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return A * b, A * a
    return _tensordot_grads(A, a, b, ([np.ndim(a) - 1], [np.ndim(b) - 1]))


def _outer_vjp(A, r, a, b, out=None):
    A = np.asarray(A)
    av = np.ravel(a)
    bv = np.ravel(b)
    return (A @ bv).reshape(np.shape(a)), (av @ A).reshape(np.shape(b))


def _einsum_parse(args: tuple) -> tuple[list[str], str, list, list[int]]:
    try:
        from numpy._core.einsumfunc import _parse_einsum_input  # type: ignore[attr-defined]  # (private: not in NumPy's stubs)
    except ImportError:  # NumPy < 2
        from numpy.core.einsumfunc import _parse_einsum_input  # type: ignore[no-redef]
    ins, out_subs, ops = _parse_einsum_input(args)
    if isinstance(args[0], str):
        positions = list(range(1, len(args)))
    else:
        positions = list(range(0, len(args) - (len(args) % 2 == 1), 2))
    return ins.split(","), out_subs, list(ops), positions


def _einsum_vjp(A: Any, r: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """The sensitivity of each operand is an einsum of the result sensitivity with the others."""
    subs, out_subs, _, positions = _einsum_parse(args)
    ops = [args[p] for p in positions]
    A = np.asarray(A)
    sens: list = [Z] * len(args)
    for k, (s_k, op_k) in enumerate(zip(subs, ops)):
        op_k = np.asarray(op_k)
        if len(s_k) != op_k.ndim:
            _unsupported("this numpy.einsum (an ellipsis that broadcasts over missing dimensions)")
        others = [(s, o) for j, (s, o) in enumerate(zip(subs, ops)) if j != k]
        named = set(out_subs).union(*[set(s) for s, _ in others]) if others else set(out_subs)
        uniq = "".join(dict.fromkeys(s_k))
        dims = {c: op_k.shape[s_k.index(c)] for c in uniq}
        naked = "".join(c for c in uniq if c not in named)
        in_subs = [out_subs] + [s for s, _ in others]
        operands = [A] + [o for _, o in others]
        if naked:
            in_subs.append(naked)
            operands.append(np.ones(tuple(dims[c] for c in naked)))
        g = np.einsum(",".join(in_subs) + "->" + uniq, *operands)
        g = _sum_to(g, tuple(dims[c] for c in uniq))
        if uniq != s_k:  # repeated indices (a diagonal): the values go onto it (through
            # scatter_add rather than a write into a view, so the reverse differentiates again)
            grid = np.indices(g.shape, sparse=True)
            g = scatter_add(op_k, tuple(grid[uniq.index(c)] for c in s_k), g)
        sens[positions[k]] = g
    return tuple(sens)


# --- linear algebra


def _norm_grad(A, r, x, ord=None, axis=None, keepdims=False):
    x = np.asarray(x)
    matrix = (isinstance(axis, (tuple, list)) and len(axis) == 2) or (
        axis is None and ord is not None and x.ndim == 2
    )
    if matrix:
        ax = (0, 1) if axis is None else tuple(a % x.ndim for a in axis)
        xm = np.moveaxis(x, ax, (-2, -1))
        Am = np.reshape(A, xm.shape[:-2] + (1, 1))
        rm = np.reshape(r, xm.shape[:-2] + (1, 1))
        gm = _matrix_norm_grad(Am, rm, xm, ord)
        return np.moveaxis(gm, (-2, -1), ax)
    if axis is None:
        Ae = np.broadcast_to(A, np.shape(x)) if keepdims else A
        re = r
    else:
        Ae = _expand(A, x.shape, axis, keepdims, copy=False)
        re = _expand(r, x.shape, axis, keepdims, copy=False)
    if ord is None or ord == 2:
        return _safe_div(Ae, re) * np.conj(x)
    if ord == 1:
        return Ae * _sign_conj(x)
    if ord == np.inf or ord == -np.inf:
        ax = np.abs(x)
        mask = ax == re
        count = np.sum(mask, axis=axis, keepdims=True)
        return Ae * mask * _sign_conj(x) / np.maximum(count, 1)
    if ord == 0:
        return Z
    p = float(ord)
    ax = np.abs(x)
    return _safe_div(Ae, re ** (p - 1)) * _sign_conj(x) * ax ** (p - 1)


def _matrix_norm_grad(A, r, x, ord):
    """Matrix norms over the last two axes; ``A`` and ``r`` have shape ``batch + (1, 1)``."""
    if ord is None or ord == "fro":
        return _safe_div(A, r) * np.conj(x)
    if ord == "nuc":
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        return A * np.conj(u @ vt)
    if ord == 2 or ord == -2:
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        i = 0 if ord == 2 else -1
        return A * np.conj(
            u[..., :, i : i + 1 if i == 0 else None] @ vt[..., i : i + 1 if i == 0 else None, :]
        )
    if ord in (1, -1, np.inf, -np.inf):
        sum_axis = -2 if ord in (1, -1) else -1  # 1: column sums; inf: row sums
        sums = np.sum(np.abs(x), axis=sum_axis, keepdims=True)
        mask = sums == r
        count = np.sum(mask, axis=-1 if sum_axis == -2 else -2, keepdims=True)
        return A * mask * _sign_conj(x) / np.maximum(count, 1)
    return _unsupported(f"numpy.linalg.norm with ord={ord!r}")


def _inv_grad(A, r, a):
    rt = _T(r)
    return -(rt @ A @ rt)


def _det_grad(A, r, a):
    try:
        inverse = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        inverse = None
    if inverse is None or np.any(_condition(a, inverse) > _COFACTOR_CONDITION):
        # (a singular matrix, or nearly: det is a polynomial, its derivative the cofactor
        # matrix, which det * inv^T cannot give there: inv raised a raw LinAlgError, and
        # near one the two huge terms of its derivative cancel, a wrong Hessian)
        return np.expand_dims(np.asarray(A), (-2, -1)) * _cofactors(np.asarray(a))
    return np.expand_dims(np.asarray(A * r), (-2, -1)) * _T(inverse)


_COFACTOR_CONDITION = 1e6  # (the Hessian through det * inv^T loses about cond * eps)


def _condition(a, inverse):
    """The Frobenius condition number (an upper bound of the 2-norm one), from the inverse."""
    return np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(inverse, axis=(-2, -1))


def _cofactors(a):
    """The cofactor matrix of (a stack of) square matrices, from the minors' determinants."""
    n = a.shape[-1]
    if n == 1:
        return np.ones_like(a)
    rows = []
    for i in range(n):
        kept_rows = [k for k in range(n) if k != i]
        row = []
        for j in range(n):
            kept_columns = [k for k in range(n) if k != j]
            minor = a[..., kept_rows, :][..., :, kept_columns]
            row.append((-1.0) ** (i + j) * np.linalg.det(minor))
        rows.append(np.stack(row, axis=-1))
    return np.stack(rows, axis=-2)


def _slogdet_grad(A, r, a):
    parts = tuple_items(A, 2)
    Al = parts[1]
    if Al is Z or Al is None:
        return Z
    return np.asarray(Al)[..., None, None] * _T(np.linalg.inv(a))


def _solve_vjp(A, r, a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    if b.ndim == 1:
        gb = np.linalg.solve(_T(a), np.asarray(A)[..., None])[..., 0]
        ga = -gb[..., :, None] * np.asarray(r)[..., None, :]
    else:
        gb = np.linalg.solve(_T(a), A)
        ga = -(gb @ _T(r))
    return ga, gb


def _trace_grad(A, r, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    a = np.asarray(a)
    n, m = a.shape[axis1], a.shape[axis2]
    eye = np.eye(n, m, k=offset)
    g = eye.reshape(eye.shape + (1,) * (a.ndim - 2)) * np.asarray(A)  # (n, m, *rest)
    return np.moveaxis(g, (0, 1), (axis1, axis2))


def _diagonal_grad(A, r, a, offset=0, axis1=0, axis2=1):
    a = np.asarray(a)
    # np.diagonal's result: the other axes first, the diagonal last; scatter_add (rather than a
    # write into a view) keeps this reverse differentiable again
    moved = np.moveaxis(a, (axis1, axis2), (-2, -1))
    i = np.arange(np.shape(A)[-1]) if np.ndim(A) else np.arange(0)
    rows = i - min(offset, 0)
    cols = i + max(offset, 0)
    return np.moveaxis(scatter_add(moved, (Ellipsis, rows, cols), A), (-2, -1), (axis1, axis2))


def _diag_grad(A, r, v, k=0):
    v = np.asarray(v)
    if v.ndim == 1:
        return np.diagonal(A, k).copy()
    return _diagonal_grad(A, r, v, k)


# its rules make the arrays they return: those take the sensitivity of their memory when it is
# changed in place later (runtime.memory)
results_take_entries(filename=__file__)
