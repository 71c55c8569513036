"""Issue #18's loop bugs: each program runs under ``grad`` exactly as in a plain call (result,
side effects, what the arguments hold afterwards), and its gradient matches central finite
differences, on the fast paths and on the general path, at first and second order."""

from __future__ import annotations

import copy

import pytest
from path_helpers import check_fd, close

import dplus
from dplus.transform.transformer import general_paths_only


def _leaves(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _leaves(x)
    elif isinstance(v, float):
        yield v


def _direction(args):
    """A fixed direction shaped like ``args`` (floats only), for second-order checks."""
    if isinstance(args, (list, tuple)):
        out = [_direction(a) for a in args]
        return tuple(out) if isinstance(args, tuple) else out
    return 0.7 if isinstance(args, float) else 0


def check_program(f, *args, second=True):
    """Primal, argument mutation, gradient against finite differences (fast and general
    paths), and second order through the directional derivative ``grad(f) . v``."""
    plain_args = copy.deepcopy(args)
    expected = f(*plain_args)
    for general in (False, True):
        a = copy.deepcopy(args)
        if general:
            with general_paths_only():
                r = dplus.dplus(f)(*a)
        else:
            r = dplus.dplus(f)(*a)
        assert r.primal == expected, (general, r.primal, expected)
        assert a == plain_args, (general, a, plain_args)
        a = copy.deepcopy(args)
        if general:
            with general_paths_only():
                dplus.grad(f)(*a)
        else:
            dplus.grad(f)(*a)
        assert a == plain_args, (general, a, plain_args)
    fast = dplus.grad(f)(*copy.deepcopy(args))
    with general_paths_only():
        slow = dplus.grad(f)(*copy.deepcopy(args))
    close(fast, slow)
    check_fd(f, *copy.deepcopy(args))
    with general_paths_only():
        check_fd(f, *copy.deepcopy(args))
    if second:
        v = _direction(args)

        def directional(*a):
            return dplus.dot(dplus.grad(f)(*a), v)

        check_fd(directional, *copy.deepcopy(args))
    return fast


# ---------------------------------------------------------------------------
# 3. an early return inside a loop with an else clause leaves the loop: the else does not run


def return_in_for_else(x):
    for i in range(3):
        if i == 1:
            return x * 2.0
    else:
        x = x * 3.0
    return x


def return_in_nested_if_for_else(x, log):
    for i in range(3):
        x = x * x + 0.5
        if i == 1:
            if x > 0.0:
                return x * 2.0
    else:
        log.append(1.0)
        x = x * 3.0
    return x


def return_in_while_else(x):
    i = 0
    while i < 3:
        i += 1
        if i == 2:
            return x * x
    else:
        x = x * 3.0
    return x + 1.0


def return_or_break_for_else(x, n):
    for i in range(4):
        x = x * 1.5
        if i == n:
            break
        if i == 2:
            return x * x
    else:
        x = x * 3.0
    return x - 1.0


def return_in_inner_loop_else(x):
    for j in range(2):
        for i in range(3):
            x = x + 0.25
            if x > 1.0:
                return x * 5.0
        else:
            x = x * 2.0
    else:
        x = x * 7.0
    return x


@pytest.mark.parametrize("x", [0.3, 1.7, -0.4])
def test_return_in_for_else(x):
    assert check_program(return_in_for_else, x) == (2.0,)


@pytest.mark.parametrize("x", [0.3, 1.2, -0.9])
def test_return_in_nested_if_for_else(x):
    check_program(return_in_nested_if_for_else, x, [])


@pytest.mark.parametrize("x", [0.3, 1.2, -0.9])
def test_return_in_while_else(x):
    check_program(return_in_while_else, x)


@pytest.mark.parametrize("x, n", [(0.3, 1), (1.2, 5), (-0.9, 0), (0.5, 3)])
def test_return_or_break_for_else(x, n):
    check_program(return_or_break_for_else, x, n)


@pytest.mark.parametrize("x", [0.1, -0.2, 0.9, -3.0])
def test_return_in_inner_loop_else(x):
    check_program(return_in_inner_loop_else, x)


# ---------------------------------------------------------------------------
# 1. the loop variable read after the loop carries the last element's sensitivity


def last_element_unused_in_body(xs, x):
    for e in xs:
        x = x + 1.0
    return e


def last_element_used_in_body(xs, x):
    for e in xs:
        x = x * e
    return e * x


def last_pair_of_zip(xs, ys, x):
    for a, b in zip(xs, ys):
        x = x * b
    return a * x


def last_of_enumerate(xs, x):
    for i, e in enumerate(xs):
        x = x * 2.0
    return e * x + i


def last_element_after_break(xs, x):
    for e in xs:
        x = x + 1.0
        if x > 2.0:
            break
    return e * x


def target_bound_before_an_empty_loop(xs, x):
    e = x * 3.0
    for e in xs:
        x = x + 1.0
    return e * x


def two_loops_same_target(xs, x):
    for e in xs:
        x = x + 1.0
    for e in xs[:1]:
        x = x * 1.5
    return e * x


@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [-0.5], [2.5, -1.25]])
def test_last_element_unused_in_body(xs):
    g = check_program(last_element_unused_in_body, xs, 1.0, second=False)
    assert g == ([0.0] * (len(xs) - 1) + [1.0], 0.0)
    check_program(last_element_unused_in_body, tuple(xs), 1.0)  # (second order: over a tuple)


