"""Generators differentiated again, read after their making (stop 38, issues #18, #20, #28).

Differentiated again (``hessian``, ``grad`` of ``grad``) a generator runs to completion where
it is made. That is Python's order exactly when nothing its body reads or does can be seen
differently between the making and each read. Before stop 38 the refusals named effects and
changes by name only, and each program of ``NOT_SEEN_BEFORE`` gave a silently wrong second
derivative (an alias changed, a library function changing a list, a method of the program's
class, a helper reading a variable bound again...). Now a generator read later must have a
body known to change nothing, and nothing the program runs after the making may change what
it reads; one read to its end where it is made runs there whatever its body does. Right
programs are checked against central differences at the first and second order, both paths.
"""

from __future__ import annotations

import heapq
import math
import operator
import re

import numpy as np
import pytest
from path_helpers import check_first_order, check_second_order

import dplus
from dplus.errors import UnsupportedSyntaxError

POINTS = [0.3, 1.1, -0.7]

# -- stop 38: what the static names did not see. A generator read after its making (kept, by
# ``next``, by a loop) runs there only when its body is known to change nothing (a call not
# known to be free of effects counts as one) and nothing the program runs after the making may
# change what it reads (an alias, a helper, a library function changing its argument, a
# method of the program's class). Each of these was a silently wrong second derivative.


class _Counter:
    def __init__(self):
        self.n = 0.0

    @dplus.define_dplus
    def step(self, v):
        self.n += 1.0
        return v

    @dplus.define_dplus
    def get(self):
        return self.n

    @dplus.define_dplus
    def scaled(self, v):
        return v * (self.n + 2.0)


def a_method_changing_its_object_in_the_body(x):
    o = _Counter()

    def gen():
        for k in range(3):
            yield o.step(x * k)

    g = gen()
    a = o.get()  # Python: 0.0
    return sum(g) * x + a * x * x


def a_method_changing_its_object_after_the_making(x):
    o = _Counter()

    def gen():
        for k in range(3):
            yield x * x * o.get()

    g = gen()
    o.step(1.0)
    return sum(g) * x


def an_alias_changed_after_the_making(x):
    xs = [x, 2.0]

    def gen():
        for v in xs:
            yield v * v

    g = gen()
    ys = xs
    ys.append(3.0 * x)
    return sum(g)


def an_alias_changed_after_a_kept_expression(x):
    xs = [x, 2.0]
    g = (v * v for v in xs)
    ys = xs
    ys[0] = 5.0 * x
    return sum(g)


def a_library_function_changing_the_list_after(x):
    xs = [x, 2.0]

    def gen():
        for v in xs:
            yield v * v

    g = gen()
    heapq.heappush(xs, 3.0 * x)
    return sum(g)


def a_library_function_changing_a_list_in_the_body(x):
    xs = [x, 2.0]

    def gen():
        operator.setitem(xs, 0, 5.0 * x)
        yield x * xs[1]

    g = gen()
    a = xs[0]  # Python: x
    return sum(g) * a


def an_array_copied_into_after(x):
    a = np.array([x, 2.0])

    def gen():
        for v in a:
            yield v * v

    g = gen()
    np.copyto(a, np.array([3.0 * x, x]))
    return float(sum(g))


def a_bound_method_held_in_a_variable(x):
    xs = [2.0, x]

    def gen():
        yield xs[0] * x * x

    g = gen()
    put_in_order = xs.sort
    put_in_order()
    return sum(g)


def a_helper_changing_the_list_after(x):
    xs = [x, 2.0]

    def grow(ys):
        ys.append(3.0 * x)

    g = (v * v for v in xs)
    grow(xs)
    return sum(g)


def a_list_held_in_a_list_changed_after(x):
    xs = [x, 2.0]
    box = [xs]

    def gen():
        for v in xs:
            yield v * v

    g = gen()
    box[0].append(3.0 * x)
    return sum(g)


def taken_in_part_then_changed(x):
    xs = [x, 2.0, 4.0]

    def gen():
        for v in xs:
            yield v * v

    g = gen()
    a = next(g)
    ys = xs
    ys[1] = 7.0 * x
    return a + sum(g)


def a_callable_given_to_the_generator(x):
    log = []

    def gen(note):
        for k in range(2):
            note(x * k)
            yield x * k

    g = gen(log.append)
    n = len(log)  # Python: 0
    return sum(g) * x + n * x


