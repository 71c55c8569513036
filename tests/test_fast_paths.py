"""The performance paths give the general path's results.

Generated code has type-guarded fast variants (float arithmetic inlined, loops over
lists and zips reversed by index, boundaries folding lists of numbers in one pass).
Every test here differentiates the same function twice, once as usual and once
transformed inside ``general_paths_only()``, and compares both with finite
differences or closed forms; and values that must fail a guard (objects with
arithmetic written in Python) must still be differentiated through their methods.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, check_fd, close

import dplus
from dplus.transform.transformer import general_paths_only

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)


# --------------------------------------------------------------------------
# values that must not take the float path: arithmetic written in Python


class Scaled:
    """A number-like object whose product is defined in Python (and so differentiated)."""

    def __init__(self, a):
        self.a = a

    def __mul__(self, other):
        return self.a * (other.a if isinstance(other, Scaled) else other) * 2.0

    def __rmul__(self, other):
        return self.a * other * 2.0


def product_through_copy(x, y):
    a = x
    return a * y


def product_through_unpack(p, y):
    x, _ = p
    return x * y


def product_after_arithmetic_then_unpack(p, y):
    t = y * 3.0
    x, _ = p
    return x * y + t


def dot(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s += x * y
    return s


@SETTINGS
@given(a=floats, y=floats)
def test_objects_reached_through_copies_and_unpacks_are_differentiated(a, y):
    # d(2 a y)/da = 2 y, d/dy = 2 a: the float path would see no sensitivity for ``a``
    g = dplus.grad(product_through_copy)(Scaled(a), y)
    close(g, ({"a": 2 * y}, 2 * a))
    g = dplus.grad(product_through_unpack)((Scaled(a), 1.0), y)
    close(g, (({"a": 2 * y}, 0.0), 2 * a))
    g = dplus.grad(product_after_arithmetic_then_unpack)((Scaled(a), 1.0), y)
    close(g, (({"a": 2 * y}, 0.0), 2 * a + 3.0))


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=6), data=st.data())
def test_loop_over_zip_of_objects(xs, data):
    ys = data.draw(st.lists(floats, min_size=len(xs), max_size=len(xs)))
    gx, gy = dplus.grad(dot)([Scaled(a) for a in xs], [Scaled(b) for b in ys])
    close(gx, [{"a": 2 * b} for b in ys])
    close(gy, [{"a": 2 * a} for a in xs])


@SETTINGS
@given(a=floats, y=floats)
def test_guarded_functions_agree_with_the_general_path(a, y):
    for f, args in [
        (product_through_copy, (a, y)),
        (product_through_unpack, ((a, 1.0), y)),
        (product_after_arithmetic_then_unpack, ((a, 2.0), y)),
    ]:
        fast, general = both_ways(f, *args)
        close(fast, general)


def test_general_paths_only_really_transforms_without_fast_paths():
    from dplus.transform.transformer import compile_function

    def f(x, y):
        return x * y + 1.0

    assert "NUM" in compile_function(f).source
    with general_paths_only():
        assert "NUM" not in compile_function(f).source
    assert "NUM" in compile_function(f).source


# --------------------------------------------------------------------------
# loops: element sensitivities handed back all at once, or per iteration when
# the body may write into the list it iterates


def loop_over_list(xs, c):
    s = 0.0
    for x in xs:
        s = s + x * x * c
    return s


def loop_over_tuple(t, c):
    s = 0.0
    for x in t:
        s = s * 0.5 + x * c
    return s


def loop_with_break(xs, c):
    s = 0.0
    for x in xs:
        if x > 1.5:  # on the inputs only: no kink for finite differences to trip on
            break
        s = s + x * x + c
    return s


def loop_over_enumerate(xs, c):
    s = 0.0
    for i, x in enumerate(xs):
        s = s + x * (i + c)
    return s


def loop_over_rows(m, v):
    total = 0.0
    for row in m:
        acc = 0.0
        for a, b in zip(row, v):
            acc += a * b
        total += acc * acc
    return total


def loop_over_pairs(data, a):
    loss = 0.0
    for x, y in data:
        err = a * x - y
        loss += err * err
    return loss


def loop_writing_the_list_it_iterates(xs, c):
    s = 0.0
    xs = list(xs)
    for x in xs:
        s = s + x * c
        xs[-1] = x * 2.0  # later iterations read what earlier ones wrote
    return s + xs[-1]


def loop_appending_to_another_list(xs, c):
    out = []
    for x in xs:
        out.append(x * c)
    s = 0.0
    for y in out:
        s = s + y * y
    return s


def loop_reading_twice(xs, c):
    s = 0.0
    for x in xs:
        s = s + x * c
    for x in xs:
        s = s + x * x
    return s


LOOPS = [
    (loop_over_list, lambda xs, c: (list(xs), c)),
    (loop_over_tuple, lambda xs, c: (tuple(xs), c)),
    (loop_with_break, lambda xs, c: (list(xs), c)),
    (loop_over_enumerate, lambda xs, c: (list(xs), c)),
    (loop_over_rows, lambda xs, c: ([list(xs), [v * c for v in xs]], [c] * len(xs))),
    (loop_over_pairs, lambda xs, c: ([(x, x * 0.5 - 1.0) for x in xs], c)),
    (loop_writing_the_list_it_iterates, lambda xs, c: (list(xs), c)),
    (loop_appending_to_another_list, lambda xs, c: (list(xs), c)),
    (loop_reading_twice, lambda xs, c: (list(xs), c)),
]


@pytest.mark.parametrize("f,make", LOOPS, ids=[f.__name__ for f, _ in LOOPS])
@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=7), c=floats)
def test_loops_agree_with_the_general_path_and_finite_differences(f, make, xs, c):
    assume(all(abs(x - 1.5) > 1e-3 for x in xs))
    args = make(xs, c)
    fast, general = both_ways(f, *args)
    close(fast, general)
    check_fd(f, *args)


def test_loops_over_lists_hand_sensitivities_back_once():
    from dplus.transform.transformer import compile_function

    assert "_dp_route_all" in compile_function(loop_over_list).source
    rows = compile_function(loop_over_rows).source
    assert "_dp_route_columns" in rows  # its inner loop, over a zip
    # the body writes into a list: each element's sensitivity goes back in its iteration
    assert ".back(" in compile_function(loop_writing_the_list_it_iterates).source
    # a fresh list from zip may be written by nothing else; its items' sensitivities
    # are collected as columns
    assert "_dp_route_columns" in compile_function(dot).source


# --------------------------------------------------------------------------
# reads, calls and adjoints that start at zero


def reads_from_dict_and_list(p, xs):
    s = 0.0
    for k in range(len(xs)):
        s = s + p["a"] * xs[k] * xs[-1 - k] + p["b"] * xs[k]
    return s + p["a"] * p["b"]


def constant_before_the_loop_read_inside(x, n):
    c = x * 2.0  # read in every iteration: its adjoint accumulates over them
    s = 0.0
    for _ in range(n):
        t = c * s + x
        s = t * 0.5 + c
    return s


def temps_read_in_later_statements(x, y):
    a = x * y
    b = a + 1.0
    if b > -1e9:
        c = b * b
    else:
        c = b
    d = c * a
    while d > 10.0:
        d = d * 0.5
    return d + a


def parameter_named_like_a_builtin(xs, abs):
    s = 0.0
    for x in xs:
        s = s + abs(x) * x
    return s


@dplus.define_dplus
def sq(v):
    return v * v


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=6), a=floats, b=floats)
def test_reads_and_accumulations(xs, a, b):
    args = ({"a": a, "b": b}, list(xs))
    fast, general = both_ways(reads_from_dict_and_list, *args)
    close(fast, general)
    check_fd(reads_from_dict_and_list, *args)


@SETTINGS
@given(x=floats, n=st.integers(0, 5), y=floats)
def test_adjoints_zero_on_entry_only_where_they_are(x, n, y):
    fast, general = both_ways(constant_before_the_loop_read_inside, x, n)
    close(fast, general)
    check_fd(constant_before_the_loop_read_inside, x, n)
    assume(abs(x * y * 0.5) > 1e-3)
    fast, general = both_ways(temps_read_in_later_statements, x, y)
    close(fast, general)


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=6))
def test_shadowed_builtins_are_differentiated(xs):
    from _shadowing import len_shadowed

    (g,) = dplus.grad(len_shadowed)(list(xs))
    close(g, [2 * x for x in xs])
    g = dplus.grad(parameter_named_like_a_builtin)(list(xs), sq)
    close(g[0], [3 * x * x for x in xs], tol=1e-7)


# --------------------------------------------------------------------------
# list and tuple displays built natively


def displays(x, y):
    p = [x * y, x + 1.0]
    t = (p[0], y, p)  # a tuple holding a list
    p.append(x * x)
    p[1] = p[1] * y
    q, r = (t[0] * 2.0, t[2][2])
    return q + r + p[1] + t[1] * sum(p)


def nested_displays(x, y):
    rows = [[x, y], [y * x, 3.0]]
    pairs = [(a, b * 2.0) for a, b in rows]
    return pairs[0][0] * pairs[1][1] + rows[1][0] * x


@SETTINGS
@given(x=floats, y=floats)
def test_displays_agree_with_the_general_path(x, y):
    for f in (displays, nested_displays):
        fast, general = both_ways(f, x, y)
        close(fast, general)
        check_fd(f, x, y)


# --------------------------------------------------------------------------
# where a batched loop's element sensitivities go, for every kind of iterable


def loop_over_set(s, c):
    total = 0.0
    for x in s:
        total = total + x * c
    return total


def loop_over_generator(xs, c):
    total = 0.0
    for x in (v for v in xs):
        total = total + x * c
    return total


def loop_over_tuple_with_break(t, c):
    total = 0.0
    for x in t:
        if x > 1.5:
            break
        total = total + x * x * c
    return total


def loop_over_array(a, c):
    total = 0.0
    for x in a:
        total = total + x * x * c
    return total


def test_element_sensitivity_with_nowhere_to_go_is_an_error_on_both_paths():
    from dplus import NonDifferentiableError

    with pytest.raises(NonDifferentiableError, match="Iterate over a list or a tuple instead"):
        dplus.grad(loop_over_set)({1.0, 2.0}, 2.0)
    with general_paths_only(), pytest.raises(NonDifferentiableError, match="set"):
        dplus.grad(loop_over_set)({1.0, 2.0}, 2.0)


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=7), c=floats)
def test_a_generator_expression_passes_sensitivity_through(xs, c):
    fast, general = both_ways(loop_over_generator, xs, c)
    close(fast, general)
    close(fast, ([c] * len(xs), sum(xs)))
    check_fd(loop_over_generator, xs, c)


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=7), c=floats)
def test_tuples_and_arrays(xs, c):
    assume(all(abs(x - 1.5) > 1e-3 for x in xs))
    fast, general = both_ways(loop_over_tuple_with_break, tuple(xs), c)
    close(fast, general)
    check_fd(loop_over_tuple_with_break, tuple(xs), c)
    np = pytest.importorskip("numpy")
    a = np.array(xs)
    g = dplus.grad(loop_over_array)(a, c)
    np.testing.assert_allclose(g[0], 2 * a * c, rtol=1e-12, atol=1e-12)
    assert math.isclose(g[1], float((a * a).sum()), rel_tol=1e-12, abs_tol=1e-12)


# --------------------------------------------------------------------------
# loops over zip and enumerate: the item is a tuple, its reverse assigns the parts' tuple


def zip_item_used_twice(xs, ys):
    total = 0.0
    for pair in zip(xs, ys):
        x, y = pair
        total = total + x * y + pair[0] * 0.5
    return total


def enumerate_weights(xs):
    total = 0.0
    for i, x in enumerate(xs):
        total = total + (i + 1) * x * x
    return total


def zip_of_rows(rows, v):
    total = 0.0
    for row, w in zip(rows, v):
        a, b = row
        total = total + a * b * w
    return total


def zip_with_break(xs, ys):
    total = 0.0
    for x, y in zip(xs, ys):
        if x > 1.0:
            break
        total = total + math.sin(x) * y
    return total


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=6), data=st.data())
def test_zip_and_enumerate_loops_agree_with_the_general_path(xs, data):
    ys = data.draw(st.lists(floats, min_size=len(xs), max_size=len(xs)))
    assume(all(abs(x - 1.0) > 1e-3 for x in xs))
    for f, args in (
        (zip_item_used_twice, (xs, ys)),
        (enumerate_weights, (xs,)),
        (zip_with_break, (xs, ys)),
        (zip_of_rows, ([[x, y] for x, y in zip(xs, ys)], ys)),
        (zip_of_rows, ([(x, y) for x, y in zip(xs, ys)], ys)),
    ):
        fast, general = both_ways(f, *args)
        close(fast, general)
        check_fd(f, *args)
    g = dplus.grad(enumerate_weights)(xs)[0]
    close(g, [2.0 * (i + 1) * x for i, x in enumerate(xs)])


# --------------------------------------------------------------------------
# sensitivities added inline for floats, by accumulate for everything else


def returns_a_pair(x, y):
    a = x * y
    b = math.sin(x)
    return a, b


def uses_pair(x, y):
    a, b = returns_a_pair(x, y)
    return a + 3.0 * b


def mixed_display(x, n, xs):
    # an int, a float and a list in one display; the list's elements get sensitivity too
    parts = [n, x * 2.0, xs]
    return parts[1] * parts[0] + parts[2][0] * x


def list_reads_twice(xs, c):
    # two contributions to the same list's entry: the second adds to the first
    a = xs[0] * c
    b = xs[0] * xs[1]
    return a + b + sum(xs)


@SETTINGS
@given(x=floats, y=floats, xs=st.lists(floats, min_size=2, max_size=5))
def test_inline_float_accumulation_agrees_with_the_general_path(x, y, xs):
    dplus.define_dplus(returns_a_pair)
    for f, args in ((uses_pair, (x, y)), (mixed_display, (x, 3, xs)), (list_reads_twice, (xs, y))):
        fast, general = both_ways(f, *args)
        close(fast, general)
        check_fd(f, *args)
    g = dplus.grad(list_reads_twice)(xs, y)[0]
    close(g, [y + xs[1] + 1.0, xs[0] + 1.0] + [1.0] * (len(xs) - 2))


def test_a_list_holding_ints_gets_float_sensitivities_and_ints_keep_int_zeros():
    def f(xs):
        return xs[0] * 2.0

    assert dplus.grad(f)([1, 2.5, 3]) == ([2.0, 0.0, 0],)
    with general_paths_only():
        assert dplus.grad(f)([1, 2.5, 3]) == ([2.0, 0.0, 0],)


# --------------------------------------------------------------------------
# one set-up per gradient: the collector stays paused from the forward pass to the
# record's release, and is restored after (also after an error)


def _gc_probe(x):
    return 2.0 * x


_seen_gc_state: list = []


@dplus.register_backprop(_gc_probe)
def _(x):
    import gc

    _seen_gc_state.append(("made", gc.isenabled()))

    def backprop(A, Abox):
        _seen_gc_state.append(("reverse", gc.isenabled()))
        return ((), 2.0 * A)

    return backprop


def uses_gc_probe(x):
    return _gc_probe(x) * x


def raises_midway(x):
    y = x * 2.0
    return y / 0.0


def test_grad_pauses_the_collector_across_both_passes_and_restores_it():
    import gc

    assert gc.isenabled()
    _seen_gc_state.clear()
    assert dplus.grad(uses_gc_probe)(3.0) == (12.0,)
    assert _seen_gc_state == [("made", False), ("reverse", False)]
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        dplus.grad(raises_midway)(1.0)
    assert gc.isenabled()
    # nested: grad of a function that takes a gradient, and a second derivative
    assert dplus.grad1(dplus.grad1(lambda x: x * x * x))(2.0) == 12.0
    assert gc.isenabled()


def test_a_list_entry_holding_none_takes_float_sensitivities_again():
    # a rule may answer None for "no sensitivity"; a list's entry holding it must still
    # take a later list of float sensitivities
    from dplus.runtime.boxes import BoxSensitivities
    from dplus.runtime.fold import fold, snapshot
    from dplus.runtime.handover import handover

    xs = [1.0, 2.0, 3.0]
    snap = snapshot(xs)
    Abox = BoxSensitivities()
    Abox[xs] = [None, 1.0, dplus.gen_zero]
    handover(Abox, xs, [0.5, 0.5, 0.5])
    assert fold(snap, dplus.gen_zero, Abox) == [0.5, 1.5, 0.5]
    handover(Abox, xs, (1.0, 1.0, 1.0))
    assert fold(snap, dplus.gen_zero, Abox) == [1.5, 2.5, 1.5]


# --------------------------------------------------------------------------
# grad at the outermost level with numbers only: no snapshots, no boundary fold


def _explicit_one(f, *args):
    """The general gradient steps: an explicit sensitivity is not the default object."""
    return dplus.grad(f, sensitivity=float("1.0"))(*args)


def builds_lists_from_numbers(x, n, y):
    xs = [x * i for i in range(n)]
    xs.append(y)
    return sum(xs) * y


def returns_an_int(x, k):
    return k * 3


@SETTINGS
@given(floats, st.integers(0, 4), floats)
def test_numbers_only_grad_agrees_with_the_general_steps(x, n, y):
    for f, args in [
        (builds_lists_from_numbers, (x, n, y)),
        (returns_an_int, (x, n)),
        (lambda a, b: a * b, (x, y)),
        (lambda a, b: a * b, (n, y)),
    ]:
        fast = dplus.grad(f)(*args)
        general = _explicit_one(f, *args)
        assert [type(v) for v in fast] == [type(v) for v in general], (f, fast, general)
        close(list(fast), list(general))
    h = 1e-6
    fd = (builds_lists_from_numbers(x + h, n, y) - builds_lists_from_numbers(x - h, n, y)) / (2 * h)
    assert math.isclose(
        dplus.grad(builds_lists_from_numbers)(x, n, y)[0], fd, rel_tol=1e-5, abs_tol=1e-5
    )


def test_numbers_only_grad_of_a_non_number_result_is_the_same_error():
    from dplus import SensitivityError

    with pytest.raises(
        SensitivityError, match="grad needs a number as the result, but the result is list"
    ):
        dplus.grad(lambda x: [x, x])(1.0)
    with pytest.raises(
        SensitivityError, match="grad needs a number as the result, but the result is list"
    ):
        dplus.grad(lambda x: [x, x])([1.0])


# --------------------------------------------------------------------------
# numbers read from the module: their adjoints are not computed, results unchanged

RATE = 0.25
OFFSET = 1.5


def uses_module_numbers(x, xs):
    s = OFFSET * x
    for v in xs:
        s = s * RATE + v * x - OFFSET
    return s


def test_module_numbers_agree_with_the_general_path_and_finite_differences():
    for x, xs in [(0.3, [1.0, -2.0, 0.5]), (-1.2, [0.25] * 7), (2.0, [])]:
        fast, general = both_ways(uses_module_numbers, x, xs)
        close(fast, general)
        h = 1e-6
        fd = (uses_module_numbers(x + h, xs) - uses_module_numbers(x - h, xs)) / (2 * h)
        assert math.isclose(fast[0], fd, rel_tol=1e-6, abs_tol=1e-6)
    # the fast reverse computes no adjoint for RATE or OFFSET (the general one still does)
    from dplus.transform.transformer import generated_source

    lines = [ln.strip() for ln in generated_source(uses_module_numbers).splitlines()]
    for name in ("RATE", "OFFSET"):
        updates = [
            ln for ln in lines if f"_A_{name}_" in ln.split(" = ")[0] and not ln.endswith("= _dp_Z")
        ]
        assert updates and all(
            "_dp_accumulate(" in ln or "_dp_replay_segment(" in ln for ln in updates
        ), updates


# --------------------------------------------------------------------------
# unpacking a list: the parts' sensitivities go straight to the list's entry


def unpacks_lists(xs, rows, k):
    a, b = xs  # a list of numbers, also read by index below
    c = xs[0] * a
    (p, q), r = rows  # a list holding a list and a number
    u, v = p  # that inner list, unpacked again
    total = a * b + c * k + u * v * r + q[0]
    for w, z in [xs, [k, a]]:  # a loop unpacking lists made here
        total = total + w * z
    return total


@SETTINGS
@given(floats, floats, floats, floats, floats)
def test_list_unpacking_agrees_with_the_general_path_and_finite_differences(x0, x1, y0, y1, r):
    xs, rows, k = [x0, x1], [[[y0, y1], [y1]], r], 2
    fast, general = both_ways(unpacks_lists, xs, rows, k)
    close(fast, general)
    assert xs == [x0, x1] and rows == [[[y0, y1], [y1]], r]
    h = 1e-6
    for j in range(2):
        up = [x0, x1]
        dn = [x0, x1]
        up[j] += h
        dn[j] -= h
        fd = (unpacks_lists(up, rows, k) - unpacks_lists(dn, rows, k)) / (2 * h)
        assert math.isclose(fast[0][j], fd, rel_tol=1e-5, abs_tol=1e-5)
    fd_r = (unpacks_lists(xs, [rows[0], r + h], k) - unpacks_lists(xs, [rows[0], r - h], k)) / (
        2 * h
    )
    assert math.isclose(fast[1][1], fd_r, rel_tol=1e-5, abs_tol=1e-5)
    fd_k = (unpacks_lists(xs, rows, k + h) - unpacks_lists(xs, rows, k - h)) / (2 * h)
    assert math.isclose(fast[2], fd_k, rel_tol=1e-5, abs_tol=1e-5)


# --------------------------------------------------------------------------
# loops whose body is one fast segment: a fast prefix with no per-iteration record, then
# the general loop from the first iteration whose guard fails


def prefix_column(xs, c):
    s = 0.0
    for v in xs:
        s = s * 0.5 + v * c
    return s


def prefix_items_and_column(xs, ys, c):
    s = 0.0
    for a, b in zip(xs, ys):
        t = a * b
        s = s * c + t * a
    return s


def prefix_target_unused(x, n):
    for _ in range(n):
        x = x * 0.5 + math.cos(x)
    return x


def prefix_over_generator(xs, c):
    s = 0.0
    for v in (w * c for w in xs):
        s = s + v * v
    return s


def prefix_enumerate(xs, c):
    s = 0.0
    for i, v in enumerate(xs):
        s = s + v * i * c
    return s


def prefix_name_target_over_zip(xs, ys):
    s = 0.0
    for pair in zip(xs, ys):
        a, b = pair
        s = s + a * b
    return s


def _with_objects(xs, at):
    """``xs`` with the elements at positions ``at`` made number-like objects (guards fail)."""
    return [Scaled(v) if i in at else v for i, v in enumerate(xs)]


def _value(v):
    return 2.0 * v.a if isinstance(v, Scaled) else v


def _sens(v, s):
    return {"a": 2.0 * s} if isinstance(v, Scaled) else s


@SETTINGS
@given(xs=st.lists(floats, min_size=0, max_size=7), c=floats, data=st.data())
def test_fast_prefix_hands_over_to_the_general_loop_where_a_guard_fails(xs, c, data):
    at = set(data.draw(st.lists(st.integers(0, max(len(xs) - 1, 0)), max_size=3))) if xs else set()
    vs = _with_objects(xs, at)
    n = len(vs)
    g_xs, g_c = dplus.grad(prefix_column)(vs, c)
    close(g_xs, [_sens(v, c * 0.5 ** (n - 1 - i)) for i, v in enumerate(vs)])
    close(g_c, sum(_value(v) * 0.5 ** (n - 1 - i) for i, v in enumerate(vs)))
    fast, general = both_ways(prefix_column, vs, c)
    close(fast, general)
    ys = data.draw(st.lists(floats, min_size=len(xs), max_size=len(xs)))
    ws = _with_objects(ys, at)
    fast, general = both_ways(prefix_items_and_column, list(xs), ws, c)
    close(fast, general)
    fast, general = both_ways(prefix_name_target_over_zip, list(xs), ws)
    close(fast, general)


PREFIX_LOOPS = [
    (prefix_column, lambda xs, c: (list(xs), c)),
    (prefix_column, lambda xs, c: (tuple(xs), c)),
    (prefix_column, lambda xs, c: ([round(x) for x in xs], c)),  # ints take the fast path too
    (prefix_items_and_column, lambda xs, c: (list(xs), [x * 0.5 - 1.0 for x in xs], c)),
    (prefix_target_unused, lambda xs, c: (c, len(xs))),
    (prefix_over_generator, lambda xs, c: (list(xs), c)),
    (prefix_enumerate, lambda xs, c: (list(xs), c)),
    (prefix_name_target_over_zip, lambda xs, c: (list(xs), [c - x for x in xs])),
]


@pytest.mark.parametrize(
    "f,make", PREFIX_LOOPS, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(PREFIX_LOOPS)]
)
@SETTINGS
@given(xs=st.lists(floats, min_size=0, max_size=7), c=floats)
def test_fast_prefix_loops_agree_with_the_general_path_and_finite_differences(f, make, xs, c):
    args = make(xs, c)
    before = repr(args)
    fast, general = both_ways(f, *args)
    close(fast, general)
    assert repr(args) == before
    if all(type(a) is not int or f is prefix_target_unused for a in args[:1]):
        check_fd(f, *args)


def test_fast_prefix_loops_are_what_runs():
    # guards against the tests above passing with the prefix never generated
    from dplus.transform.transformer import generated_source

    assert "_dp_prefix_reversed(" in generated_source(prefix_items_and_column)
    assert "_dp_prefix_reversed(" in generated_source(prefix_name_target_over_zip)
    column = generated_source(prefix_column)
    assert "_pending" in column and "_dp_prefix_reversed(" not in column and ".append(v)" in column
    assert "_invariant" in column  # c: recorded once, not in every row of the column
    assert ".append((" in generated_source(prefix_items_and_column)
    assert "_pending" in generated_source(prefix_target_unused)
    with general_paths_only():
        from dplus.transform.transformer import compile_function  # noqa: F401

        assert "_pending" not in generated_source(prefix_column)


# --------------------------------------------------------------------------
# a loop variable read by two segments: its adjoint is gen_zero where each iteration's
# reverse starts, and the first addition in a segment tests for that


def reads_a_loop_variable_twice(xs, ys, c):
    s = 0.0
    for i in range(len(xs)):
        x = xs[i]  # a list read ends one segment ...
        s = s + x * c
        y = ys[i]  # ... and another starts: x is read on both sides
        s = s + x * y
    return s


@SETTINGS
@given(xs=st.lists(floats, min_size=0, max_size=6), c=floats, data=st.data())
def test_first_addition_to_an_adjoint_that_may_be_zero(xs, c, data):
    from dplus.transform.transformer import generated_source

    assert " is _dp_Z else " in generated_source(reads_a_loop_variable_twice)
    ys = data.draw(st.lists(floats, min_size=len(xs), max_size=len(xs)))
    fast, general = both_ways(reads_a_loop_variable_twice, list(xs), list(ys), c)
    close(fast, general)
    close(fast, ([c + y for y in ys], list(xs), sum(xs)))


def invariant_maybe_unbound(xs, flag):
    if flag:
        c = 2.0
    s = 0.0
    for v in xs:
        s = s * c + v * c  # c never changes in the loop: recorded once, after it
    return s


@SETTINGS
@given(xs=st.lists(floats, min_size=0, max_size=6))
def test_loop_invariants_are_recorded_once_and_only_when_read(xs):
    assert "_invariant" in dplus.show(invariant_maybe_unbound)
    fast, general = both_ways(invariant_maybe_unbound, [], False)  # c unbound, as in the primal
    assert fast == general == ([], None)  # a bool's sensitivity is None
    fast, general = both_ways(invariant_maybe_unbound, list(xs), True)
    close(fast[0], general[0])
    assert fast[1] is general[1] is None
    n = len(xs)
    close(fast[0], [2.0 * 2.0 ** (n - 1 - i) for i in range(n)])


# --------------------------------------------------------------------------
# a body that is one float segment: grad runs forward and reverse in one function


def formula(x, y, z):
    a = math.sin(x) * y + x / (1.0 + y * y)
    b = math.exp(-z * z) * a - math.sqrt(1.0 + x * x)
    return a * b + z**3 - 2.0 * x * z


def ignores_y(x, y):
    return x * x * 3.0


def may_turn_complex(x, p):
    return x**p


@dplus.define_dplus
def square(x):
    return x * x


def not_one_segment(x, y):
    return square(x + y) * x  # an inlined call behind its guard: not one segment


def _fused(f):
    from dplus.transform.plus_functions import plus_function_for

    return getattr(plus_function_for(f), "__dplus_fused__", None)


def _fd(f, args, i, h=1e-6):
    lo, hi = list(args), list(args)
    lo[i] -= h
    hi[i] += h
    return (f(*hi) - f(*lo)) / (2 * h)


@SETTINGS
@given(floats, st.floats(0.1, 3.0), floats)
def test_one_segment_grad_agrees_with_the_general_path_and_finite_differences(x, y, z):
    assert _fused(formula) is not None and _fused(ignores_y) is not None
    fast, general = both_ways(formula, x, y, z)
    assert all(type(v) is float for v in fast)
    close(fast, general)
    explicit = dplus.grad(formula, sensitivity=float("1.0"))(
        x, y, z
    )  # the ProcResult way, fast segment
    close(fast, explicit)
    for i in range(3):
        assert math.isclose(fast[i], _fd(formula, (x, y, z), i), rel_tol=1e-5, abs_tol=1e-5)
    assert dplus.grad(ignores_y)(x, y) == (
        6.0 * x,
        0.0,
    )  # an unused float argument: 0.0, as on the general way


def test_one_segment_grad_falls_back_where_its_guard_or_result_is_not_floats():
    fused = _fused(may_turn_complex)
    assert fused is not None
    assert fused(-2.0, 0.5) is None  # a complex result: the general way answers
    assert dplus.grad(may_turn_complex)(-2.0, 0.5) == both_ways(may_turn_complex, -2.0, 0.5)[1]
    assert dplus.grad(may_turn_complex)(2.0, 3.0) == both_ways(may_turn_complex, 2.0, 3.0)[1]
    # ints (not floats) and objects skip it; the general way keeps their kinds
    fast, general = both_ways(formula, 1, 2, 0)
    assert fast == general
    assert (
        dplus.grad(product_through_copy)(Scaled(2.0), 3.0)
        == both_ways(product_through_copy, Scaled(2.0), 3.0)[1]
    )
    assert _fused(not_one_segment) is None and _fused(dot) is None
    fast, general = both_ways(not_one_segment, 0.3, 1.2)
    close(fast, general)
    with general_paths_only():
        assert _fused(formula) is None


def test_one_segment_grad_is_shown_and_is_not_used_when_differentiated_again():
    assert "def formula__grad(x, y, z):" in dplus.show(formula)
    d2 = dplus.grad(lambda x: dplus.grad(ignores_y)(x, 1.0)[0])(0.7)
    assert d2 == (6.0,)


# --------------------------------------------------------------------------
# a fast loop over zip or enumerate collects its items' sensitivities as columns


def zip_three(xs, ys, zs):
    s = 0.0
    for x, y, z in zip(xs, ys, zs):
        s = s + x * y - z * x
    return s


def zip_second_unused(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s = s + x * x
    return s


def enumerate_index_unused(xs, c):
    s = 0.0
    for i, x in enumerate(xs):
        s = s * c + x
    return s


@SETTINGS
@given(
    xs=st.lists(floats, min_size=0, max_size=6), extra=st.integers(0, 3), c=floats, data=st.data()
)
def test_item_columns_agree_with_the_general_path_and_exact_values(xs, extra, c, data):
    for f in (zip_three, zip_second_unused, enumerate_index_unused):
        assert "_dp_route_columns(" in dplus.show(f)
    n = len(xs)
    ys = data.draw(
        st.lists(floats, min_size=n + extra, max_size=n + extra)
    )  # longer: zip stops at xs
    zs = data.draw(st.lists(floats, min_size=n, max_size=n))
    fast, general = both_ways(zip_three, list(xs), list(ys), list(zs))
    close(fast, general)
    close(fast, ([y - z for y, z in zip(ys, zs)], [*xs, *[0.0] * extra], [-x for x in xs]))
    fast, general = both_ways(zip_second_unused, list(xs), list(ys))
    close(fast, general)
    close(fast, ([2.0 * x for x in xs], [0.0] * len(ys)))
    fast, general = both_ways(enumerate_index_unused, list(xs), c)
    close(fast, general)
    close(fast[0], [c ** (n - 1 - i) for i in range(n)])
    # a guard failing part-way: the fast iterations' columns become rows again
    at = set(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=2))) if xs else set()
    fast, general = both_ways(zip_three, _with_objects(xs, at), list(ys), list(zs))
    close(fast, general)


# --------------------------------------------------------------------------
# list.append run natively; other objects' append methods by their rules


class Bag:
    def __init__(self):
        self.items = []

    @dplus.define_dplus  # (not registered, an unknown method mutating self.items would go unseen)
    def append(self, v):
        self.items.append(v * 2.0)


class MyList(list):
    pass


def appends(xs, c):
    out = []
    for x in xs:
        out.append(x * c)
        out.append(x)
    bag = Bag()
    bag.append(c)
    sub = MyList()
    sub.append(c * c)
    return sum(out) * out[0] + bag.items[0] + sub[0] if xs else bag.items[0] + sub[0]


@SETTINGS
@given(xs=st.lists(floats, min_size=0, max_size=5), c=floats)
def test_native_append_agrees_with_the_general_path_and_finite_differences(xs, c):
    assert "_dp_append_back(" in dplus.show(appends)
    fast, general = both_ways(appends, list(xs), c)
    close(fast, general)
    check_fd(appends, list(xs), c)


# --------------------------------------------------------------------------
# list writes run natively: the index is checked by the store itself


def write_at(xs, c, k):
    xs = list(xs)  # (both_ways passes the same list twice)
    xs[k] = c * xs[k]
    return xs[0] * xs[-1] + xs[1]


@SETTINGS
@given(xs=st.lists(floats, min_size=3, max_size=3), c=floats, k=st.integers(-6, 5))
def test_list_writes_agree_with_the_general_path_and_raise_out_of_range(xs, c, k):
    if -3 <= k < 3:
        fast, general = both_ways(write_at, list(xs), c, k)
        close(fast, general)
        check_fd(write_at, list(xs), c, k)
        return
    # (an index past either end once wrote another element instead of raising)
    with pytest.raises(IndexError):
        dplus.grad(write_at)(list(xs), c, k)
    with general_paths_only(), pytest.raises(IndexError):
        dplus.grad(write_at)(list(xs), c, k)


# --------------------------------------------------------------------------
# a list displayed only to be stored: one call in the reverse (store_display_back)


def store_displays(xs, c):
    rows = [[0.0, 0.0] for _ in xs]
    d = {}
    for i in range(len(xs)):
        rows[i] = [xs[i] * c, xs[i] + c]  # into a list
        d[i] = [c * c, xs[i]]  # into a dict: the rule's backprop gives the list's sensitivity
    s = 0.0
    for i in range(len(xs)):
        a, b = rows[i]
        p, q = d[i]
        s = s + a * b + p * q
    rows[0] = [s, c]  # stored, and its elements read only through the whole list
    return sum(rows[0]) + sum(rows[-1])


@SETTINGS
@given(xs=st.lists(floats, min_size=1, max_size=4), c=floats)
def test_stored_displays_agree_with_the_general_path_and_finite_differences(xs, c):
    assert "_dp_store_display_back(" in dplus.show(store_displays)
    fast, general = both_ways(store_displays, list(xs), c)
    close(fast, general)
    check_fd(store_displays, list(xs), c)


# --------------------------------------------------------------------------
# a list displayed and stored inside a fast segment (kind 'display' and 'store')


def step_rows(pos, vel, c, k):
    pos = [list(p) for p in pos]
    for i in range(len(pos)):
        x, y = pos[i]
        vx, vy = vel[i]
        pos[k] = [x + c * vx, y * c]  # (k: any index, also negative or out of range)
    return pos[0][0] * pos[-1][1] + pos[0][1]


def store_in_prefix_loop(xs, c):
    out = [[0.0, 0.0] for _ in xs]
    for i, a in enumerate(xs):
        out[i] = [a * c, a]  # sensitivities reach the rows only through Abox
    return out[0][0] * out[-1][1] + out[0][1] if xs else c


def store_of_mixed_elements(xs, t, c):
    out = [None, None]
    out[0] = [c * 2.0, t]  # t a tuple: the guard fails, the general way
    out[1] = [c, 0.0]
    return out[0][0] * out[1][0] + out[0][1][0]


@SETTINGS
@given(
    pos=st.lists(st.tuples(floats, floats), min_size=1, max_size=3),
    c=floats,
    k=st.integers(-4, 3),
    data=st.data(),
)
def test_stores_in_fast_segments_agree_with_the_general_path_and_finite_differences(
    pos, c, k, data
):
    pos = [list(p) for p in pos]
    vel = [
        list(v)
        for v in data.draw(
            st.lists(st.tuples(floats, floats), min_size=len(pos), max_size=len(pos))
        )
    ]
    src = dplus.show(step_rows)
    assert "_dp_store_display_numbers(" in src and "pos[k] = _" in src
    if -len(pos) <= k < len(pos):
        fast, general = both_ways(step_rows, pos, vel, c, k)
        close(fast, general)
        check_fd(step_rows, pos, vel, c, k)
    else:
        with pytest.raises(IndexError):
            dplus.grad(step_rows)(pos, vel, c, k)
    xs = [p[0] for p in pos]
    assert "_dp_store_display_numbers(" in dplus.show(store_in_prefix_loop)
    fast, general = both_ways(store_in_prefix_loop, list(xs), c)
    close(fast, general)
    check_fd(store_in_prefix_loop, list(xs), c)
    fast, general = both_ways(store_of_mixed_elements, list(xs), (c, 1.0), c)
    close(fast, general)
    # ints and a dict take the general way where a guard needs floats, lists and ints
    fast, general = both_ways(step_rows, [[1, 2]] * len(pos), vel, 2, 0)
    close(fast, general)


# --------------------------------------------------------------------------
# the general variant of an arithmetic segment: its reverse is a replayed program


small = st.floats(
    -1.5, 1.5, allow_nan=False, allow_infinity=False
)  # (finite differences stay accurate)


class Real(float):
    """A float of another type: every segment's float guard fails on it."""


