"""In-place writes on NumPy arrays (issue #22, first bullet; issue #26, causes 1 and 2).

Every form runs on the array itself, as in the plain program (the arguments change as the
plain call changes them), and is differentiated: each program is checked on several random
inputs against the plain run (result, arguments after the call) and against central finite
differences, at first order (fast and general paths) and at second order (Hessian-vector
products against differences of the gradient)."""

from __future__ import annotations

import copy
import operator

import numpy as np
import pytest

import dplus
from dplus import DplusError, NonDifferentiableError, grad
from dplus.transform.transformer import general_paths_only

rng = np.random.default_rng(2222)


# ---------------------------------------------------------------------------
# checking


def _call(f, args):
    return float(f(*copy.deepcopy(args)))


def fd_gradient(f, args, eps=1e-6):
    """Central differences of the scalar ``f`` in every float or float-array argument."""
    out = []
    for i, x in enumerate(args):
        if isinstance(x, float):
            hi, lo = list(args), list(args)
            hi[i], lo[i] = x + eps, x - eps
            out.append((_call(f, hi) - _call(f, lo)) / (2 * eps))
            continue
        if not (isinstance(x, np.ndarray) and x.dtype.kind == "f"):
            out.append(None)
            continue
        g = np.zeros(x.shape)
        for k in np.ndindex(x.shape):
            hi, lo = list(args), list(args)
            hi[i], lo[i] = x.copy(), x.copy()
            hi[i][k] += eps
            lo[i][k] -= eps
            g[k] = (_call(f, hi) - _call(f, lo)) / (2 * eps)
        out.append(g)
    return out


def check(f, *args, tol=1e-5, order2=True):
    """Result, arguments after the call and gradient against the plain run and finite
    differences (fast and general paths), then Hessian-vector products."""
    plain_args = copy.deepcopy(args)
    expected = f(*plain_args)
    fd = fd_gradient(f, args)
    for general in (False, True):
        dp_args = copy.deepcopy(args)
        if general:
            with general_paths_only():
                r = dplus.dplus(f)(*dp_args)
                gs = r.backprop(1.0)
        else:
            r = dplus.dplus(f)(*dp_args)
            gs = r.backprop(1.0)
        assert np.allclose(r.primal, expected, rtol=1e-12, atol=1e-12), (r.primal, expected)
        for a, b in zip(dp_args, plain_args):  # the arguments changed as in the plain call
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype and np.array_equal(a, b), (general, a, b)
        for i, g in enumerate(fd):
            if g is not None:
                assert np.allclose(gs[i], g, rtol=tol, atol=tol), (general, i, gs[i], g)
        # a second backward pass of the same forward gives the same, and leaves the arrays as
        # the program left them
        again = r.backprop(1.0)
        for i, g in enumerate(fd):
            if g is not None:
                assert np.allclose(again[i], gs[i], rtol=1e-12, atol=1e-12)
        for a, b in zip(dp_args, plain_args):
            if isinstance(a, np.ndarray):
                assert np.array_equal(a, b)
        (g2,) = [grad(f)(*copy.deepcopy(args))]
        for i, g in enumerate(fd):
            if g is not None:
                assert np.allclose(g2[i], g, rtol=tol, atol=tol)
    if order2 and not __import__("os").environ.get("NO_ORDER2"):
        check_second_order(f, args)


def check_second_order(f, args, eps=1e-5, tol=1e-4):
    """``hvp`` along a random direction against central differences of ``grad``."""
    diff = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    v = tuple(
        rng.normal(size=a.shape) if i in diff else (0.0 if isinstance(a, float) else None)
        for i, a in enumerate(args)
    )
    if any(x is None for x in v):
        return

    def g_at(shift):
        moved = tuple(a + shift * d if i in diff else a for i, (a, d) in enumerate(zip(args, v)))
        return grad(f)(*copy.deepcopy(moved))

    hi, lo = g_at(eps), g_at(-eps)
    expected = [(h - l_) / (2 * eps) for h, l_ in zip(hi, lo)]
    got = dplus.hvp(f)(copy.deepcopy(args), v)
    for i in diff:
        assert np.allclose(got[i], expected[i], rtol=tol, atol=tol), (i, got[i], expected[i])


def several(*shape, n=3):
    return [rng.normal(size=shape) for _ in range(n)]


# ---------------------------------------------------------------------------
# item, slice, mask and fancy assignment


def item_assignment(x):
    a = x * 1.0
    a[0] = x[1] * x[2]
    a[-1] = a[0] * a[1]
    return np.sum(a * x)


def slice_assignment(x):
    a = x * 2.0
    a[1:3] = np.sin(a[:2]) * x[2]
    return np.sum(a * a)


def stencil(u0):
    u = u0.copy()
    for _ in range(4):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(u**3)


def filled_output(x):
    n = x.shape[0]
    out = np.zeros(n)
    for i in range(n):
        out[i] = np.sin(x[i]) * x[i - 1]
    return np.sum(out * out)


