"""Sets holding values that carry sensitivity, at the second order (and the third for a few):
Hessians against central differences of dplus's first-order gradient on random inputs, fast
paths against the general ones. Element order is Python's for the same run (the set's own
iteration order, as the plain call sees it). What stays refused at the second order
(``frozenset(...)``, ``list(s)``/``tuple(s)``) is a ``DplusError`` naming sets and the line.

Found by orders8: ``s.update([x * x]); v = s.pop()`` gave a wrong second derivative without an
error on main (rule code refused at the next order dropped the sensitivity of the list inside
its tuple result); ``s_update_list`` and ``s_pop`` check it."""

from __future__ import annotations

import inspect
import random
import re

import pytest
from path_helpers import check_first_order, check_second_order, close

import dplus
from dplus import grad1

_rng = random.Random(3620)
INPUTS = [(_rng.uniform(-2.0, 2.0), _rng.uniform(-2.0, 2.0)) for _ in range(3)]


def s_display_loop(x, y):
    s = {x * 1.0, 2.0, y * x}
    t = 0.0
    for v in s:
        t = t + v * v * y
    return t


def s_equal_elements(x, y):
    s = {x, x * 1.0, x + 0.0, y}  # equal values: Python keeps the first
    return sum(v * x * y for v in s)


def s_sum_min_max_sorted(x, y):
    s = {x * y, 2.0, y * y + 0.5}
    return sum(s) * x + min(s) * max(s) + sorted(s)[0] * y + sorted(s, reverse=True)[1]


def s_comprehension(x, y):
    s = {x * k for k in (1.0, 2.0, 3.0)}
    t = {v * y for v in s if v > -10.0}
    return sum(t) + sum(sorted(t)) * x


def s_add_loop(x, y):
    s = set()
    s.add(x * x)
    s.add(y * 3.0)
    s.add(x * x)  # already there
    return sum(v * y for v in s) + len(s) * x


def s_operators(x, y):
    s = {x * 1.5, 2.0}
    t = {y * y, 2.0}
    u = s | t
    w = s & t
    d = s - t
    return sum(u) * x + sum(w) * y + sum(d) * x * y


def s_membership(x, y):
    s = {x * x, y}
    k = 0.0
    if y in s:
        k = k + y * x
    if 3.0 in s:
        k = k + 100.0
    return k + sum(s) * (x * x in s)


def s_mixed_ints(x, y):
    s = {1, 2, x * y, 3}
    return sum(s) * x + sum(v * y for v in s)


def s_frozenset(x, y):
    s = frozenset({x * y, 2.0})
    return sum(s) * x + sum(v * v for v in s)


def s_to_list(x, y):
    s = {x * 2.0, y * y}
    l = sorted(list(s))
    t = tuple(sorted(s))
    return l[0] * x + t[-1] * y + sum(l)


def s_discard(x, y):
    s = {x * 2.0, y * y, 5.0}
    s.discard(5.0)
    s.remove(y * y)
    return sum(s) * y


def s_copy(x, y):
    s = {x * 2.0, y}
    c = s.copy()
    c.add(x * y)
    return sum(c) * x + sum(s)


def s_nested_loop(x, y):
    s = {x * 1.0, y * 2.0}
    t = 0.0
    for a in s:
        for b in s:
            t = t + a * b
    return t * x


def s_break(x, y):
    s = {x * x, y, 7.0}
    t = 0.0
    for v in sorted(s):
        t = t + v * x
        if t > 1.0:
            break
    return t


def s_max_key(x, y):
    s = {x * y, y * y, 1.0}
    return max(s) * min(s) + max(v for v in s) * x


def s_update_list(x, y):
    s = set()
    s.update([x * x, 1.5])
    return sum(s) * x


def s_pop(x, y):
    s = set()
    s.add(x * x)
    v = s.pop()
    return v * y


def s_ior(x, y):
    s = {x}
    s |= {x * y, 1.5}
    return sum(s) * x


def s_union_method(x, y):
    s = {x * 2.0}
    u = s.union([y * y, 3.0])
    return sum(u) * x


def s_any_all(x, y):
    s = {x * y, 2.0}
    return (any(v > 1.0 for v in s) + 1.0) * x * sum(s)


