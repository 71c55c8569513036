"""Trust on NumPy code (issue #26): every in-place form on an array either computes what
Python computes with a correct gradient, or raises a dplus error before anything differs
from the plain run; arrays changed by code dplus does not see are caught; rows of an
array unpack; constants are never refused; second order works through arrays."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest

import dplus
from dplus import DplusError, grad
from dplus.transform.transformer import general_paths_only

rng = np.random.default_rng(2611)


# ---------------------------------------------------------------------------
# helpers


def _fd_grad(f, args, i, eps=1e-6):
    """Central finite differences of the scalar ``f`` in its ``i``-th (array or float) argument."""
    x = args[i]
    if isinstance(x, float):
        lo = list(copy.deepcopy(args))
        hi = list(copy.deepcopy(args))
        lo[i] = x - eps
        hi[i] = x + eps
        return (float(f(*hi)) - float(f(*lo))) / (2 * eps)
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi = [copy.deepcopy(a) for a in args]
        lo = [copy.deepcopy(a) for a in args]
        hi[i] = x.copy()
        lo[i] = x.copy()
        hi[i][k] += eps
        lo[i][k] -= eps
        g[k] = (float(f(*hi)) - float(f(*lo))) / (2 * eps)
    return g


def check_program(f, *args, diff=None, tol=1e-5):
    """Primal, argument mutation and gradient (fast and general paths) against the plain run
    and central finite differences."""
    plain_args = copy.deepcopy(args)
    expected = f(*plain_args)
    diff = range(len(args)) if diff is None else diff
    for general in (False, True):
        dp_args = copy.deepcopy(args)
        if general:
            with general_paths_only():
                r = dplus.dplus(f)(*dp_args)
        else:
            r = dplus.dplus(f)(*dp_args)
        assert np.allclose(r.primal, expected, rtol=1e-12, atol=1e-12), (r.primal, expected)
        for a, b in zip(
            dp_args, plain_args
        ):  # the arguments changed as the plain call changes them
            assert type(a) is type(b)
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype and np.array_equal(a, b), (a, b)
        gs = r.backprop(1.0)
        for i in diff:
            fd = _fd_grad(f, args, i)
            assert np.allclose(gs[i], fd, rtol=tol, atol=tol), (general, i, gs[i], fd)


def hessian(f):
    """The Hessian of a function of one array (reverse over reverse)."""
    return dplus.jacobian(dplus.grad1(f))


def several(*shape):
    return [rng.normal(size=shape) for _ in range(3)]


# ---------------------------------------------------------------------------
# 1. augmented assignment and other in-place forms


def aug_private(x):
    a = x * 2.0
    a += x * x
    a *= x
    return np.sum(a)


def aug_private_loop(x):
    acc = x * 0.0
    for k in range(3):
        acc += x**k
        acc *= 0.5
    return np.sum(acc * acc)


def aug_private_after_reads(w, x):
    h = w * x
    r = np.sum(h * h)
    h += x  # h was recorded by the product: the new value is another array
    h /= 2.0
    return r + np.sum(np.tanh(h))


def aug_float32(x):
    a = x * np.float32(2.0)
    a += 1.0  # stays float32, as Python keeps it
    return np.sum(a * x)


@pytest.mark.parametrize("f", [aug_private, aug_private_loop, aug_float32])
def test_augmented_assignment_on_an_unshared_local_array(f):
    for x in several(4):
        check_program(f, x)


def test_augmented_assignment_keeps_the_dtype_of_float32():
    x = np.arange(1.0, 4.0, dtype=np.float32)
    r = dplus.dplus(aug_float32)(x)
    assert r.primal.dtype == aug_float32(x.copy()).dtype
    (g,) = grad(aug_float32)(x)
    assert np.allclose(g, 4 * x + 1.0)


def test_augmented_assignment_after_the_array_was_recorded():
    for w, x in zip(several(3), several(3)):
        check_program(aug_private_after_reads, w, x)


def test_augmented_assignment_second_order():
    x = np.array([0.5, -1.0, 2.0])
    (H,) = hessian(aug_private)(x)
    assert np.allclose(H, np.diag(6 * x + 4.0))


def aug_through_view(x):
    a = x * 1.0
    v = a[1:]
    v += 1.0
    return np.sum(a * a)


def aug_on_argument(x):
    x += 1.0
    return np.sum(x * x)


def aug_on_rows(B):
    for row in B:
        row *= 2.0
    return np.sum(B * B)


@dplus.define_dplus
def doubled_in_place(u):
    u *= 2.0
    return np.sum(u)


def aug_in_decorated_helper(x):
    a = x * 1.0
    s = doubled_in_place(a)
    return s + np.sum(a * a)


def aug_on_split(x):
    a, b = np.split(x * 1.0, 2)
    a += 1.0
    return np.sum(a * b)


def aug_on_second_name(x):
    a = x * 1.0
    b = a
    b += 1.0
    return np.sum(a * x)


def aug_on_dict_element(x):
    d = {"a": x * 1.0}
    b = d["a"]
    d["a"] += 1.0
    return np.sum(b * x)


class Holder:
    pass


def aug_on_attribute(x):
    p = Holder()
    p.v = x * 1.0
    p.v += 1.0
    return np.sum(p.v)


def aug_after_a_call_saw_it(x):
    a = x * 1.0
    keep = [a]
    a += 1.0
    return np.sum(keep[0] * x)


def aug_after_view_in_loop(x):
    a = x * 1.0
    for k in range(2):
        a += 1.0
        v = a.T
    return np.sum(v * a)


@pytest.mark.parametrize(
    "f,arg",
    [
        (aug_through_view, np.array([1.0, 2.0, 3.0])),
        (aug_on_argument, np.array([1.0, 2.0, 3.0])),
        (aug_on_rows, np.array([[1.0, 2.0], [3.0, 4.0]])),
        (aug_in_decorated_helper, np.array([1.0, 2.0, 3.0])),
        (aug_on_split, np.array([1.0, 2.0, 3.0, 4.0])),
        (aug_on_second_name, np.array([1.0, 2.0, 3.0])),
        (aug_on_dict_element, np.array([1.0, 2.0, 3.0])),
        (aug_on_attribute, np.array([1.0, 2.0, 3.0])),
        (aug_after_a_call_saw_it, np.array([1.0, 2.0, 3.0])),
        (aug_after_view_in_loop, np.array([1.0, 2.0, 3.0])),
    ],
)
def test_augmented_assignment_on_a_shared_array_runs_in_place(f, arg):
    # (refused before in-place writes were followed: each runs as in Python now, the caller's
    # array changed exactly as the plain call changes it)
    for k in range(3):
        check_program(f, arg + rng.normal(size=arg.shape) * (k > 0))


def test_augmented_assignment_on_numbers_and_lists_unchanged():
    def f(x, xs):
        y = x
        y += x * x
        xs += [y]
        return xs[-1] * 2.0

    assert grad(f)(3.0, [1.0]) == (14.0, [0.0])


def in_place_method(x):
    a = x * 1.0
    a.__iadd__(1.0)
    return np.sum(a * x)


def in_place_operator_function(x):
    import operator

    a = x * 1.0
    operator.imul(a, 2.0)
    return np.sum(a * x)


def in_place_ufunc_out(x):
    a = x * 1.0
    np.multiply(a, 2.0, out=a)
    return np.sum(a * x)


def in_place_add_at(x):
    a = x * 1.0
    np.add.at(a, [0, 0], 1.0)
    return np.sum(a * x)


def in_place_item(x):
    a = x * 1.0
    a[0] = 5.0
    return np.sum(a * x)


def in_place_slice_aug(x):
    a = x * 1.0
    a[1:] += 1.0
    return np.sum(a * x)


def in_place_sort(x):
    a = x * 1.0
    a.sort()
    return np.sum(a * x)


def in_place_fill(x):
    a = x * 1.0
    a.fill(1.0)
    return np.sum(a * x)


def in_place_copyto(x):
    a = x * 1.0
    np.copyto(a, x * x)
    return np.sum(a * x)


@pytest.mark.parametrize(
    "f",
    [
        in_place_method,
        in_place_operator_function,
        in_place_ufunc_out,
        in_place_add_at,
        in_place_item,
        in_place_slice_aug,
        in_place_sort,
        in_place_fill,
        in_place_copyto,
    ],
)
def test_other_in_place_forms_run_in_place(f):
    for x in [np.array([3.0, 1.0, 2.0])] + several(3):
        check_program(f, x)


# ---------------------------------------------------------------------------
# 3. unpacking the rows of an array


def unpack_rows(A):
    a, b = A
    return np.sum(b * b) + np.sum(a * b)


def unpack_vector(v):
    x, y, z = v
    return x * y + z * z * x


def iterate_rows(A):
    total = 0.0
    for row in A:
        total = total + np.sum(row * row) * row[0]
    return total


def unpack_starred(A):
    first, *rest = A
    return np.sum(first * rest[-1])


def test_unpacking_rows_of_an_array():
    for A in several(2, 3):
        check_program(unpack_rows, A)


def test_unpacking_a_vector():
    for v in several(3):
        check_program(unpack_vector, v)
    v = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    (g,) = grad(unpack_vector)(v)
    assert g.shape == (3,) and np.allclose(g, [2.0 + 9.0, 1.0, 6.0])


def test_iterating_rows():
    for A in several(3, 2):
        check_program(iterate_rows, A)


def test_starred_unpacking_of_rows():
    for A in several(3, 2):
        check_program(unpack_starred, A)


def test_unpacking_rows_second_order():
    A = np.array([[1.0, 2.0], [0.5, -1.0]])
    (H,) = hessian(unpack_rows)(A)
    assert H.shape == (2, 2, 2, 2)
    flat = H.reshape(4, 4)
    # L = b.b + a.b: d2L/db2 = 2I, d2L/dadb = I
    expected = np.block([[np.zeros((2, 2)), np.eye(2)], [np.eye(2), 2 * np.eye(2)]])
    assert np.allclose(flat, expected)


# ---------------------------------------------------------------------------
# 2. arrays changed by code dplus does not see


def bump(u):
    u += 1.0


def scale_rows(M):
    for row in M:
        row *= 2.0


def helper_changes_argument(w, x):
    r = np.sum(w * x)
    bump(x)
    return r


def helper_changes_a_view(w, x):
    a = x * 1.0
    r = np.sum(w * a)
    bump(a[1:])
    return r + np.sum(a)


def helper_changes_array_in_a_list(w, x):
    a = x * 1.0
    r = np.sum(w * a)
    scale_rows([a])
    return r


def cumprod_into(w, x):
    # (np.modf has no rule: the unknown-function policy sees the change; np.cumprod has one now)
    y = np.zeros(3)
    np.modf(w * x, out=(y, np.zeros(3)))
    return np.sum(y)


def method_without_rule_in_place(w, x):
    a = w * x
    r = np.sum(a * a)
    a.byteswap(inplace=True)
    return r


@pytest.mark.parametrize(
    "f", [helper_changes_argument, helper_changes_array_in_a_list, method_without_rule_in_place]
)
def test_arrays_changed_by_unseen_code_whose_new_values_do_not_matter(f):
    # the reverse pass puts back what the unseen code overwrote: the operations before the
    # call read their own values, and the arrays hold the program's values afterwards
    for w, x in zip(several(3), several(3)):
        check_program(f, w, x)


@pytest.mark.parametrize("f", [helper_changes_a_view, cumprod_into])
def test_arrays_changed_by_unseen_code_whose_new_values_matter_are_refused(f):
    for w, x in [(np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0]))] + list(
        zip(several(3), several(3))
    ):
        for general in (False, True):
            with pytest.raises(DplusError) as info:
                if general:
                    with general_paths_only():
                        grad(f)(w.copy(), x.copy())
                else:
                    grad(f)(w.copy(), x.copy())
            assert ("bump" in str(info.value)) == (f is helper_changes_a_view)


def reads_only(u):
    return float(np.sum(u))  # no change: runs as it is


def helper_that_only_reads(w, x):
    r = np.sum(w * x)
    n = reads_only(x)
    return r * 2.0 if n > 0 else r


def test_unseen_code_that_does_not_change_arrays_still_runs():
    for w, x in zip(several(3), several(3)):
        check_program(helper_that_only_reads, w, x)


# ---------------------------------------------------------------------------
# 5. constants are never refused

W_CONSTANT = np.array([[1.0, 4.0], [2.0, 0.5]])
SCALES = [1.0, 2.0]


def uses_ptp_of_a_constant(x):
    return np.sum(x * np.ptp(W_CONSTANT))


def uses_ptp_with_keyword(x):
    return np.sum(x * np.ptp(W_CONSTANT, axis=0))


def uses_a_seeded_draw(x):
    k = random.Random(0).randint(1, 5)
    return x * k


def count_positive(v):
    return int(np.sum(v > 0))


def uses_an_integer_helper(x):
    return np.sum(x * count_positive(x))


def uses_unknown_on_a_global_list(x):
    SCALES.append(x)
    try:
        return len_times_sum(SCALES)
    finally:
        SCALES.pop()


def len_times_sum(xs):
    return len(xs) * sum(xs)


def test_unknown_function_of_constants_is_a_constant():
    for x in several(2):
        check_program(uses_ptp_of_a_constant, x)
        check_program(uses_ptp_with_keyword, x)
        check_program(uses_an_integer_helper, x)
    for x in (0.5, 2.0, -1.5):
        check_program(uses_a_seeded_draw, x)


def test_unknown_function_of_constants_second_order():
    x = np.array([0.5, -1.0])
    (H,) = hessian(lambda x: np.sum(x * x * np.ptp(W_CONSTANT)))(x)
    assert np.allclose(H, 2 * np.ptp(W_CONSTANT) * np.eye(2))


def test_unknown_function_whose_result_depends_on_inputs_is_still_refused():
    with pytest.raises(dplus.UnknownTransformError, match="len_times_sum"):
        grad(uses_unknown_on_a_global_list)(3.0)
    assert SCALES == [1.0, 2.0]
    with pytest.raises(dplus.UnknownTransformError, match="unwrap"):  # (np.ptp has a rule now)
        grad(lambda x: np.sum(np.unwrap(x * W_CONSTANT)))(np.array([1.0, 2.0]))


# ---------------------------------------------------------------------------
# 4. second order


def cube_of_slice(x):
    return np.sum(x[1:] ** 3)


def cube_of_fancy_index(x):
    return np.sum(x[[0, 2, 2]] ** 3)


def cube_of_mask(x):
    return np.sum(x[x > 0] ** 3)


def cube_of_take_and_repeat(x):
    return np.sum(np.take(x, [1, 1, 0]) ** 3) + np.sum(np.repeat(x, 2) ** 3)


def dict_of_arrays_of_two_shapes(x):
    d = {"a": x * 2.0, "m": np.ones((2, 3))}  # "m" is never read
    return np.sum(d["a"] ** 3)


def _fd_hessian(f, x, eps=1e-4):
    g = lambda y: _fd_grad(f, (y,), 0, eps=1e-6)
    H = np.zeros((x.size, x.size))
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        H[:, i] = (g(x + e) - g(x - e)) / (2 * eps)
    return H


@pytest.mark.parametrize(
    "f",
    [
        cube_of_slice,
        cube_of_fancy_index,
        cube_of_mask,
        cube_of_take_and_repeat,
        dict_of_arrays_of_two_shapes,
        unpack_vector,
    ],
)
def test_hessians_through_indexing(f):
    for x in several(3):
        (H,) = hessian(f)(x)
        assert np.allclose(H, _fd_hessian(f, x), rtol=1e-4, atol=1e-4), f.__name__


def test_scatter_add_rule_against_finite_differences():
    from dplus.primitives.container_reads import scatter_add

    like = np.zeros((3, 2))
    idx = ([0, 2, 0], slice(None))
    A = rng.normal(size=(3, 2))
    S = rng.normal(size=(3, 2))
    r = dplus.lift_dplus(scatter_add)(like, idx, A)
    expected = np.zeros((3, 2))
    np.add.at(expected, idx, A)
    assert np.array_equal(r.primal, expected)
    gA = r.backprop(S, dplus.BoxSensitivities())[3]
    assert np.allclose(gA, S[idx])  # the transpose reads back what was added


def sum_of_array_elements(x):
    return sum(x**3)


def dict_element_read_twice(x):
    d = {"a": x * 2.0}
    return np.sum(d["a"] ** 3) + np.sum(d["a"])


@pytest.mark.parametrize(
    "f,d2", [(sum_of_array_elements, lambda x: 6 * x), (dict_element_read_twice, lambda x: 48 * x)]
)
def test_second_order_through_builtin_sum_and_dicts(f, d2):
    # (refused before the box-sensitivity map was differentiable again)
    for x in (np.array([1.0, 2.0, 3.0]), np.array([-0.5, 0.25, 1.5])):
        (H,) = hessian(f)(x)  # (this module's hessian: jacobian(grad1(f)))
        assert np.allclose(H, np.diag(d2(x)), rtol=1e-12)


def accumulate_into_zeros(x):
    acc = np.zeros(3)
    for k in range(3):
        acc += x**k
    total = np.ones_like(x)
    total *= np.sum(acc)
    c = x.copy()
    c -= 1.0
    return np.sum(total * c)


def zeros_shadowed(x, np_=np):
    acc = np_.zeros(3)  # np_ is a parameter: not known to make a new array
    acc += x
    return np.sum(acc)


def test_augmented_assignment_on_fresh_numpy_arrays():
    for x in several(3):
        check_program(accumulate_into_zeros, x)


def test_augmented_assignment_on_an_array_of_unknown_origin():
    for x in several(3):
        check_program(zeros_shadowed, x)


# ---------------------------------------------------------------------------
# float32 arguments


@pytest.mark.parametrize(
    "f",
    [
        aug_private,
        aug_private_loop,
        accumulate_into_zeros,
        unpack_vector,
        cube_of_slice,
        uses_ptp_of_a_constant,
    ],
)
def test_float32_arguments(f):
    for x in several(3) if f is not uses_ptp_of_a_constant else several(2):
        x32 = x.astype(np.float32)
        plain = f(x32.copy())
        r = dplus.dplus(f)(x32)
        assert np.asarray(r.primal).dtype == np.asarray(plain).dtype and np.allclose(
            r.primal, plain, rtol=1e-6
        )
        (g,) = r.backprop(1.0)
        assert g.shape == x.shape
        assert np.allclose(g, _fd_grad(f, (x32.astype(float),), 0), rtol=1e-3, atol=1e-3)


def _looks_at(pairs):  # a function dplus knows nothing of: run, its arguments watched
    return len(pairs)


def test_a_list_of_array_pairs_given_to_unknown_code():
    """The check that unknown code left a list's items in place compared the first items
    of 2-tuples with ``==`` (meant for a dict's (key, value) items): a raw ValueError for
    arrays (found by autograd's test_tensordot and test_outer through the shim)."""

    def f(x):
        pairs = [(x, x * 2.0), (x * 3.0, x)]
        n = _looks_at(pairs)
        return float(np.sum(pairs[0][1] * pairs[1][0]) * n)

    rng = np.random.default_rng(5)
    for _ in range(3):
        x = rng.normal(size=(2, 3))
        g = dplus.grad(f)(x)[0]
        np.testing.assert_allclose(g, 2 * 6.0 * 2 * x, rtol=1e-12)