def mask_assignment(x):
    a = x * 1.0
    a[a > 0] = a[a > 0] ** 2
    return np.sum(a * x)


def fancy_assignment(x):
    a = x * 1.0
    a[[0, 2, 0]] = x[:3] * 3.0  # element 0 named twice: it keeps the last value
    return np.sum(a * a)


def column_assignment(M):
    a = M * 1.0
    a[:, 1] = a[:, 0] * a[:, 2]
    a[0] = 2.0
    return np.sum(a * M)


def write_overlapping_itself(x):
    a = x * 1.0
    a[1:] = a[:-1] * 2.0  # the value read is the old contents (NumPy buffers the overlap)
    return np.sum(a * a * x)


@pytest.mark.parametrize(
    "f",
    [
        item_assignment,
        slice_assignment,
        stencil,
        filled_output,
        mask_assignment,
        fancy_assignment,
        write_overlapping_itself,
    ],
)
def test_assignment_into_a_vector(f):
    for x in several(5):
        check(f, x)


def test_assignment_into_a_matrix():
    for M in several(3, 3):
        check(column_assignment, M)


# ---------------------------------------------------------------------------
# augmented assignment, on arrays and on views


def view_augmented(x):
    a = x * 1.0
    v = a[2:]
    v += 1.0
    v *= x[2:]
    return np.sum(a * a)


def second_name(x):
    a = x * 1.0
    b = a
    b *= x
    return np.sum(a * x)


def column_scaled(M):
    a = M * 1.0
    for j in range(3):
        a[:, j] *= M[0, j]
    return np.sum(a * a)


def every_operator(x):
    a = x * 1.0
    v = a[1:]
    v += x[:-1]
    v -= 0.5 * x[1:]
    v *= x[1:]
    v /= 2.0 + x[1:] ** 2
    v **= 2
    return np.sum(a * x)


def matmul_in_place(M):
    a = M * 1.0
    a @= M
    return np.sum(a * a)


def rows_of_a_loop(B):
    for row in B:
        row *= 2.0
        row += row[0]
    return np.sum(B * B)


def transposed_view(M):
    a = M * 1.0
    t = a.T
    t[0] += t[1]
    return np.sum(a * M)


@pytest.mark.parametrize("f", [view_augmented, second_name, every_operator])
def test_augmented_assignment_on_shared_arrays(f):
    for x in several(4):
        check(f, x)


@pytest.mark.parametrize("f", [column_scaled, matmul_in_place, rows_of_a_loop, transposed_view])
def test_augmented_assignment_on_matrices(f):
    for M in several(3, 3):
        check(f, M)


# ---------------------------------------------------------------------------
# containers, objects, helpers, arguments


class Holder:
    pass


def in_a_list(x):
    a = x * 1.0
    rows = [a, x * 2.0]
    rows[0][1] = x[0] * 3.0
    first = rows[0]
    first += 1.0
    return np.sum(a * rows[1])


def in_a_dict(x):
    d = {"a": x * 1.0}
    b = d["a"]
    d["a"] += 1.0
    d["a"] *= x
    return np.sum(b * x)


def in_an_object(x):
    p = Holder()
    p.v = x * 1.0
    alias = p.v
    p.v += x
    alias *= 2.0
    return np.sum(p.v * x)


@dplus.define_dplus
def doubled_in_place(u):
    u *= 2.0
    return np.sum(u)


def through_a_decorated_helper(x):
    a = x * 1.0
    s = doubled_in_place(a[1:])
    return s + np.sum(a * a)


def on_the_argument(x):
    x += 1.0
    x[0] = x[1] * x[2]
    return np.sum(x * x)


def on_a_view_of_the_argument(M):
    r = M[1]
    r *= M[0]
    return np.sum(M * M)


def split_parts(x):
    a, b = np.split(x * 1.0, 2)
    a += 1.0
    b *= a
    c = np.concatenate([a, b])
    return np.sum(c * x)


@pytest.mark.parametrize(
    "f", [in_a_list, in_a_dict, in_an_object, through_a_decorated_helper, on_the_argument]
)
def test_changed_through_another_name(f):
    for x in several(4):
        check(f, x)


def test_split_parts():
    for x in several(6):
        check(split_parts, x)


def test_view_of_an_argument():
    for M in several(2, 3):
        check(on_a_view_of_the_argument, M)


def test_the_argument_changes_as_in_the_plain_call():
    x = np.array([1.0, 2.0, 3.0])
    y = x.copy()
    on_the_argument(y)
    (g,) = grad(on_the_argument)(x)
    assert np.array_equal(x, y)
    # the gradient is the sensitivity of the value the argument had on entry
    assert np.allclose(g, fd_gradient(on_the_argument, (np.array([1.0, 2.0, 3.0]),))[0])


# ---------------------------------------------------------------------------
# out=, ufunc.at, methods


def ufunc_out(x):
    a = x * 1.0
    np.multiply(a, x, out=a)
    b = np.empty_like(x)
    np.add(a, np.sin(x), out=b)
    np.tanh(b, b)
    return np.sum(b * a)