@pytest.mark.parametrize(
    "f",
    [last_element_used_in_body, last_of_enumerate, last_element_after_break, two_loops_same_target],
)
@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [-0.5], [2.5, -1.25, 0.75, 1.5]])
def test_last_element_read_after_the_loop(f, xs):
    check_program(f, xs, 1.5, second=False)
    # (second order: over a tuple; enumerate and zip make lists, not differentiable twice yet)
    check_program(f, tuple(xs), 1.5, second=f is not last_of_enumerate)


@pytest.mark.parametrize(
    "xs, ys", [([1.0, 2.0, 3.0], [0.5, 0.25, 2.0]), ([-1.5], [2.0, 3.0]), ([0.5, 4.0], [1.5, -1.0])]
)
def test_last_pair_of_zip(xs, ys):
    check_program(last_pair_of_zip, xs, ys, 1.5, second=False)
    check_program(last_pair_of_zip, tuple(xs), tuple(ys), 1.5, second=False)


@pytest.mark.parametrize("xs", [[], [2.0], [1.0, -3.0]])
def test_target_bound_before_the_loop(xs):
    check_program(target_bound_before_an_empty_loop, xs, 1.5, second=False)
    check_program(target_bound_before_an_empty_loop, tuple(xs), 1.5)


# ---------------------------------------------------------------------------
# 2. a list read whole (a loop, a comprehension, a rule) and resized afterwards

import functools  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import operator  # noqa: E402
import statistics  # noqa: E402

