"""Builtins that call the program's own dunder methods (issues #18, #28).

``next(obj)`` runs the class's ``__next__``, ``round``/``math.floor``/``ceil``/``trunc`` its
``__round__``/``__floor__``/``__ceil__``/``__trunc__``: through their transforms (differentiated
from source, or refused by the policy by name), never as they are. A list or tuple key with
``__index__`` is converted once with ``operator.index`` where it is read, as Python does.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dplus
from dplus.errors import UnknownTransformError

POINTS = ((0.7, 1.3), (-1.1, 0.4), (2.3, -0.6))


def central_gradient(f, args, h=1e-5):
    out = []
    for i in range(len(args)):
        up, dn = list(args), list(args)
        up[i] += h
        dn[i] -= h
        out.append((f(*up) - f(*dn)) / (2 * h))
    return np.array(out)


def central_hessian(f, args, h=1e-4):
    rows = []
    for i in range(len(args)):
        up, dn = list(args), list(args)
        up[i] += h
        dn[i] -= h
        rows.append((central_gradient(f, up) - central_gradient(f, dn)) / (2 * h))
    return np.array(rows)


def check_both_orders(f, points=POINTS):
    for args in points:
        got = np.array(dplus.grad(f)(*args), dtype=float)
        assert np.allclose(got, central_gradient(f, args), rtol=1e-5, atol=1e-6), (f, args)
        got2 = np.array(dplus.hessian(f)(*args), dtype=float)
        assert np.allclose(got2, central_hessian(f, args), rtol=1e-4, atol=1e-4), (f, args)


# ---------------------------------------------------------------------------
# next(obj) with the program's own __next__ (issue #18)


class Box:
    def __init__(self, fn):
        self.fn = fn

    def __next__(self):
        return self.fn() * 2.0


class Counting:
    def __init__(self, x, stop):
        self.x, self.i, self.stop = x, 0, stop

    def __next__(self):
        self.i += 1
        if self.i > self.stop:
            raise StopIteration
        return self.x * self.i


def next_of_a_closure(x, y):
    def get():
        return x * x * y

    return next(Box(get)) + y


def next_with_default(x, y):
    it = Counting(x, 1)
    first = next(it, y)
    return first * next(it, y * y)  # (the second is the default)


def test_next_runs_the_programs_next_through_its_transform():
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_both_orders(next_of_a_closure)
        check_both_orders(next_with_default)


def test_next_of_a_closure_is_refused_by_name_under_the_default_policy():
    class Held(Box):  # (a class of its own: a transform made under another policy is kept)
        def __next__(self):
            return self.fn() * 2.0

    def f(x):
        def get():
            return x * x

        return next(Held(get))

    with pytest.raises(UnknownTransformError, match=r"Held\.__next__"):
        dplus.grad(f)(0.7)


def test_next_without_default_still_raises_stop_iteration():
    def exhausted(x):
        it = Counting(x, 0)
        return next(it)

    with dplus.current_unknown_transform(dplus.transform_from_source):
        with pytest.raises(StopIteration):
            dplus.grad(exhausted)(0.5)


# ---------------------------------------------------------------------------
# keys with __index__ (issue #28)


class Position:
    """An index whose comparisons are not with ints: dplus must never compare it."""

    calls = 0

    def __init__(self, v, at=2):
        self.v, self.at = v, at

    def __lt__(self, other):
        return self.v < other.v

    def __index__(self):
        Position.calls += 1
        return self.at


def read_list(a, b):
    xs = [a, b, a * b, 1.0]
    return xs[Position(a)] * b + xs[Position(a, -3)]


def read_tuple(a, b):
    xs = (a, b, a * b, 1.0)
    return xs[Position(a)] * b * xs[Position(b, -4)]


def write_and_delete(a, b):
    xs = [a, b, a * b, 1.0]
    xs[Position(a)] = a * a
    xs[Position(b, 0)] += b
    del xs[Position(a, 1)]
    return xs[1] * b + xs[0]


def pop_and_insert(a, b):
    xs = [a, b, a * b, 1.0]
    v = xs.pop(Position(a))
    xs.insert(Position(b, 1), v * a)
    return xs[1] * b + xs[-1] + xs.pop(Position(a, -1)) * a


def array_read(a, b):
    xs = np.array([a, b, a * b, 1.0])
    return xs[Position(a)] * b


@pytest.mark.parametrize("f", [read_list, read_tuple, write_and_delete, pop_and_insert, array_read])
def test_index_keys_are_converted_once_and_differentiated(f):
    check_both_orders(f)
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_both_orders(f, POINTS[:1])


def test_the_key_is_converted_as_often_as_python_converts_it():
    for f in (read_list, write_and_delete, pop_and_insert):
        Position.calls = 0
        f(0.7, 1.3)
        plain = Position.calls
        Position.calls = 0
        dplus.grad(f)(0.7, 1.3)
        assert Position.calls == plain, f


# ---------------------------------------------------------------------------
# round and math.floor/ceil/trunc with the program's own method: not a step


class Scaled:
    def __init__(self, x):
        self.x = x

    def __round__(self, ndigits=None):
        return self.x * 3.0

    def __floor__(self):
        return self.x * 2.0

    def __ceil__(self):
        return self.x * self.x

    def __trunc__(self):
        return -self.x


def own_roundings(a, b):
    s = round(Scaled(a)) * b + round(Scaled(b), 2) + round(Scaled(a), ndigits=1)
    return s + math.floor(Scaled(a)) * b + math.ceil(Scaled(b)) * a + math.trunc(Scaled(a * b))


def number_roundings(a, b):
    return round(a * 10.0) * b + round(b, 1) * a + math.floor(a) + math.ceil(b) * a + math.trunc(b)


def test_a_classs_own_rounding_is_differentiated_not_a_step():
    class Rounded:
        def __init__(self, x):
            self.x = x

        def __round__(self, ndigits=None):
            return self.x * 3.0

    with pytest.raises(UnknownTransformError, match=r"Rounded\.__round__"):
        dplus.grad(lambda a: round(Rounded(a)))(0.7)
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_both_orders(own_roundings)


def test_rounding_numbers_stays_a_step():
    check_both_orders(number_roundings, ((0.73, 1.31), (-1.12, 0.44)))


# ---------------------------------------------------------------------------
# //, divmod, <<, >>, &, |, ^, ~: steps for numbers, not for a class's own smooth method


class Smooth:
    def __init__(self, x):
        self.x = x

    def __floordiv__(self, o):
        return self.x * o

    def __rfloordiv__(self, o):
        return self.x * o * 2.0

    def __ifloordiv__(self, o):
        return self.x * o * 3.0

    def __divmod__(self, o):
        return (self.x * o, self.x)

    def __lshift__(self, o):
        return self.x * o

    def __rshift__(self, o):
        return self.x / o

    def __and__(self, o):
        return self.x * o * o

    def __ror__(self, o):
        return self.x - o

    def __xor__(self, o):
        return self.x * self.x * o

    def __invert__(self):
        return self.x * 5.0


def smooth_operators(a, b):
    s = (Smooth(a) // b) * b + b // Smooth(a) + divmod(Smooth(b), a)[0]
    s = s + (Smooth(a) << b) + (Smooth(b) >> a) + (Smooth(a) & b) + (b | Smooth(a))
    t = Smooth(a)
    t //= b
    return s + (Smooth(b) ^ a) + ~Smooth(a) * b + t


def number_steps(a, b):
    n = int(a * 10.0)
    return (
        (a // b) * b
        + divmod(a, b)[0] * a
        + ((n << 1) + (n >> 1) + (n & 3) + (n | 1) + (n ^ 2) + ~n) * b
    )


def test_step_operators_dispatch_a_classs_own_method():
    check_both_orders(smooth_operators)
    with dplus.current_unknown_transform(dplus.transform_from_source):
        check_both_orders(smooth_operators, POINTS[:1])


def test_step_operators_on_numbers_stay_steps():
    check_both_orders(number_steps, ((0.73, 1.31), (2.32, 0.44)))


# ---------------------------------------------------------------------------
# an object with a Python __call__ holding a function of the differentiated code, given to or
# called as code the default policy runs as it is: refused by name, not a raw TypeError


class Stepper:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, v):
        return self.fn() * v


def run_as_it_is(stepper, v):  # (a module function: the default policy runs it as it is)
    return stepper(v)


def test_a_callable_object_holding_a_closure_is_refused_by_the_default_policy():
    def given(x):
        def get():
            return x * x

        return run_as_it_is(Stepper(get), 2.0)

    def called(x):
        def get():
            return x * x

        return Stepper(get)(2.0)

    for f in (given, called):  # (first: a transform made from source is kept)
        with pytest.raises(UnknownTransformError, match=r"was given .*get"):
            dplus.grad(f)(0.7)
    for f in (given, called):
        with dplus.current_unknown_transform(dplus.transform_from_source):
            assert dplus.grad(f)(0.7)[0] == pytest.approx(4.0 * 0.7)