def ufunc_out_where(x):
    a = x * 1.0
    np.multiply(a, 3.0, out=a, where=x > 0)
    return np.sum(a * x)


def rule_out(M):
    y = np.zeros(3)
    np.sum(M * M, axis=0, out=y)
    c = np.zeros(3)
    np.cumsum(M[0], out=c)
    d = np.zeros((3, 3))
    np.dot(M, M, out=d)
    np.clip(y, -1.0, 1.5, out=y)
    return np.sum(y * c) + np.sum(d[0])


def add_at(x):
    a = x * 1.0
    np.add.at(a, [0, 2, 0], x[:3] * x[1:4])
    np.subtract.at(a, [1, 1], x[0])
    return np.sum(a * a)


def multiply_at(x):
    a = x + 2.0
    np.multiply.at(a, [0, 2, 0, 3], x[:4])
    return np.sum(a * x)


def methods(x):
    a = x * 1.0
    a.sort()
    b = np.empty(4)
    b.fill(x[0])
    c = np.zeros(4)
    np.copyto(c, a * b)
    np.copyto(a, x * x, where=x > 0)
    return np.sum(a * c) + np.sum(b)


def put_functions(x):
    a = x * 1.0
    np.put(a, [0, 3], x[1:3] * 2.0)
    a.put([1], x[0])
    b = np.zeros((3, 3))
    np.fill_diagonal(b, x[:3])
    np.place(a, x > 0, x[:2])
    np.putmask(a, x < 0.5, x * 3.0)
    c = np.zeros((2, 4))
    np.put_along_axis(c, np.array([[1], [3]]), x[:2, None], axis=1)
    return np.sum(a * x) + np.sum(b * b) + np.sum(c * c)


def partition_method(x):
    a = x * 1.0
    a.partition(2)
    return a[2] * x[0] + np.sum(a[:2])


def operator_functions(x):
    a = x * 1.0
    operator.imul(a, x)
    a.__iadd__(x[::-1])
    return np.sum(a * a)


@pytest.mark.parametrize(
    "f",
    [
        ufunc_out,
        ufunc_out_where,
        add_at,
        multiply_at,
        methods,
        put_functions,
        partition_method,
        operator_functions,
    ],
)
def test_out_at_and_methods(f):
    for x in several(4):
        check(f, x)


def test_out_of_rules():
    for M in several(3, 3):
        check(rule_out, M)


def resize_in_place(x):
    a = x * 1.0
    a.resize(6, refcheck=False)
    return np.sum(a)


def test_resize_is_refused():
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(NonDifferentiableError, match="resize") as info:
        grad(resize_in_place)(x)
    assert "test_numpy_in_place.py" in str(info.value)


def write_into_broadcast_view(x):
    a = np.broadcast_arrays(x * 1.0, np.zeros((2, 3)))[0]
    a[0, 0] = 1.0
    return np.sum(a)


def test_broadcast_view_is_refused():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NonDifferentiableError, match="broadcast view"):
            grad(write_into_broadcast_view)(np.array([1.0, 2.0, 3.0]))


# ---------------------------------------------------------------------------
# dtypes


def float32_writes(x):
    a = x * np.float32(2.0)
    a[0] = a[1] * a[2]
    a += 1.0
    return np.sum(a * x)


def test_float32_writes():
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    r = dplus.dplus(float32_writes)(x.copy())
    assert r.primal == float32_writes(x.copy())
    (g,) = r.backprop(1.0) if False else grad(float32_writes)(x.copy())
    assert g.dtype == np.float32
    fd = fd_gradient(float32_writes, (x.astype(float),))[0]
    assert np.allclose(g, fd, rtol=1e-3, atol=1e-3)


def integer_index_array(x):
    idx = np.zeros(3, dtype=int)
    idx[0] = 2
    y = x[idx]
    idx[1] = 1  # the read above must keep the index it used
    return np.sum(y * x[idx])


def test_integer_arrays_are_restored_for_the_reverse_pass():
    for x in several(3):
        check(integer_index_array, x)


# ---------------------------------------------------------------------------
# code dplus does not see changing arrays (the default policy)


def bump(u):
    u += 1.0


def helper_changes_argument_after_it_was_read(w, x):
    r = np.sum(w * x)
    bump(x)
    return r


def helper_changes_a_view_nothing_reads_later(w, x):
    a = x * 1.0
    r = np.sum(w * a)
    bump(a[1:])
    return r


def test_unseen_change_of_values_nothing_reads_later():
    for w, x in zip(several(3), several(3)):
        check(helper_changes_argument_after_it_was_read, w, x, order2=False)
        check(helper_changes_a_view_nothing_reads_later, w, x, order2=False)


def helper_changes_what_is_read_later(w, x):
    a = x * 1.0
    bump(a)
    return np.sum(w * a * a)


def test_unseen_change_of_values_read_later_is_refused():
    w, x = np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0])
    with pytest.raises(DplusError, match="bump") as info:
        grad(helper_changes_what_is_read_later)(w, x)
    assert "changed in place" in str(info.value)
