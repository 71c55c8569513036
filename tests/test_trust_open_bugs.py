"""Regression tests of the fuzzer's open trust bugs (tests/fuzz/FINDINGS.md; issues #18 and #26).

Each construct is checked against central finite differences on several inputs, with the fast
paths and under ``general_paths_only()``, and at second order where dplus supports it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from path_helpers import check_fd, check_first_order, check_second_order, close

import dplus
from dplus.transform.transformer import general_paths_only

BOTH_PATHS = pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])


def on_path(general: bool):
    import contextlib

    return general_paths_only() if general else contextlib.nullcontext()


# ---------------------------------------------------------------------------
# F15: a dict passed as ``**d``, then shrunk, keeps the sensitivity of the keys the call read


def sum_of_keywords_then_pop(d):
    def g(first, *rest, scale=1.0, **kw):
        return sum(kw.values())

    v = g(0.5, **d)
    d.pop("c", 0.5)
    return v


@dplus.define_dplus
def weighted(a, b=2.0, **kw):
    return a * b * b + sum(kw.values())


def double_star_then_pop_and_del(d):
    v = weighted(**d)
    d.pop("b")
    del d["c"]
    return v * d["a"]


def double_star_then_clear_and_refill(d):
    v = weighted(**d)
    d.clear()
    d["a"] = 3.0
    return v + d["a"]


def local_dict_then_pop(x, y, z):
    d = {"a": x, "b": y, "c": z}
    v = weighted(**d)
    d.pop("b")
    return v * x


def star_list_then_pop(xs):
    def g(*a):
        return a[0] * a[1] * a[2]

    v = g(*xs)
    xs.pop()
    del xs[0]
    return v


DICTS = [
    {"a": -1.47, "b": 0.16, "c": -0.40},
    {"a": 0.3, "b": 1.2, "c": -0.7},
    {"a": 2.5, "b": -0.9, "c": 1.1},
]


@BOTH_PATHS
@pytest.mark.parametrize(
    "f", [sum_of_keywords_then_pop, double_star_then_pop_and_del, double_star_then_clear_and_refill]
)
@pytest.mark.parametrize("d", DICTS)
def test_double_star_dict_shrunk_after_the_call(f, d, general):
    with on_path(general):
        check_fd(f, dict(d))
        grad = dplus.grad(f)(dict(d))[0]
    assert set(grad) == set(d)
    assert all(v != 0.0 for v in grad.values())  # every key the call read has a sensitivity


def test_double_star_popped_key_keeps_its_sensitivity():
    close(dplus.grad(sum_of_keywords_then_pop)(dict(DICTS[0])), ({"a": 1.0, "b": 1.0, "c": 1.0},))


@pytest.mark.parametrize("args", [(0.3, 1.2, -0.7), (-1.1, 0.4, 2.0), (0.9, -0.6, 0.25)])
def test_double_star_local_dict_popped(args):
    check_first_order(local_dict_then_pop, *args)


@BOTH_PATHS
@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [-0.5, 1.5, 0.7], [2.2, -1.3, 0.4]])
def test_star_list_shrunk_after_the_call(xs, general):
    with on_path(general):
        check_fd(star_list_then_pop, list(xs))


# ---------------------------------------------------------------------------
# N3: ``try: ... finally: pass`` (a try whose finally is empty once normalised)


def try_finally_pass(x):
    try:
        y = x * 2.0
    finally:
        pass
    return y * x


def try_finally_pass_in_loop_with_return(x, y):
    for k in range(3):
        try:
            y = y * x + 0.5
            if y > 4.0:
                return y * y
        finally:
            pass
    return y + x


def try_except_finally_pass(x):
    try:
        y = math.sin(x)
    except ValueError:
        y = x
    finally:
        pass
    return y * x


@pytest.mark.parametrize("x", [0.5, -1.3, 2.2])
def test_try_finally_pass(x):
    check_first_order(try_finally_pass, x)
    check_first_order(try_except_finally_pass, x)
    check_second_order(try_finally_pass, x)
    check_second_order(try_except_finally_pass, x)


@pytest.mark.parametrize("args", [(0.5, 1.0), (1.5, 2.0), (-0.7, 0.3), (1.2, 1.1)])
def test_try_finally_pass_with_early_return(args):
    check_first_order(try_finally_pass_in_loop_with_return, *args)
    check_second_order(try_finally_pass_in_loop_with_return, *args)


# ---------------------------------------------------------------------------
# N1: in place on a fresh local array that a loop's body makes anew before changing it


def fresh_each_iteration(A):
    v = 0.0
    for i in range(2):
        a = A * 1.0
        a -= 0.5
        v = v + float(np.sum(a))
    return v


def fresh_row_each_iteration(A):
    v = 0.0
    for row in A:
        a = row * row
        a *= row
        a -= 0.5
        v = v + np.sum(a * a)
    return v


def fresh_arrays_kept_in_a_list(A):
    kept = []
    for i in range(3):
        a = A * float(i + 1)
        a -= 0.5
        kept.append(a)
    return np.sum(kept[0] * kept[2]) + np.sum(kept[1])


def same_array_kept_in_a_list(A):
    kept = []
    a = A * 1.0
    for i in range(3):
        kept.append(a)
        a -= 0.5  # changes the array the list already holds: Python's list sees it
    return np.sum(kept[0] * kept[2])


def renewed_after_the_change(A):
    kept = []
    a = A * 1.0
    for i in range(3):
        kept.append(a)
        a -= 0.5  # the array of the previous iteration's renewal, which the list holds
        a = A * 2.0
    return np.sum(kept[0] * kept[2])


def fresh_each_iteration_nonlinear(x):
    v = 0.0
    for k in range(2):
        a = x * x * (k + 1.0)
        a *= x
        a -= 0.5
        v = v + np.sum(a * a)
    return v


def array_gradient_fd(f, A, eps=1e-6):
    out = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        up, down = A.copy(), A.copy()
        up[idx] += eps
        down[idx] -= eps
        out[idx] = (f(up) - f(down)) / (2 * eps)
    return out


def array_hessian(f):
    return dplus.jacobian(dplus.grad1(f))


ARRAYS = [
    np.array([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]]),
    np.array([[2.0, 0.7, -0.9], [-1.1, 0.6, 1.3]]),
    np.ones((2, 3)) * 1.5,
]


@BOTH_PATHS
@pytest.mark.parametrize(
    "f",
    [
        fresh_each_iteration,
        fresh_row_each_iteration,
        fresh_arrays_kept_in_a_list,
        fresh_each_iteration_nonlinear,
    ],
)
@pytest.mark.parametrize("A", ARRAYS, ids=["A0", "A1", "A2"])
def test_in_place_on_an_array_made_anew_each_iteration(f, A, general):
    with on_path(general):
        r = dplus.dplus(f)(A.copy())
        assert np.isclose(r.primal, f(A.copy()), rtol=1e-14)
        (g,) = dplus.grad(f)(A.copy())
    assert np.allclose(g, array_gradient_fd(f, A), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("x", [A[0] for A in ARRAYS], ids=["x0", "x1", "x2"])
def test_in_place_on_an_array_made_anew_each_iteration_second_order(x):
    f = fresh_each_iteration_nonlinear
    (H,) = array_hessian(f)(x.copy())
    fd = np.zeros((x.size, x.size))
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = 1e-4
        fd[:, i] = (array_gradient_fd(f, x + e) - array_gradient_fd(f, x - e)) / 2e-4
    assert np.allclose(H, fd, rtol=1e-4, atol=1e-3)


@BOTH_PATHS
@pytest.mark.parametrize("f", [same_array_kept_in_a_list, renewed_after_the_change])
@pytest.mark.parametrize("A", ARRAYS, ids=["A0", "A1", "A2"])
def test_in_place_on_an_array_a_list_still_holds(f, A, general):
    # (refused before in-place writes were followed: the list sees the change, as in Python)
    with on_path(general):
        r = dplus.dplus(f)(A.copy())
        assert np.isclose(r.primal, f(A.copy()), rtol=1e-14)
        (g,) = dplus.grad(f)(A.copy())
    assert np.allclose(g, array_gradient_fd(f, A), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# dplus.jacobian and dplus.hessian called inside differentiated code (were a raw AttributeError)

X3 = np.array([0.5, -1.0, 2.0])


def jacobian_of_closure_over_array(s):
    (J,) = dplus.jacobian(lambda a: a * a * s)(X3)
    return np.sum(J)


def jacobian_of_closure_nonlinear(s):
    (J,) = dplus.jacobian(lambda a: np.sin(a * s) * a)(X3)
    return np.sum(J * J)


def jacobian_of_closure_two_numbers(s, t):
    g = dplus.jacobian(lambda a, b: a * a * s + math.sin(b * t))(0.7, 0.3)
    return g[0] * g[1]


def jacobian_of_closure_tuple_result(s):
    J = dplus.jacobian(lambda a: (a * s, a * a * s))(1.5)
    return J[0][0] + J[1][0] * s


def cube_sum(a):
    return np.sum(a * a * a)


def hessian_of_module_function(s):
    ((H,),) = dplus.hessian(cube_sum)(X3 * s)
    return np.sum(H * H)


def product_cubed(a, b):
    return a * a * b * a


def jacobian_of_module_function(s):
    J = dplus.jacobian(product_cubed)(s, 2.0 * s)
    return J[0] + J[1] * s


def fd_scalar_gradient(F, args, eps=1e-6):
    out = []
    for i in range(len(args)):
        up, down = list(args), list(args)
        up[i] += eps
        down[i] -= eps
        out.append(float(F(*up) - F(*down)) / (2 * eps))
    return out


@BOTH_PATHS
@pytest.mark.parametrize(
    "F,n",
    [
        (jacobian_of_closure_over_array, 1),
        (jacobian_of_closure_nonlinear, 1),
        (jacobian_of_closure_two_numbers, 2),
        (jacobian_of_closure_tuple_result, 1),
        (hessian_of_module_function, 1),
        (jacobian_of_module_function, 1),
    ],
)
@pytest.mark.parametrize("point", [(1.2, -0.4), (-0.7, 0.9), (0.3, 1.6)])
def test_jacobian_and_hessian_inside_differentiated_code(F, n, point, general):
    args = point[:n]
    with on_path(general):
        g = dplus.grad(F)(*args)
    assert np.allclose([float(v) for v in g], fd_scalar_gradient(F, args), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("s", [0.7, -1.1, 1.9])
def test_jacobian_inside_differentiated_code_second_order(s):
    # J = (3 a^2 b, a^3) at a = s, b = 2 s: F(s) = 6 s^3 + s^4, F'' = 36 s + 12 s^2
    (((h,),),) = (dplus.hessian(jacobian_of_module_function)(s),)
    assert math.isclose(h, 36.0 * s + 12.0 * s * s, rel_tol=1e-9)
    fd = (
        dplus.grad1(jacobian_of_module_function)(s + 1e-5)
        - dplus.grad1(jacobian_of_module_function)(s - 1e-5)
    ) / 2e-5
    assert math.isclose(h, fd, rel_tol=1e-5)


def test_hessian_of_a_function_of_one_array():
    for x in (X3, np.array([[0.3, -0.2], [1.1, 0.4]])):
        ((H,),) = dplus.hessian(cube_sum)(x)
        assert H.shape == x.shape + x.shape
        assert np.allclose(H.reshape(x.size, x.size), np.diag(6 * x.ravel()))


def test_jacobian_of_a_closure_inside_refuses_at_second_order():
    with pytest.raises(dplus.DplusError, match="defined inside the function being differentiated"):
        dplus.hessian(jacobian_of_closure_two_numbers)(0.8, -0.4)


# ---------------------------------------------------------------------------
# C1: the fuzz checker's float32 differences crossed a kink the gradient does not see

KINK_NEAR_ZERO = """
import numpy as np