def arithmetic_segments(x, y, xs):
    a = x * y + RATE
    b = -a
    x = x * b + math.sin(y)  # a definition that replaces an input
    c = x
    up = c > 0  # carries no sensitivity
    y = c * y - x / (1.0 + y * y)
    for v in xs:
        c = c * v + OFFSET * y
        y = math.cos(c) * 0.5 + (y if up else -y)
    return x * y + b + c


def test_general_variants_of_arithmetic_segments_replay_their_reverse():
    from dplus.transform.transformer import generated_source

    text = generated_source(arithmetic_segments)
    assert text.count("_dp_replay_segment(") >= 3, text


@SETTINGS
@given(small, small, st.lists(small, max_size=4), st.sampled_from([float, Real]))
def test_replayed_reverses_agree_with_the_general_path_and_finite_differences(x, y, xs, kind):
    assume(abs(x * -(x * y + RATE) + math.sin(y)) > 1e-3)  # (away from the branch on c > 0)
    args = (kind(x), kind(y), [kind(v) for v in xs])
    fast, general = both_ways(arithmetic_segments, *args)
    close(fast, general)
    h = 1e-6
    for i in (0, 1):
        plus = [x, y]
        minus = [x, y]
        plus[i] += h
        minus[i] -= h
        fd = (arithmetic_segments(*plus, xs) - arithmetic_segments(*minus, xs)) / (2 * h)
        assert math.isclose(fast[i], fd, rel_tol=1e-4, abs_tol=1e-5)
    for j in range(len(xs)):
        plus, minus = list(xs), list(xs)
        plus[j] += h
        minus[j] -= h
        fd = (arithmetic_segments(x, y, plus) - arithmetic_segments(x, y, minus)) / (2 * h)
        assert math.isclose(fast[2][j], fd, rel_tol=1e-4, abs_tol=1e-5)