def a_module_list_changed_after(x):
    def gen():
        for k in range(2):
            yield x * x * _WEIGHTS[k]

    g = gen()
    _WEIGHTS[0] = _WEIGHTS[0] + 1.0
    try:
        return sum(g)
    finally:
        _WEIGHTS[0] -= 1.0


_WEIGHTS = [1.0, 2.0]


def a_helper_reading_a_variable_bound_again(x):
    a = x

    def scaled(v):
        return v * a

    def gen():
        for k in range(3):
            yield scaled(x * k)

    g = gen()
    a = 3.0 * x  # Python's generator, read below, calls scaled with this a
    return sum(g)


NOT_SEEN_BEFORE = [
    (a_method_changing_its_object_in_the_body, "calls o.step(), which writes 'self.n'"),
    (a_method_changing_its_object_after_the_making, "calls o.step(), which writes 'self.n'"),
    (an_alias_changed_after_the_making, "calls ys.append()"),
    (an_alias_changed_after_a_kept_expression, "writes 'ys[0]'"),
    (a_library_function_changing_the_list_after, "calls heapq.heappush()"),
    (a_library_function_changing_a_list_in_the_body, "calls operator.setitem()"),
    (an_array_copied_into_after, "calls np.copyto()"),
    (a_bound_method_held_in_a_variable, "calls put_in_order()"),
    (a_helper_changing_the_list_after, "calls grow(), which calls ys.append()"),
    (a_list_held_in_a_list_changed_after, "calls box[0].append()"),
    (taken_in_part_then_changed, "writes 'ys[1]'"),
    (a_callable_given_to_the_generator, "calls note()"),
    (a_module_list_changed_after, "writes '_WEIGHTS[0]'"),
    (a_helper_reading_a_variable_bound_again, "reads 'a', which"),
]


@pytest.mark.parametrize("f, what", NOT_SEEN_BEFORE, ids=[f.__name__ for f, _ in NOT_SEEN_BEFORE])
def test_what_may_change_a_generator_read_later_is_refused_by_name(f, what):
    plain = f(1.3)
    assert dplus.lift_dplus(f)(1.3).primal == pytest.approx(plain)
    assert dplus.grad1(f)(1.3) == pytest.approx((f(1.3 + 1e-6) - f(1.3 - 1e-6)) / 2e-6, rel=1e-5)
    with pytest.raises(UnsupportedSyntaxError) as info:
        dplus.hessian(f)(1.3)
    message = str(info.value)
    assert what in message, message
    assert "generator" in message and re.search(r"line \d+", message)


# -- what stays differentiated: read to the end where it is made, effects and all; read
# later, a body known to change nothing and a program changing only what no one else holds


def effects_read_at_once(x):
    log = []

    def gen(n):
        for k in range(n):
            log.append(x * k)
            yield math.sin(x * (k + 1))

    s = sum(gen(3)) + max(gen(2))
    pairs = [a * b for a, b in zip(gen(2), (1.0, 2.0))]
    return s * x + sum(log) * x + len(log) + sum(pairs)


def read_later_with_its_own_list_changed(x):
    o = _Counter()

    def gen(ys):
        for v in ys:
            yield o.scaled(np.tanh(v) * x)

    xs = [x, 2.0 * x, 0.5]
    it = gen(xs)
    acc = []
    first = next(it)
    for v in it:
        acc.append(v * first)
        acc[0] = acc[0] + 1.0
    return sum(acc) + first * len(acc)


def bound_again_between_readings_at_once(x):
    # (read to the end where each is made, the generator reads a as it is then: refused
    # before stop 38 as "may bind again")
    a = x

    def gen(n):
        for k in range(n):
            yield math.sin(a * k)

    s = sum(gen(3))
    a = 3.0 * x
    return s + sum(gen(2)) * a


def an_expression_read_by_a_function_that_only_reads(x):
    def first_and_rest(g):
        return next(g) * 2.0 + sum(g)

    xs = (x, 2.0, 3.0 * x)
    return first_and_rest(math.cos(v * x) for v in xs)


@pytest.mark.parametrize(
    "f",
    [
        effects_read_at_once,
        read_later_with_its_own_list_changed,
        an_expression_read_by_a_function_that_only_reads,
        bound_again_between_readings_at_once,
    ],
)
@pytest.mark.parametrize("x", POINTS)
def test_generators_the_program_cannot_see_run_early_are_differentiated(f, x):
    check_first_order(f, x)
    check_second_order(f, x)