WHOLE_READS = {
    "for": "s = 0.0\n    for v in xs:\n        s = s + v * v",
    "for_break": "s = 0.0\n    for v in xs:\n        s = s + v * v\n        if s > 10.0:\n            break",
    "generator": "s = sum(v * v for v in xs)",
    "comprehension": "s = [v * v for v in xs][1]",
    "enumerate": "s = 0.0\n    for i, v in enumerate(xs):\n        s = s + i * v * v",
    "reversed": "s = 0.0\n    for v in reversed(xs):\n        s = s * 0.5 + v",
    "zip_loop": "s = 0.0\n    for a, b in zip(xs, xs[1:]):\n        s = s + a * b",
    "zip_call": "s = sum(a * b for a, b in zip(xs, ys))",
    "map": "s = sum(map(operator.mul, xs, ys))",
    "sum": "s = sum(xs)",
    "list": "s = list(xs)[2] * 2.0",
    "tuple": "s = tuple(xs)[0] * tuple(xs)[2]",
    "sorted": "s = sorted(xs)[0] * 3.0",
    "max_min": "s = max(xs) + min(xs)",
    "unpack": "a, b, c = xs\n    s = a * b * c",
    "starred": "a, *rest = xs\n    s = a * rest[1]",
    "copy": "s = xs.copy()[1] * 2.0",
    "slices": "s = xs[:][0] * xs[1:][0]",
    "concatenation": "s = (xs + ys)[2] * 2.0",
    "fsum": "s = math.fsum(xs)",
    "fmean": "s = statistics.fmean(xs)",
    "reduce": "s = functools.reduce(operator.mul, xs)",
    "display": "s = [*xs, 1.0][1] * 2.0",
    "pairwise": "s = sum(a * b for a, b in itertools.pairwise(xs))",
}
RESIZES = {
    "pop": "xs.pop()",
    "pop_first": "xs.pop(0)",
    "del_first": "del xs[0]",
    "del_slice": "del xs[1:]",
    "append": "xs.append(s)",
    "insert": "xs.insert(0, 2.0)",
    "extend": "xs.extend([1.0, s])",
    "clear": "xs.clear()",
    "remove": "xs.remove(xs[1])",
    "iadd": "xs += [s]",
    "slice_grows": "xs[1:2] = [s, s, 1.0]",
}
SOME_RESIZES = ("pop", "del_first", "append", "slice_grows")


def _program(read: str, resize: str):
    import linecache

    src = (
        f"def f(xs, ys):\n    {WHOLE_READS[read]}\n    {RESIZES[resize]}\n"
        "    return s * (xs[0] if xs else 1.0) + len(xs)\n"
    )
    filename = f"<test_trust_loops {read} {resize}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {
        "math": math,
        "statistics": statistics,
        "itertools": itertools,
        "functools": functools,
        "operator": operator,
    }
    exec(compile(src, filename, "exec"), ns)
    return ns["f"]


@pytest.mark.parametrize("resize", SOME_RESIZES)
@pytest.mark.parametrize("read", sorted(WHOLE_READS))
def test_a_list_read_whole_then_resized(read, resize):
    # (one input each, alternating: the program set is large; lists are not differentiable twice yet)
    inputs = [([2.0, 4.0, 6.0], [1.5, -0.5, 2.5]), ([-1.25, 0.5, 3.0], [0.25, 2.0, -1.0])]
    xs, ys = inputs[(sorted(WHOLE_READS).index(read) + SOME_RESIZES.index(resize)) % 2]
    check_program(_program(read, resize), xs, ys, second=False)


@pytest.mark.parametrize("resize", sorted(set(RESIZES) - set(SOME_RESIZES)))
@pytest.mark.parametrize("read", ["for", "generator", "comprehension", "sum", "zip_call", "unpack"])
def test_every_resize_after_a_whole_read(read, resize):
    check_program(_program(read, resize), [2.0, 4.0, 6.0], [1.5, -0.5, 2.5], second=False)


def issue_pop_after_loop(xs):
    s = 0.0
    for v in xs:
        s = s + v * v
    xs.pop()
    return s


def issue_del_after_comprehension(xs):
    squares = [v * v for v in xs]
    del xs[0]
    return squares[0] + squares[2]


def rows_read_then_resized(rows):
    s = 0.0
    for r in rows:
        s = s + r[0] * r[1]
    t = list(rows)
    a, b = rows
    rows.pop()
    rows.append([s, 1.0])
    return s * t[1][0] + a[1] * b[0] * rows[1][0]


def test_the_issue_examples():
    assert check_program(issue_pop_after_loop, [2.0, 4.0, 6.0], second=False) == ([4.0, 8.0, 12.0],)
    check_program(issue_del_after_comprehension, [2.0, 4.0, 6.0], second=False)
    check_program(rows_read_then_resized, [[1.0, 2.0], [3.0, -4.0]], second=False)