def f(A4):
    a10 = np.where(A4 > 0, A4, 0.5) * A4
    return float(np.sum(a10[a10 > 0]))
"""

PLANTED_FLOAT32_BUG = """
import numpy as np
import dplus

def planted_cube(a):
    return a * a * a

@dplus.register_backprop(planted_cube)
def _planted_cube_backprop(a):
    return lambda A, Abox: ((), 2.0 * a * a * A)    # wrong on purpose: 3 a**2

def f(A4):
    return float(np.sum(planted_cube(A4) + A4))
"""


def fuzz_program(source, *args):
    from tests.fuzz.generator import Program

    return Program(source=source, args=args, features=frozenset({"numpy", "float32_arrays"}))


def test_checker_does_not_report_a_float32_kink_crossing():
    from tests.fuzz.checker import Checker

    A = np.array([-0.001565, 0.7, -0.3], dtype=np.float32)
    outcome = Checker().check(fuzz_program(KINK_NEAR_ZERO, A))
    assert outcome.status == "ok", (outcome.kind, outcome.detail)
    assert outcome.partials == 3


def test_checker_still_catches_a_wrong_float32_gradient():
    from tests.fuzz.checker import Checker

    A = np.array([0.4, -1.3, 0.9], dtype=np.float32)
    outcome = Checker().check(fuzz_program(PLANTED_FLOAT32_BUG, A))
    assert outcome.status == "wrong" and outcome.kind == "gradient", (outcome.status, outcome.kind)


# ---------------------------------------------------------------------------
# F7: map / filter / zip / enumerate / reversed are Python's lazy iterators where the program
# could tell (values read when Python reads them), with sensitivities routed back


def map_reads_rebound_variable(x1, x2, x):
    xs = [x1, x2]
    for a in map(lambda u: u * x, xs):
        x = a
    return x


def map_over_tuple_reads_rebound_variable(x1, x2, x):
    for a in map(lambda u: u * x + u, (x1, x2)):
        x = a * x
    return x


def map_with_list_written_in_loop(x1, x2, x):
    xs = [x1, x2, x1 * x2]
    total = 0.0
    for a in map(lambda u: u * u, xs):
        xs[-1] = a * x
        total = total + a
    return total + xs[-1]


def filter_reads_rebound_variable(x1, x2, x3, x):
    out = 0.0
    for a in filter(lambda u: u > x, [x1, x2, x3]):
        x = a
        out = out + a * x
    return out


def map_kept_then_list_changed(x1, x2, x):
    xs = [x1, x2]
    it = map(lambda u: u * x, xs)
    xs[1] = x1 * 5.0
    return sum(it)


def map_kept_then_variable_rebound(x1, x2, x):
    it = map(lambda u: u * x, (x1, x2))
    x = 2.0 * x
    a = next(it)
    return a * x + sum(it)


def zip_kept_then_list_grown(x1, x2, x):
    xs = [x1, x2]
    z = zip(xs, xs)
    xs.append(x)
    s = 0.0
    for a, b in z:
        s = s + a * b
    return s


def enumerate_kept_then_next_then_loop(x1, x2, x3):
    xs = [x1, x2, x3]
    it = enumerate(xs)
    i0, first = next(it)
    xs[2] = first * x2
    s = first
    for i, v in it:
        s = s + v * (i + 1.0)
    return s


def reversed_kept_then_written(x1, x2, x3):
    xs = [x1, x2, x3]
    r = reversed(xs)
    xs[0] = x2 * x3
    return sum(v * v for v in r)


LAZY_CASES = [
    (map_reads_rebound_variable, 2),
    (map_over_tuple_reads_rebound_variable, 2),
    (map_with_list_written_in_loop, 2),
    (filter_reads_rebound_variable, 3),
    (map_kept_then_list_changed, 2),
    (map_kept_then_variable_rebound, 2),
    (zip_kept_then_list_grown, 2),
    (enumerate_kept_then_next_then_loop, 3),
    (reversed_kept_then_written, 3),
]
LAZY_POINTS = [(2.0, 3.0, 0.5, 1.5), (-0.7, 1.3, 0.9, 0.2), (1.1, -0.4, 1.7, -0.6)]


@pytest.mark.parametrize("f,n", LAZY_CASES, ids=[f.__name__ for f, _ in LAZY_CASES])
@pytest.mark.parametrize("point", LAZY_POINTS, ids=["p0", "p1", "p2"])
def test_lazy_builtins_compute_what_python_computes(f, n, point):
    args = point[: n + 1] if f.__code__.co_argcount == n + 1 else point[:n]
    check_first_order(f, *args)


def test_lazy_builtins_second_order_refuses():
    with pytest.raises(dplus.DplusError) as info:
        dplus.hessian(map_kept_then_variable_rebound)(2.0, 3.0, 0.5)
    assert "LiveIteration" not in str(info.value) and "Seq" not in str(info.value)


@pytest.mark.parametrize("f", [map_reads_rebound_variable, filter_reads_rebound_variable])
def test_loops_over_map_and_filter_second_order(f):
    # (refused until stop 39: now run as Python runs them, each call as an item is taken)
    args = (2.0, 3.0, 0.5, 1.5)[: f.__code__.co_argcount]
    check_second_order(f, *args)


def accumulator_read_by_numpy_in_loop(A):
    acc = A * 0.0
    v = 0.0
    for k in range(3):
        acc += np.tanh(A * (k + 1.0))
        acc *= 0.5
        v = v + float(np.sum(acc * acc)) + np.mean(acc)
    return v


def accumulator_kept_in_a_list(A):
    acc = A * 0.0
    kept = []
    for k in range(3):
        acc += A
        kept.append(acc)  # the list holds the array the next op= changes: Python's list sees it
    return np.sum(kept[0])


@BOTH_PATHS
@pytest.mark.parametrize("A", ARRAYS, ids=["A0", "A1", "A2"])
def test_in_place_on_an_accumulator_read_by_numpy_functions(A, general):
    f = accumulator_read_by_numpy_in_loop
    with on_path(general):
        r = dplus.dplus(f)(A.copy())
        assert np.isclose(r.primal, f(A.copy()), rtol=1e-14)
        (g,) = dplus.grad(f)(A.copy())
    assert np.allclose(g, array_gradient_fd(f, A), rtol=1e-6, atol=1e-6)


@BOTH_PATHS
@pytest.mark.parametrize("A", ARRAYS, ids=["A0", "A1", "A2"])
def test_in_place_on_an_accumulator_a_list_holds(A, general):
    f = accumulator_kept_in_a_list
    with on_path(general):
        r = dplus.dplus(f)(A.copy())
        assert np.isclose(r.primal, f(A.copy()), rtol=1e-14)
        (g,) = dplus.grad(f)(A.copy())
    assert np.allclose(g, array_gradient_fd(f, A), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# S1 (fuzz seed 940054 at second order): a list concatenated from another list, read in a
# `while` loop by a computed index. Second order raised SensitivityError "cannot add a list
# of 3 and a list of length 1": the first-order plus-function rebuilt in its
# differentiable-again form (higher.transform_of_plus._differentiable_again) took its
# closure cells from the first-order function before the second compilation's helpers, and
# the two compilations name their helpers independently: the second's ``_dp_add2`` (Python's
# ``+``) was bound to the first's ``_dp_add2`` (linear ``add`` of sensitivities). Third
# order then gave wrong numbers without a word for list ``+``/``*``/``+=``/``*=``: their
# backprops read the map of box sensitivities through a helper they called, which loses a
# term when differentiated a second time (primitives.operator_sequences; see FINDINGS).


def _concatenated_list_read_in_loop(x1):
    xs2 = [(x1 * x1), (x1 - x1), x1]
    v3 = x1
    xs4 = xs2 + [(x1) ** 2.0]
    k6 = 0
    while k6 < 3:
        k6 += 1
        v7 = xs4[2 % len(xs4)] * 2.0  # noqa: F841 (read, not used: as the fuzzer wrote it)
    return float(x1 + xs2[len(xs2) // 2] + v3 + sum(xs4))


def _concatenated_cubic_read_in_loop(x):
    xs = [x * x * x, math.sin(x), x]
    ys = xs + [x * x]
    s = 0.0
    k = 0
    while k < 4:
        s = s + ys[(k * 3) % len(ys)] * ys[(k + 1) % len(ys)]
        k += 1
    return s + xs[len(xs) // 2] * sum(ys)


def _concatenations_of_two(x, y):
    xs = [x * y, math.sin(x), y * y * x]
    ys = xs * 2
    zs = xs[1:] + [y] + xs[:1]
    t = (x, y) + (x * x,)
    s = 0.0
    for k in range(len(zs)):
        s = s + zs[(k * 2) % len(zs)] * ys[(k + 1) % len(ys)]
    return s + t[len(t) - 1] * sum(ys)


def _in_place_concatenation(x, y):
    xs = [x * x, y]
    xs += [x * y]
    xs *= 2
    ws = [y] + xs
    ws += xs[2:]
    s = 0.0
    for i in range(len(ws)):
        s = s + ws[(i * 5) % len(ws)] * ws[i]
    return s * x


def _repeated_display(x, y):
    ys = [x * y] * 3
    zs = 2 * [x, y * y]
    return ys[2] * ys[0] * zs[3] + zs[0] * ys[1]


ONE_ARGUMENT = [_concatenated_list_read_in_loop, _concatenated_cubic_read_in_loop]
TWO_ARGUMENTS = [_concatenations_of_two, _in_place_concatenation, _repeated_display]
POINTS = [(-1.560507, 0.4), (0.7, -1.2), (2.1, 0.9), (-0.35, 1.7)]


def _third_order_fd(f, point, eps=1e-5):
    """d/dx_k of the Hessian, by central differences of dplus's (checked) Hessian."""
    H = lambda *a: np.array(dplus.hessian(f)(*a), dtype=float)
    out = []
    for k in range(len(point)):
        up, down = list(point), list(point)
        up[k] += eps
        down[k] -= eps
        out.append((H(*up) - H(*down)) / (2 * eps))
    return np.stack(out, axis=-1)


