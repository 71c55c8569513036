"""Element reads in fast segments (issue #21): ``v = xs[i]`` on a list or tuple at an
``int`` index is read in the segment's guard (``FastSegment.read_forward``) and its
sensitivity goes straight into the list's entry or the tuple's adjoint
(``runtime.list_writes.read_back_number_into``). Everything else (a float or bool index, a
subclass of list, a ``__getitem__``, an element that is not a number, an index out of range)
takes the general path. Every function here is differentiated with the fast paths and inside
``general_paths_only()``; the two must agree, and with central finite differences.
"""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from path_helpers import both_ways, close

import dplus
from dplus.transform.transformer import general_paths_only

SETTINGS = settings(max_examples=25, deadline=None)
floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
lists = st.lists(floats, min_size=1, max_size=6)


def fd_of_lists(f, args, eps=1e-6):
    """Central differences of ``f`` with respect to every float in the lists of ``args``
    (and every float argument), as the nest ``grad`` returns."""
    out = []
    for k, a in enumerate(args):
        if isinstance(a, float):
            up, down = list(args), list(args)
            up[k], down[k] = a + eps, a - eps
            out.append((f(*up) - f(*down)) / (2 * eps))
            continue
        parts = []
        for j in range(len(a)):
            up, down = copy.deepcopy(list(args)), copy.deepcopy(list(args))
            up[k][j] += eps
            down[k][j] -= eps
            parts.append((f(*up) - f(*down)) / (2 * eps))
        out.append(parts)
    return tuple(out)


def check(f, *args, fd=True):
    """Both paths agree, leave the arguments alone, and match finite differences."""
    before = copy.deepcopy(args)
    fast, general = both_ways(f, *args)
    assert args == before
    close(fast, general, tol=1e-10)
    if fd:
        close(fast, fd_of_lists(f, args), tol=1e-5)
    return fast


def same_error(f, *args):
    """The primal, the fast path and the general path raise the same exception."""
    with pytest.raises(Exception) as primal:
        f(*args)
    with pytest.raises(type(primal.value)) as fast:
        dplus.grad(f)(*args)
    with general_paths_only(), pytest.raises(type(primal.value)) as general:
        dplus.grad(f)(*args)
    assert str(fast.value) == str(primal.value) == str(general.value)


# --------------------------------------------------------------------------
# the shapes people write


@dplus.define_dplus
def dot_index(xs, ys):
    acc = 0.0
    for i in range(len(xs)):
        acc += xs[i] * ys[i]
    return acc


def dot_enumerate(xs, ys):
    acc = 0.0
    for i, x in enumerate(xs):
        acc += x * ys[i]
    return acc


@dplus.define_dplus
def horner_index(cs, x):
    acc = 0.0
    for i in range(len(cs) - 1, -1, -1):
        acc = acc * x + cs[i]
    return acc


def differences(xs, a):
    acc = 0.0
    for i in range(len(xs)):
        acc = acc + a * (xs[i] - xs[i - 1]) ** 2  # (i - 1 is -1 first: the last element)
    return acc