def test_a_resized_list_of_containers_whose_elements_cannot_be_found_again_is_refused():
    from dplus.runtime.boxes import BoxSensitivities
    from dplus.runtime.handover import handover

    with pytest.raises(dplus.NonDifferentiableError, match="resized"):
        handover(BoxSensitivities(), [[1.0]], [[1.0], [2.0]])


# ---------------------------------------------------------------------------
# 4. zip / enumerate / reversed over lists the loop body writes into: iterated live, as in Python


def prefix_sum_in_place(xs):
    for i, v in enumerate(xs):
        if i > 0:
            xs[i] = xs[i - 1] + v
    return xs[0] * xs[1] + xs[2] * xs[2] + xs[-1]


def enumerate_from_one(xs):
    for i, v in enumerate(xs, 1):
        if i < len(xs):
            xs[i] = xs[i] * v
    return xs[-1] * xs[0]


def enumerate_start_keyword(xs, c):
    for k, v in enumerate(xs, start=2):
        xs[k % len(xs)] = v * c + xs[k % len(xs)]
    return sum(xs) * xs[1]


def reversed_accumulates_into_first(xs):
    for v in reversed(xs):
        xs[0] = xs[0] + v * v
    return xs[0] * xs[-1]


def reversed_then_shrinks(xs):
    s = 0.0
    for v in reversed(xs):
        s = s + v * v
        if len(xs) > 2:
            xs.pop()
    return s + xs[0]


def zip_writes_into_both(xs, ys):
    for a, b in zip(xs, ys):
        xs[1] = xs[1] * b
        ys[2] = a
    return xs[1] * ys[2]


def zip_list_and_tuple(xs, ts):
    for a, b in zip(xs, ts):
        xs[-1] = xs[-1] + a * b
    return xs[-1] * ts[0]


def zip_of_rows(rows, ws):
    for r, w in zip(rows, ws):
        rows[-1] = [r[0] * w, r[1] + w]
    return rows[-1][0] * rows[-1][1] + rows[0][0]


def zip_appends_while_iterating(xs, ys):
    for a, b in zip(xs, ys):
        if len(xs) < 5:
            xs.append(a * b)
    return xs[-1] * xs[3]


def enumerate_with_break(xs):
    for i, v in enumerate(xs):
        xs[-1 - i] = xs[-1 - i] * v
        if v > 5.0:
            break
    return xs[0] + xs[-1] * xs[1]


FOUR = [
    (prefix_sum_in_place, ([0.5, 1.0, 2.0],)),
    (prefix_sum_in_place, ([1.5, -2.0, 0.25, 3.0],)),
    (enumerate_from_one, ([0.5, 1.5, 2.0],)),
    (enumerate_from_one, ([-1.0, 2.0, 3.0, 0.5],)),
    (enumerate_start_keyword, ([0.5, 1.5, 2.0], 0.75)),
    (enumerate_start_keyword, ([-1.0, 2.0], 1.5)),
    (reversed_accumulates_into_first, ([0.5, 1.0, 2.0],)),
    (reversed_accumulates_into_first, ([1.5, -1.0],)),
    (reversed_then_shrinks, ([0.5, 1.0, 2.0, 3.0],)),
    (reversed_then_shrinks, ([2.5, -1.0, 1.5],)),
    (zip_writes_into_both, ([0.5, 1.0, 2.0], [1.5, 2.0, 3.0])),
    (zip_writes_into_both, ([1.5, -1.0, 0.5], [0.5, 2.0, -3.0])),
    (zip_list_and_tuple, ([0.5, 1.0, 2.0], (1.5, 2.0, 3.0))),
    (zip_list_and_tuple, ([2.0, -1.0], (0.5, 2.0, 4.0))),
    (zip_of_rows, ([[0.5, 1.0], [2.0, 3.0]], [1.5, -0.5])),
    (zip_appends_while_iterating, ([0.5, 1.0, 2.0], [1.5, 2.0, 3.0, 4.0, 5.0])),
    (enumerate_with_break, ([0.5, 1.0, 2.0],)),
    (enumerate_with_break, ([0.5, 6.0, 2.0, 1.5],)),
]