def s_iand_ixor_isub(x, y):
    s = {x * 1.0, 2.0, y * y}
    s &= {2.0, y * y}
    t = {x * 3.0, 2.0}
    t ^= {2.0, y}
    u = {x * y, 4.0}
    u -= {4.0}
    return sum(s) * x + sum(t) * y + sum(u)


def s_from_generator(x, y):
    s = set(v * x for v in (1.0, 2.0, 2.0))
    t = set([x * y, x * y, 3.0])
    return sum(s) * y + sum(t) * x


def s_of_tuples(x, y):
    s = {(x, 1.0), (y * x, 2.0)}
    t = 0.0
    for a, b in s:
        t = t + a * b * x
    return t


def s_built_in_loop(x, y):
    s = set()
    t = set()
    for k in range(4):
        s.add(x * k)
        if k % 2:
            t.add(y * k + x)
    return sum(v * y for v in s) + sum(w * w for w in t)


def s_methods_again(x, y):
    s = {x * 2.0, y}
    s.intersection_update({y, 7.0})
    u = {x, 1.0}.symmetric_difference({1.0, y * y})
    d = {x * x, y}.difference({y})
    return sum(s) * x + sum(u) * y + sum(d)


def s_reread_after_change(x, y):
    s = {x * 1.0}
    a = sum(s)
    s.add(y * 2.0)
    b = sum(s)
    s.discard(x * 1.0)
    c = sum(s)
    return a * b + c * x


def s_zero_elements(x, y):
    s = {x * 0.0, 0.0, -0.0, y}
    return sum(v * x for v in s) + sum(s) * y


SUPPORTED = [
    v
    for k, v in list(globals().items())
    if k.startswith("s_") and k not in ("s_frozenset", "s_to_list")
]


@pytest.mark.parametrize("f", SUPPORTED)
def test_first_order(f):
    for args in INPUTS:
        check_first_order(f, *args)


@pytest.mark.parametrize("f", SUPPORTED)
def test_second_order(f):
    for args in INPUTS:
        check_second_order(f, *args)


def third_display(x):
    s = {x * x, 2.0, x * 3.0}
    return sum(v * v for v in s) * x + min(s) * max(s)


def third_operators(x):
    s = {x * 1.5, 2.0}
    s |= {x * x, 2.0}
    return sum(sorted(s)) * x * x


def third_pop(x):
    s = {x * x}
    v = s.pop()
    return v * v * x


def third_len(x):
    s = {x * x, 2.0}
    t = s | {x}
    return len(t) * x * x * x


@pytest.mark.parametrize("one", [third_pop, third_len])
def test_third_order(one):
    second = grad1(grad1(one))
    third = grad1(second)
    for x in (-1.3, 0.4, 1.7):
        h = 1e-4
        close(third(x), (second(x + h) - second(x - h)) / (2 * h), tol=1e-5)


@pytest.mark.parametrize("one", [third_display, third_operators])
def test_loops_and_sums_over_sets_are_refused_at_the_third_order(one):
    grad1(grad1(one))(0.7)  # (second order: supported)
    with pytest.raises(dplus.DplusError, match="third order and beyond through .*sets?"):
        grad1(grad1(grad1(one)))(0.7)


def test_iteration_order_is_pythons():
    seen = []

    def f(x):
        s = {x * 3.0, x * 1.0, 2.0, x * x}
        order = [v for v in s]
        seen.append([float(v) for v in order])
        return sum(v * k for k, v in enumerate(order))

    f(1.7)
    plain = seen[-1]
    dplus.hessian(f)(1.7)
    assert seen[-1] == plain


def _lines_of(fn):
    lines, start = inspect.getsourcelines(fn)
    return range(start, start + len(lines))


@pytest.mark.parametrize("f", [s_frozenset, s_to_list])
def test_what_stays_refused_names_sets_and_the_line(f):
    dplus.grad(f)(0.7, 1.1)  # (first order: supported)
    with pytest.raises(dplus.DplusError) as info:
        dplus.hessian(f)(0.7, 1.1)
    msg = str(info.value)
    assert re.search("elements of sets", msg) and re.search("tuples", msg), msg
    # (the line of the use for frozenset; for list(s) the function's own line, for now)
    place = re.search(r", line (\d+), in (\w+)\)$", msg)
    assert place and place.group(2) == f.__name__ and int(place.group(1)) in _lines_of(f), msg