@pytest.mark.parametrize("f", ONE_ARGUMENT + TWO_ARGUMENTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("point", POINTS, ids=["p0", "p1", "p2", "p3"])
def test_concatenated_list_read_in_loop_first_and_second_order(f, point):
    args = point[: f.__code__.co_argcount]
    check_first_order(f, *args)
    check_second_order(f, *args)


@pytest.mark.parametrize("f", ONE_ARGUMENT + TWO_ARGUMENTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("point", POINTS[1:3], ids=["p1", "p2"])
def test_concatenated_list_read_in_loop_third_order(f, point):
    args = point[: f.__code__.co_argcount]
    T = np.array(dplus.jacobian(dplus.hessian(f))(*args), dtype=float).reshape(
        len(args), len(args), len(args)
    )
    assert np.allclose(T, _third_order_fd(f, args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x", [0.7, -1.3, 2.2])
def test_third_derivative_through_list_concatenation_and_repetition(x):
    # each a polynomial whose third derivative is known exactly
    d3 = lambda f: dplus.grad1(dplus.grad1(dplus.grad1(f)))

    def concat_empty(x):
        ys = [x * x] + []
        return ys[0] * x  # x**3

    def concat_square(x):
        ys = [x * x] + []
        return ys[0] * ys[0]  # x**4

    def repeat_once(x):
        ys = [x * x] * 1
        return ys[0] * x  # x**3

    def in_place_concat(x):
        xs = [x * x]
        xs += [x]
        return xs[0] * xs[1]  # x**3

    def in_place_repeat(x):
        xs = [x * x]
        xs *= 2
        return xs[0] * xs[1] * x  # x**5

    assert math.isclose(d3(concat_empty)(x), 6.0, rel_tol=1e-12)
    assert math.isclose(d3(concat_square)(x), 24.0 * x, rel_tol=1e-12)
    assert math.isclose(d3(repeat_once)(x), 6.0, rel_tol=1e-12)
    assert math.isclose(d3(in_place_concat)(x), 6.0, rel_tol=1e-12)
    assert math.isclose(d3(in_place_repeat)(x), 60.0 * x * x, rel_tol=1e-12)


# ---------------------------------------------------------------------------
# N6 (seed 9100144, second order): `A ** 2` of a constant array beside `math.pow` of an
# argument raised a raw TypeError from the float pow rule chosen for the array; fixed on
# main since (the operator router picks the rule by operand), kept here as a regression test


def _constant_array_power_beside_math_pow(x1, x2, x3):
    A4 = np.arange(9.0).reshape(3, 3)
    A7 = A4**2
    v10 = math.pow(x1, 2)
    return x1 * v10 + x2 * x3 + float(np.max(A7, axis=1)[-1]) * x3 * x3


@pytest.mark.parametrize("args", [(0.43, 0.62, 0.39), (-1.1, 0.7, 2.0), (1.9, -0.3, -0.8)])
def test_constant_array_power_beside_math_pow(args):
    check_first_order(_constant_array_power_beside_math_pow, *args)
    check_second_order(_constant_array_power_beside_math_pow, *args)


# ---------------------------------------------------------------------------
# K3 (fixed on branch trust5): a call with keyword arguments at the third order.
# ``dict(a=...)``, ``types.SimpleNamespace(a=...)`` and ``sorted(xs, key=...)`` raised a raw
# AttributeError/TypeError at order 3: the tower called a transform with keywords through
# ``runtime.calls.call``, whose rule takes the transform for a plus-function standing for
# itself. More programs, and the mechanisms: tests/test_keyword_calls_third_order.py.


def _keyword_built_dict(x):
    return dict(a=x * x)["a"] * x


@pytest.mark.parametrize("x", [0.7, -1.3, 2.0])
def test_a_keyword_call_at_the_first_and_second_order(x):
    g1 = dplus.grad1(_keyword_built_dict)
    g2 = dplus.grad1(g1)
    assert g1(x) == pytest.approx(3 * x * x)
    assert g2(x) == pytest.approx(6 * x)


def test_a_keyword_call_at_the_third_order():
    g3 = dplus.grad1(dplus.grad1(dplus.grad1(_keyword_built_dict)))
    assert g3(0.7) == pytest.approx(6.0)