@pytest.mark.parametrize(
    "f, args", FOUR, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(FOUR)]
)
def test_live_iteration_over_lists_written_in_the_loop(f, args):
    check_program(f, *args, second=False)  # (lists are not differentiable twice yet)


def test_the_issue_prefix_sum():
    xs = [0.5, 1.0, 2.0]
    r = dplus.dplus(prefix_sum_in_place)(xs)
    assert xs == [0.5, 1.5, 3.5] and r.primal == prefix_sum_in_place([0.5, 1.0, 2.0])


# ---------------------------------------------------------------------------
# 5. reverse() and slice assignments in a loop: the argument ends as in a plain call


def reverse_and_slice_over_enumerate(xs):
    for i, v in enumerate(xs):
        xs.reverse()
        xs[1:3] = [v * 2.0, xs[1] + 1.0]
    return xs[0] + xs[1] * xs[2]


def reverse_and_slice_over_zip(xs, ys):
    for a, b in zip(xs, ys):
        xs.reverse()
        xs[1:3] = [a * b, xs[0]]
    return xs[0] + xs[1] * xs[2]


def reverse_and_slice_over_reversed(xs):
    for v in reversed(xs):
        xs.reverse()
        xs[0:2] = [v * 2.0, xs[1] + v]
    return xs[0] + xs[1] * xs[2]


def reverse_and_growing_slice_in_range(xs):
    for i in range(3):
        xs.reverse()
        xs[1:2] = [xs[0] * 1.5, xs[1] - 0.5]
    return xs[0] * xs[-1] + xs[2]


FIVE = [
    (reverse_and_slice_over_enumerate, ([0.5, 1.5, 2.0, 3.0],)),
    (reverse_and_slice_over_enumerate, ([-1.25, 0.75, 2.5, 1.0, 4.0],)),
    (reverse_and_slice_over_zip, ([0.5, 1.5, 2.0, 3.0], [1.0, 2.0, 3.0])),
    (reverse_and_slice_over_zip, ([2.5, -1.5, 0.25], [0.5, 1.5, -2.0, 1.0])),
    (reverse_and_slice_over_reversed, ([0.5, 1.5, 2.0, 3.0],)),
    (reverse_and_slice_over_reversed, ([1.75, -0.5, 2.25],)),
    (reverse_and_growing_slice_in_range, ([0.5, 1.5, 2.0, 3.0],)),
]


@pytest.mark.parametrize(
    "f, args", FIVE, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(FIVE)]
)
def test_reverse_and_slice_assignment_in_a_loop(f, args):
    check_program(f, *args, second=False)  # (lists are not differentiable twice yet)


# ---------------------------------------------------------------------------
# 6. iterating an iterator of a list: the elements next() and for take get their sensitivities


def first_then_rest(xs):
    it = iter(xs)
    a = next(it)
    s = a
    for v in it:
        s = s + v * a
    return s


def pairs_by_next(xs):
    it = iter(xs)
    s = 0.0
    for v in it:
        w = next(it, 1.0)
        s = s + v * w
    return s


def two_loops_one_iterator(xs, c):
    it = iter(xs)
    s = 0.0
    for v in it:
        s = s + v * c
        if s > 2.0:
            break
    for v in it:
        s = s * v
    return s + next(it, c)


