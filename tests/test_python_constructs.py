"""The Python that numerical code uses (issue #28): sets, globals, standard-library
containers, definitions inside a differentiated function, generators, frame introspection.

Each construct is checked against central finite differences on several inputs, with the
fast paths and with the general path only (``path_helpers.check_first_order``); where the
construct allows, at second order too, and where it does not yet, the refusal is a
``DplusError`` naming it."""

from __future__ import annotations

import random

import pytest

import dplus
from dplus import grad
from dplus.transformer import general_paths_only

from path_helpers import check_first_order, check_second_order

INPUTS = [(1.3, 0.7), (2.1, -1.6), (-0.4, 3.2)]


# ---------------------------------------------------------------------------
# sets


def set_add_loop(x, y):
    s = set()
    for v in (x, y, x * y):
        s.add(v * v)
    total = 0.0
    for e in s:
        total += e
    return total * max(s)


def set_comprehension(x, y):
    s = {v * x for v in (1.0, 2.0, y)}
    a, b, c = sorted(s)
    return sum(s) + a * b * c + min(s)


def set_operators(x, y):
    s = {x, y}
    s |= {x * 3.0}
    u = s | {x * y}
    w = u - {y}
    both = s & {x}
    s.discard(y)
    return sum(w) * sum(both) + sum(s ^ {y * y}) + max(frozenset([x, y * 2.0]))


def set_methods(x, y):
    s = set()
    s.update([x, y], (x * y,))
    t = s.union({y * y}).difference([x])
    v = s.pop()
    return sum(t) * v + sum(s.copy())


def frozenset_iterated(x, y):
    s = frozenset((x, y, x + y))
    total = 0.0
    for e in s:
        total += e * e
    return total + min(s)


def set_unpacked(x, y):
    (a,) = {x * y}
    return a * x


class TestSets:
    @pytest.mark.parametrize("f", [set_add_loop, set_comprehension, set_operators, set_methods,
                                   frozenset_iterated, set_unpacked])
    @pytest.mark.parametrize("args", INPUTS)
    def test_first_order(self, f, args):
        check_first_order(f, *args)

    def test_integer_constants_carry_no_sensitivity(self):
        def f(x):
            s = {1, 2, 3}
            return sum(v * x for v in s)

        def g(x):
            s = {1, 2, True}
            t = 0.0
            for v in s:
                t += v * x * x
            return t

        for x in (0.5, -2.0, 3.0):
            check_first_order(f, x)
            check_first_order(g, x)
            check_second_order(g, x)

    def test_integer_results_carry_no_sensitivity(self):
        def f(x):
            return random.Random(0).randint(1, 5) * x * x

        for x in (0.5, -2.0):
            check_first_order(f, x)
            check_second_order(f, x)

    def test_element_goes_back_to_the_value_python_keeps(self):
        def f(xs):
            s = set(xs)
            s.add(xs[0] * 1.0)       # equal to an element: not added, gets nothing
            return sum(s) + max(s) * min(s)

        assert grad(f)([2.0, 5.0, 2.0]) == ([6.0, 3.0, 0.0],)
        with general_paths_only():
            assert grad(f)([2.0, 5.0, 2.0]) == ([6.0, 3.0, 0.0],)

    def test_set_from_outside_refused(self):
        with pytest.raises(dplus.NonDifferentiableError, match="set"):
            grad(lambda s, x: sum(s) * x)({1.0, 2.0}, 3.0)

    def test_second_order_refused_naming_sets(self):
        for f in (set_add_loop, set_operators, frozenset_iterated):
            with pytest.raises(dplus.NonDifferentiableError, match="sets"):
                dplus.hessian(f)(1.3, 0.7)


# ---------------------------------------------------------------------------
# module globals

nfev = 0
shared_value = None


def counts_evaluations(x, y):
    global nfev
    nfev += 1
    return x * x * y


def writes_and_reads_back(x, y):
    global shared_value
    shared_value = x * y

    def scaled():
        return shared_value * 2.0          # a nested function reads the same global

    z = shared_value + 1.0
    return scaled() * z + shared_value


class TestModuleGlobals:
    def test_the_write_happens_once_per_call(self):
        global nfev
        for run in (lambda: grad(counts_evaluations)(1.5, 2.0),
                    lambda: dplus.lift_dplus(counts_evaluations)(1.5, 2.0),
                    lambda: dplus.value_and_grad(counts_evaluations)(1.5, 2.0)):
            nfev = 0
            run()
            assert nfev == 1
            with general_paths_only():
                run()
            assert nfev == 2

    @pytest.mark.parametrize("args", INPUTS)
    def test_value_written_and_read_back_carries_its_sensitivity(self, args):
        check_first_order(writes_and_reads_back, *args)
        check_second_order(writes_and_reads_back, *args)
        check_first_order(counts_evaluations, *args)
        check_second_order(counts_evaluations, *args)

    def test_global_value_after_the_call_is_pythons(self):
        writes_and_reads_back(2.0, 3.0)
        plain = shared_value
        grad(writes_and_reads_back)(2.0, 3.0)
        assert shared_value == plain == 6.0

    def test_reads_as_python_reads_a_global(self):
        def undefined(x):
            global name_that_is_not_defined
            return x * name_that_is_not_defined

        def builtin(x):
            global len
            return x * len([1, 2])

        with pytest.raises(NameError, match="name_that_is_not_defined"):
            grad(undefined)(1.0)
        assert grad(builtin)(1.0) == (2.0,)