def test_only_floats_is_exactly_every_element_a_float():
    from dplus.runtime.handover import only_floats

    assert only_floats([]) and only_floats(()) and only_floats([1.0, -0.0, float("nan")])
    assert only_floats((2.5,) * 1000)
    for xs in ([1.0, 2], [Real(1.0)], [1.0, True], [1.0, None], [[1.0]], [1.0, 1j], (0.5, "1.0")):
        assert not only_floats(xs), xs


# --------------------------------------------------------------------------
# x ** c for a whole constant c: the textbook rule, inline


def whole_powers(x, y):
    return x**2 + (x * y) ** 3 - y**1 + x**0 + (y + 3.0) ** -2 + x**2.0 * y**4


def test_whole_powers_read_as_the_textbook_rule():
    from dplus.transform.transformer import generated_source

    text = generated_source(whole_powers)
    assert "* (2 * x)" in text and "** 2" in text and "r.imag" not in text.split("else:")[0]


@SETTINGS
@given(small, small, st.sampled_from([float, int]))
def test_whole_powers_agree_with_the_general_path_and_finite_differences(x, y, kind):
    if kind is int:
        x, y = int(x * 2), int(y * 2)
    assume(abs(y + 3.0) > 0.1)
    fast, general = both_ways(whole_powers, x, y)
    close(fast, general)
    h = 1e-6
    fx = (whole_powers(x + h, y) - whole_powers(x - h, y)) / (2 * h)
    fy = (whole_powers(x, y + h) - whole_powers(x, y - h)) / (2 * h)
    assert math.isclose(fast[0], fx, rel_tol=1e-5, abs_tol=1e-5)
    assert math.isclose(fast[1], fy, rel_tol=1e-5, abs_tol=1e-5)