SIX = [
    (first_then_rest, ([1.0, 2.0, 3.0],)),
    (first_then_rest, ([-0.5, 1.5],)),
    (pairs_by_next, ([1.0, 2.0, 3.0],)),
    (pairs_by_next, ([0.5, -2.0, 1.5, 2.5],)),
    (two_loops_one_iterator, ([1.0, 2.0, 3.0, 0.5], 1.5)),
    (two_loops_one_iterator, ([0.25, 0.5], 0.75)),
    (two_loops_one_iterator, ([3.0, 2.0, 0.5], 1.25)),
]


@pytest.mark.parametrize("f, args", SIX, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(SIX)])
def test_iterating_an_iterator_of_a_list(f, args):
    check_program(f, *args, second=False)  # (lists are not differentiable twice yet)


def test_next_of_an_iterator_of_a_tuple_with_sensitivity():
    # (refused before stop 37; iter() of a tuple: tests/test_iter_of_a_tuple.py)
    def f(x):
        it = iter((x, 2.0 * x))
        return next(it) * 3.0 + next(it) * x

    assert dplus.grad(f)(1.5) == (3.0 + 4.0 * 1.5,)


# (2, again) a list resized by the body of the loop that iterates it


def appends_while_iterating(xs):
    s = 0.0
    for v in xs:
        s = s + v * v
        if len(xs) < 5:
            xs.append(v * 2.0)
    return s


def pops_while_iterating(xs):
    s = 0.0
    for v in xs:
        s = s + v * v
        if len(xs) > 2:
            xs.pop()
    return s


def deletes_the_first_while_iterating(xs):
    s = 0.0
    for v in xs:
        s = s * 0.5 + v
        if len(xs) > 3:
            del xs[0]
    return s * xs[0]


def inserts_at_the_front_while_iterating(xs):
    s = 0.0
    for v in xs:
        s = s + v
        if len(xs) < 5:
            xs.insert(0, v * 3.0)
        if s > 100.0:
            break
    return s + xs[-1]


@pytest.mark.parametrize(
    "f",
    [
        appends_while_iterating,
        pops_while_iterating,
        deletes_the_first_while_iterating,
        inserts_at_the_front_while_iterating,
    ],
)
@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [0.5, -1.5, 2.5, 1.25]])
def test_a_list_resized_while_a_loop_iterates_it(f, xs):
    check_program(f, xs, second=False)


# ---------------------------------------------------------------------------
# 6. loops over sets: each element's sensitivity goes back to the value it was made from


def loop_over_set_display(a, b):
    s = 0.0
    for v in {a, b}:
        s = s + v * v
    return s


def loop_over_set_of_list(xs):
    s = 0.0
    for v in set(xs):
        s = s + v * v * xs[0]
    return s


def loop_over_set_then_grow(xs, c):
    s = 1.0
    for v in set(xs):
        s = s * (v + c)
    xs.append(c)
    return s


def loop_over_set_of_tuple(ts):
    s = 0.0
    for v in set(ts):
        s = s + v * v
    return s


SETS = [
    (loop_over_set_display, (1.0, 2.0)),
    (loop_over_set_display, (1.5, -0.5)),
    (loop_over_set_of_list, ([1.0, 2.0, 1.5],)),
    (loop_over_set_then_grow, ([0.5, 2.0, 0.75, 3.0], 1.5)),
    (loop_over_set_of_tuple, ((1.0, 2.5, -2.25),)),
]


@pytest.mark.parametrize(
    "f, args", SETS, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(SETS)]
)
def test_loop_over_a_set(f, args):
    check_program(f, *args, second=False)


def test_equal_values_in_a_set_the_first_gets_the_sensitivity():
    # (at equal values the function is discontinuous: the element is the first value, as in Python)
    assert dplus.grad(loop_over_set_display)(1.5, 1.5) == (3.0, 0.0)
    assert dplus.grad(loop_over_set_of_list)([1.0, 3.0, 1.0]) == ([2.0 + 10.0, 6.0, 0.0],)
    with general_paths_only():
        assert dplus.grad(loop_over_set_of_list)([1.0, 3.0, 1.0]) == ([2.0 + 10.0, 6.0, 0.0],)