def ends(xs, a):
    return a * xs[0] * xs[-1] + math.sin(xs[len(xs) // 2])


def rows(data, a):
    total = 0.0
    for i in range(len(data)):
        err = a * data[i][0] - data[i][1]
        total += err * err
    return total


@SETTINGS
@given(xs=lists, data=st.data())
def test_index_loops_equal_the_general_path(xs, data):
    ys = data.draw(st.lists(floats, min_size=len(xs), max_size=len(xs)))
    check(dot_index, xs, ys)
    check(dot_enumerate, xs, ys)
    check(differences, xs, 0.7)
    check(ends, xs, 1.3)


@SETTINGS
@given(cs=lists, x=floats)
def test_horner_by_index_equals_the_general_path(cs, x):
    check(horner_index, cs, x)


@SETTINGS
@given(pairs=st.lists(st.tuples(floats, floats), min_size=1, max_size=5), a=floats)
def test_rows_of_tuples_and_of_lists(pairs, a):
    as_lists = [list(p) for p in pairs]
    fast, general = both_ways(rows, pairs, a)
    close(fast, general, tol=1e-10)
    close(check(rows, as_lists, a, fd=False), fd_of_rows(as_lists, a), tol=1e-5)


def fd_of_rows(data, a, eps=1e-6):
    grid = []
    for i, row in enumerate(data):
        parts = []
        for j in range(len(row)):
            up, down = copy.deepcopy(data), copy.deepcopy(data)
            up[i][j] += eps
            down[i][j] -= eps
            parts.append((rows(up, a) - rows(down, a)) / (2 * eps))
        grid.append(parts)
    return (grid, (rows(data, a + eps) - rows(data, a - eps)) / (2 * eps))


def test_the_loop_reads_elements_in_its_guard():
    """(Not a speed test: the element reads are in a fast segment, so a regression that
    sends every read the general way is seen here.)"""
    from dplus.transform.transformer import generated_source

    dplus.grad(dot_index)([1.0], [2.0])
    assert "read_back_number_into" in generated_source(dot_index)


# --------------------------------------------------------------------------
# adversarial inputs: each takes the general path, or raises what the primal raises


def test_aliased_lists():
    xs = [0.5, -1.5, 2.0]
    fast = check(dot_index, xs, xs, fd=False)
    close(fast, ([2 * x for x in xs], [2 * x for x in xs]))
    check(lambda v: dot_index(v, v), xs)


def test_an_element_read_twice_and_ints_among_floats():
    def f(xs, a):
        acc = 0.0
        for i in range(len(xs)):
            acc += xs[i] * xs[i] * a
        return acc

    check(f, [1.0, 2, -3.0], 0.5, fd=False)
    check(f, [1.0, 2.0, -3.0], 0.5)


def by_index(xs, idx):
    return xs[idx] * 3.0 + xs[0]


def test_index_of_other_types():
    xs = [1.0, 2.0, 4.0]
    close(both_ways(by_index, xs, True)[0], both_ways(by_index, xs, True)[1])  # a bool
    close(dplus.grad(by_index)(xs, True)[0], [1.0, 3.0, 0.0])
    same_error(by_index, xs, 1.0)  # a float: TypeError
    same_error(by_index, xs, 3)  # out of range
    same_error(by_index, xs, -4)
    close(dplus.grad(by_index)(xs, -3)[0], [4.0, 0.0, 0.0])  # negative, in range
    close(dplus.grad(by_index)(xs, -1)[0], [1.0, 0.0, 3.0])


def test_an_earlier_error_comes_first():
    """The guard reads the element before the segment's arithmetic runs: out of range, the
    read must not raise before an error the program raises first."""

    def f(xs, a):
        y = 1.0 / a
        return y * xs[7]

    same_error(f, [1.0, 2.0], 0.0)
    same_error(f, [1.0, 2.0], 2.0)


class Subclass(list):
    pass


class Counting:
    """Not a list: indexing runs user code, as often as in the primal."""

    def __init__(self, xs):
        self.xs = xs
        self.reads = [0]

    def __len__(self):
        return len(self.xs)

    @dplus.define_dplus
    def __getitem__(self, i):
        self.reads.append(i)
        return self.xs[i] * 2.0


def test_a_subclass_of_list_and_a_getitem():
    ys = [1.0, -1.0, 0.5]
    fast, general = both_ways(dot_index, Subclass([1.0, 2.0, 3.0]), ys)
    close(fast, general)
    close(fast[1], [1.0, 2.0, 3.0])
    xs = Counting([1.0, 2.0, 3.0])
    primal = dot_index(xs, ys)
    in_primal = list(xs.reads)
    xs.reads[:] = [0]
    assert dplus.dplus(dot_index)(xs, ys).primal == primal and xs.reads == in_primal
    xs.reads[:] = [0]
    g = dplus.grad(dot_index)(xs, ys)
    close(g[1], [2.0, 4.0, 6.0])
    with general_paths_only():
        close(dplus.grad(dot_index)(xs, ys)[1], g[1])


def test_elements_that_are_not_numbers():
    def f(xs, a):
        acc = 0.0
        for i in range(len(xs)):
            acc = acc + abs(xs[i] * a)
        return acc

    xs = [1.0, 2.0 + 1.0j, -3.0]
    fast, general = both_ways(f, xs, 0.5)
    close(fast[1], general[1])
    assert fast[0][1] == general[0][1]
    check(f, [1.0, -2.0], 0.5)


def test_a_list_mutated_while_it_is_read():
    def f(xs, a):
        xs = list(xs)
        for i in range(len(xs) - 1):
            xs[i + 1] = xs[i] * a + xs[i + 1]
            if i == 0:
                xs.append(xs[0] * a)
        return xs[-1] + xs[-2]

    check(f, [1.0, 2.0, 3.0, -1.0], 0.7)


def test_a_list_grown_in_the_loop_it_is_read_in():
    def f(xs, a):
        out = [a]
        for i in range(len(xs)):
            out.append(out[i] * xs[i])
        return out[-1]

    check(f, [1.0, 2.0, -0.5], 1.5)


def items_by_index(d, a):
    s = 0.0
    for i, kv in enumerate(sorted(d.items())):
        s = s + (i + a) * kv[1]
    return s


def test_elements_of_tuples_a_loop_unpacks():
    """``kv[1]`` of a tuple the leading unpack made: its sensitivity goes to the unpack's
    own adjoint of ``kv`` (the persistent one is never read; found by test_containers)."""
    d = {"a": 1.0, "b": -1.0, "c": 0.5}
    fast, general = both_ways(items_by_index, d, 0.5)
    close(fast, general)
    close(fast[0], {"a": 0.5, "b": 1.5, "c": 2.5})
    close(fast[1], 1.0 - 1.0 + 0.5)


def test_a_tuple_and_a_list_in_one_loop():
    check(dot_index, (1.0, 2.0, 3.0), [0.5, -1.0, 2.0], fd=False)
    fast, general = both_ways(dot_index, (1.0, 2.0, 3.0), [0.5, -1.0, 2.0])
    close(fast, ((0.5, -1.0, 2.0), [1.0, 2.0, 3.0]))


def test_a_guard_that_fails_part_way():
    """Floats, then an int list element, then a string: fast, general and the TypeError."""
    xs = [1.0, 2.0, 3]
    check(dot_index, xs, [1.0, 2.0, 3.0], fd=False)
    same_error(dot_index, [1.0, "a"], [1.0, 2.0])


# --------------------------------------------------------------------------
# differentiated again: the element read is the general one there


def test_second_order_equals_the_general_path():
    def f(a, b):
        xs = [a, b, a * b]
        return dot_index(xs, xs) + horner_index(xs, a)

    h = dplus.hessian(f)(0.7, -1.3)
    with general_paths_only():
        close(dplus.hessian(f)(0.7, -1.3), h, tol=1e-9)
    g = dplus.grad(f)
    eps = 1e-5
    for j in range(2):
        up, down = [0.7, -1.3], [0.7, -1.3]
        up[j] += eps
        down[j] -= eps
        col = [(p - q) / (2 * eps) for p, q in zip(g(*up), g(*down))]
        close((h[0][j], h[1][j]), tuple(col), tol=1e-4)


# --------------------------------------------------------------------------
# numbers written into list elements (``xs[i] = v``, ``out[i] += ...``, ``pos[i][0] += ...``)


def dense_index(W, h, b):
    out = [0.0] * len(b)
    for i in range(len(b)):
        for j in range(len(h)):
            out[i] += W[i][j] * h[j]
        out[i] += b[i]
    return sum(v * v for v in out)


def euler(pos, vel, steps):
    pos = [list(p) for p in pos]
    vel = [list(v) for v in vel]
    for _ in range(steps):
        for i in range(len(pos)):
            pos[i][0] += 0.1 * vel[i][0]
            pos[i][1] += 0.1 * vel[i][1]
            vel[i][0] += 0.1 * (math.sin(pos[i][1]) - 0.2 * vel[i][0])
    return sum(p[0] * p[1] for p in pos)


@SETTINGS
@given(data=st.data())
def test_augmented_writes_into_rows_equal_the_general_path(data):
    n, m = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    W = [data.draw(st.lists(floats, min_size=m, max_size=m)) for _ in range(n)]
    h = data.draw(st.lists(floats, min_size=m, max_size=m))
    b = data.draw(st.lists(floats, min_size=n, max_size=n))
    fast, general = both_ways(dense_index, W, h, b)
    close(fast, general, tol=1e-10)
    eps = 1e-6
    for j in range(m):
        up, down = list(h), list(h)
        up[j] += eps
        down[j] -= eps
        fd = (dense_index(W, up, b) - dense_index(W, down, b)) / (2 * eps)
        assert math.isclose(fast[1][j], fd, rel_tol=1e-5, abs_tol=1e-5)
    pos = [data.draw(st.tuples(floats, floats)) for _ in range(n)]
    vel = [data.draw(st.tuples(floats, floats)) for _ in range(n)]
    fast, general = both_ways(euler, pos, vel, 3)
    close(fast, general, tol=1e-10)


def test_writes_into_the_list_being_read():
    def f(xs, a):
        xs = list(xs)
        for i in range(1, len(xs)):
            xs[i] = xs[i - 1] * a + xs[i]  # (reads what the last iteration wrote)
        for i in range(len(xs)):
            xs[-1 - i] += xs[i] * a  # (negative indices; aliasing within one iteration)
        return xs[0] * xs[-1] + xs[1]

    check(f, [1.0, -2.0, 0.5], 0.7)
    check(f, [1.0, -2.0, 3], 2, fd=False)

    @dplus.define_dplus
    def g(xs, ys, a):
        for i in range(len(xs)):
            ys[i] = xs[i] * a
        return ys[0] + ys[-1] * xs[0]

    def aliased(xs, a):
        return g(xs, xs, a)

    fast = dplus.grad(aliased)([1.0, 2.0], 3.0)  # ys is xs (each path on a list of its own)
    with general_paths_only():
        close(fast, dplus.grad(aliased)([1.0, 2.0], 3.0))
    close(fast, ([3.0 + 9.0 * 2.0, 9.0], 1.0 + 2.0 * 3.0 * 2.0))  # a x0 + a^2 x0 x1


def test_writes_that_raise_or_take_the_general_way():
    @dplus.define_dplus
    def f(xs, i, a):
        y = xs[0] * a
        xs[i] = y
        return xs[0] + y

    same_error(f, [1.0, 2.0], 2, 1.0)  # out of range: IndexError at the store
    same_error(f, (1.0, 2.0), 1, 1.0)  # a tuple: TypeError
    same_error(f, [1.0, 2.0], 1.0, 1.0)  # a float index
    for i in (-2, -1, True, 0):  # (each path on a list of its own: f writes into it)
        fast = dplus.grad(f)([1.0, 2.0], i, 3.0)
        with general_paths_only():
            close(fast, dplus.grad(f)([1.0, 2.0], i, 3.0))
    check(lambda xs, a: f(list(xs), 1, a), [1.0, 2.0], 3.0)
    check(lambda xs, a: f(list(xs), 0, a), [1.0, 2.0], 3.0)

    def rows_of_tuples(pos, a):
        for i in range(len(pos)):
            pos[i][0] += a
        return a

    same_error(rows_of_tuples, [(1.0, 2.0)], 1.0)


def test_an_unbound_list_raises_where_the_program_does():
    """The guard reads lists before the segment's arithmetic runs: a list unbound there
    must not turn the program's ZeroDivisionError into an UnboundLocalError."""

    def read_after_division(a):
        if a > 5:
            xs = [2.0]
        y = 1.0 / a
        return y * xs[0]

    @dplus.define_dplus
    def write_after_division(a, i):
        if a > 5:
            out = [0.0]
        y = 1.0 / a
        out[i] = y * a
        return out[0]

    same_error(read_after_division, 0.0)
    same_error(read_after_division, 1.0)
    same_error(write_after_division, 0.0, 0)
    same_error(write_after_division, 1.0, 0)
    check(read_after_division, 6.0)
    check(lambda a: write_after_division(a, 0), 6.0, fd=False)
