"""Loops over ``zip``/``enumerate``/``reversed`` iterated live, differentiated again (stop 38,
issues #20 and #28; the shapes of pyperformance's spectral_norm and nbody and DEAP's
movingpeaks, written anew).

A loop whose body calls a function, appends or writes into a list iterates Python's live
iterator at the first order. Differentiated again, the loop runs over the list of the items
made at once (whose next-order rules exist), and checks, as it takes each item, that
Python's iterator would have given the same: the lists it reads hold the same objects at the
positions not yet read and are as long, and where the loop ends without ``break`` Python's
iterator would end too. Where the program changed what the iterator reads, the loop is
refused by name (and the first order, live, stays right).
"""

from __future__ import annotations

import math

import pytest
from path_helpers import close, fd_hessian

import dplus
from dplus import NonDifferentiableError
from dplus.transform.transformer import general_paths_only


@pytest.fixture(autouse=True)
def methods_from_source():
    """The classes' methods are not decorated (as in the programs these come from)."""
    with dplus.current_unknown_transform(dplus.transform_from_source):
        yield


@dplus.define_dplus
def eval_A(i, j):
    return 1.0 / ((i + j) * (i + j + 1) // 2 + i + 1)


def spectral_norm(u0, u1, u2):
    u = [u0, u1, u2]
    v = []
    for i, x in enumerate(u):  # (eval_A called: the loop runs live at the first order)
        s = 0.0
        for j, y in enumerate(u):
            s += eval_A(i, j) * y
        v.append(s * x)
    return sum(v) / (u0 * u0 + u1 * u1 + u2 * u2)


@dplus.define_dplus
def peak(x, h, w):
    return h / (1.0 + w * x * x)


def moving_peaks(x, h0, w0):
    heights = [h0, 2.0 * h0, 0.5]
    widths = [w0, 1.5, w0 * w0]
    possible = []
    for h, w in zip(heights, widths):
        possible.append(peak(x, h, w))
    return max(possible) + sum(possible)


def nbody_step(x, vx, dt):
    pos = [[x, 0.0], [1.0, x * vx]]
    vel = [[vx, 0.5], [0.0, -vx]]
    for p, v in zip(pos, vel):  # (writes into the lists it reads the elements of)
        p[0] += dt * v[0]
        p[1] += dt * v[1]
        v[0] -= dt * p[0]
    e = 0.0
    for (a, b), (c, d) in zip(pos, vel):
        e += a * b + c * c * d + a * c
    return e


def writes_where_it_read(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for i, (x, y) in enumerate(zip(xs, (1.0, 2.0, 3.0))):
        xs[i] = x * y * b
        t += xs[i] * x
    return t + sum(xs)


def breaks_early(a, b, c):
    xs = [a, b, c]
    seen = []
    for x, y in zip(xs, [c, b, a]):
        seen.append(x * y)
        if len(seen) == 2:
            break
    return seen[0] * seen[-1] + len(seen)


def enumerate_of_zip(a, b, c):
    xs = [a, b, c]
    out = []
    for i, (x, y) in enumerate(zip(xs, [b, c, a])):
        out.append(x * y * (i + 1.0))
        xs[i] = 0.0  # (where it has read: Python reads the same)
    return sum(out) + xs[2]


def zip_of_reversed(a, b, c):
    xs = [a, b, c]
    out = []
    for x, y in zip(reversed(xs), [b, c, a * a]):
        out.append(x * y)
    return out[0] * out[1] + out[2]


def appends_to_a_longer_list(a, b, c):
    xs = [a, b, c, a * b]
    ys = [c, a, b]
    for x, y in zip(xs, ys):  # (ys ends the zip; xs grown changes nothing Python reads)
        xs.append(x * y)
    return sum(xs)


class Holder:
    def __init__(self, xs):
        self.xs = xs
        self.log = []

    def record(self, v):
        self.log.append(v)


def held_by_an_object(a, b, c):
    h = Holder([a, b, c])
    for i, x in enumerate(h.xs):
        h.record(x * x * (i + 1.0))
    return sum(h.log) * a


def kept_for_one_loop(a, b, c):
    xs = [a, b, c]
    pairs = enumerate(reversed(xs))  # (kept in a variable that one loop reads)
    out = []
    for i, x in pairs:
        out.append(peak(x, b, i + 1.0))
    return sum(out)


def strict_zip_writing_behind(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for i, (x, y) in enumerate(zip(xs, [b, c, a], strict=True)):
        xs[i] = x * y
        t += xs[i] * a
    return t


# -- map and filter whose items Python computes as the loop takes them: run as Python runs
# them (``for a, b in zip(xs, ys): v = f(a, b)``), each call where Python makes it


def map_with_effects(a, b, c):
    log = []

    def noted(v):
        log.append(v)
        return v * len(log)

    t = 0.0
    for v in map(noted, [a, b, c]):
        t += v * log[-1]
    return t


def map_reads_what_the_body_rebinds(a, b, c):
    scale = a
    t = 0.0
    for v in map(lambda u, w: u * w * scale, [a, b, c], (c, 1.5, b)):
        scale = scale + v * b  # (Python's map calls the lambda after this, for the next item)
        t += v
    return t + scale


def map_stops_before_a_failing_call(a, b, c):
    xs = [a * a + 0.5, b * b + 0.5, -1.0]
    t = 0.0
    for v in map(lambda u: math.log(u) * c, xs):
        t += v
        xs[2] = xs[2] - 1.0  # (Python's map never calls math.log on it: the loop stops first)
        break
    return t * a


def filter_sees_what_the_body_appends(a, b, c):
    xs = [a, -b * b - 0.1, c]
    t = 0.0
    for v in filter(lambda u: u > -0.05, xs):
        if len(xs) < 5:
            xs.append(v * a - 0.02)
        t += v * v * b
    return t


def filter_none_writing_behind(a, b, c):
    xs = [a * b, 0.0, c, 0.0, b]
    t = 0.0
    for v in filter(None, xs):
        xs[1] = v  # (behind the loop, or ahead of it the first time: filter reads it then)
        t += v * a
    return t


def copies_an_object_into_a_slot_ahead(a, b, c):
    # (the same object written into a position not yet read: Python's zip reads that object,
    # which the list made at once holds too, but the place it came from may be another input
    # with a sensitivity of its own: test_one_object_in_two_inputs_written_ahead_is_refused)
    v = a * b
    xs = [v, c, v]
    t = 0.0
    for i, (u, w) in enumerate(zip(xs, [1.0, 2.0, 3.0])):
        if i == 0:
            xs[2] = xs[0]
            xs[0] = u * c
        t += u * w * xs[0]
    return t + xs[2] * a


RIGHT = [
    map_with_effects,
    map_reads_what_the_body_rebinds,
    map_stops_before_a_failing_call,
    filter_sees_what_the_body_appends,
    filter_none_writing_behind,
    spectral_norm,
    moving_peaks,
    nbody_step,
    writes_where_it_read,
    breaks_early,
    enumerate_of_zip,
    zip_of_reversed,
    appends_to_a_longer_list,
    held_by_an_object,
    kept_for_one_loop,
    strict_zip_writing_behind,
]
POINTS = [(0.7, 1.3, 0.4), (-0.45, 0.8, 1.6), (1.1, -0.6, 0.9)]


@pytest.mark.parametrize("f", RIGHT)
def test_second_order_as_python_runs_it(f):
    for point in POINTS:
        close(dplus.hessian(f)(*point), fd_hessian(f, point), tol=1e-5)
    with general_paths_only():  # (one point: the general path is not kept between calls)
        close(dplus.hessian(f)(*POINTS[0]), fd_hessian(f, POINTS[0]), tol=1e-5)


# -- what Python's iterator would have read differently: refused by name at the second order


def writes_ahead(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for i, (x, y) in enumerate(zip(xs, [1.0, 2.0, 3.0])):
        t += x * y * a
        if i + 1 < 3:
            xs[i + 1] = xs[i + 1] * b
    return t


def appends_to_the_shortest(a, b, c):
    xs = [a, b]
    t = 0.0
    for x, y in zip(xs, [c, a, b, c]):
        t += x * y
        if len(xs) < 4:
            xs.append(t * c)
    return t


def pops_while_zipping(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for x, y in zip(xs, [c, a, b]):
        t += x * y
        xs.pop()
    return t


@dplus.define_dplus
def scale_next(ys, i, by):
    if i + 1 < len(ys):
        ys[i + 1] = ys[i + 1] * by
    return 0.0


def helper_writes_through_an_alias(a, b, c):
    xs = [a, b, c]
    alias = xs
    t = 0.0
    for i, x in enumerate(xs):
        t += x * a + scale_next(alias, i, c)
    return t


class Bag:
    def __init__(self, xs):
        self.xs = xs

    def shrink_last(self, by):
        self.xs[-1] = self.xs[-1] * by


def method_writes_the_list(a, b, c):
    bag = Bag([a, b, c])
    t = 0.0
    for x, y in zip(bag.xs, [1.0, b, 2.0]):
        t += x * y
        bag.shrink_last(a)
    return t


def writes_the_list_read_by_reversed(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for i, (x, y) in enumerate(zip(reversed(xs), [1.0, 2.0, 3.0])):
        t += x * y * (i + 1.0)
        xs[0] = xs[0] * b
    return t


def map_appends_to_the_shortest(a, b, c):
    xs = [a, b]
    t = 0.0
    for v in map(lambda x, y: x * y, xs, [c, a, b, c]):
        t += v
        if len(xs) < 4:
            xs.append(t * c)  # (Python's map takes it: the zip it runs as is refused, by name)
    return t


def kept_and_read_by_next(a, b, c):
    xs = [a, b, c]
    pairs = zip(xs, [c, a, b])
    first = next(pairs)
    xs[2] = xs[2] * a
    t = first[0] * first[1]
    for x, y in pairs:
        t += x * y
    return t


def kept_and_changed_before_the_loop(a, b, c):
    xs = [a, b, c]
    items = enumerate(xs)
    xs[1] = xs[1] * c  # (Python's enumerate reads the new value)
    t = 0.0
    for i, x in items:
        t += x * (i + a)
    return t


def strict_zip_writing_ahead(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for i, (x, y) in enumerate(zip(xs, [1.0, 2.0, 3.0], strict=True)):
        t += x * y  # (made at once even at the first order: Python's 3.36 was 4.5)
        if i + 1 < 3:
            xs[i + 1] = xs[i + 1] * a
    return t


def reversed_of_zip(a, b, c):
    xs = [a, b, c]
    t = 0.0
    for x, y in reversed(zip(xs, [1.0, 2.0, 3.0])):
        t += x * y
        xs[0] = 0.0
    return t


REFUSED = [
    writes_ahead,
    appends_to_the_shortest,
    pops_while_zipping,
    helper_writes_through_an_alias,
    method_writes_the_list,
    writes_the_list_read_by_reversed,
    map_appends_to_the_shortest,
    copies_an_object_into_a_slot_ahead,
    kept_and_read_by_next,
    kept_and_changed_before_the_loop,
    strict_zip_writing_ahead,
]


@pytest.mark.parametrize("f", REFUSED + RIGHT)
def test_first_order_as_python_runs_it(f):
    for point in POINTS:
        primal = f(*point)
        r = dplus.dplus(f)(*point)
        assert r.primal == primal
        g = dplus.grad(f, argnums=(0, 1, 2))(*point)
        if point is POINTS[0]:
            with general_paths_only():
                close(dplus.grad(f, argnums=(0, 1, 2))(*point), g)
        h = 1e-6
        for k in range(3):
            up, down = list(point), list(point)
            up[k] += h
            down[k] -= h
            close(g[k], (f(*up) - f(*down)) / (2 * h), tol=1e-5)


@pytest.mark.parametrize("f", REFUSED)
def test_second_order_refused_by_name(f):
    with pytest.raises(NonDifferentiableError, match=r"(zip|enumerate|reversed|map)\(\)"):
        dplus.hessian(f)(*POINTS[0])
    with general_paths_only(), pytest.raises(NonDifferentiableError):
        dplus.hessian(f)(*POINTS[0])


def test_reversed_of_zip_raises_as_python():
    with pytest.raises(TypeError, match="'zip' object is not reversible"):
        reversed_of_zip(*POINTS[0])
    with pytest.raises(TypeError, match="'zip' object is not reversible"):
        dplus.grad(reversed_of_zip)(*POINTS[0])
    with pytest.raises(TypeError, match="'zip' object is not reversible"):
        dplus.hessian(reversed_of_zip)(*POINTS[0])


def test_arguments_and_effects_unchanged():
    """Differentiated again, the loop changes its arguments and its log as Python does."""
    log = []

    def fills(a, b, out):
        xs = [a, b]
        for i, (x, y) in enumerate(zip(xs, out)):
            out[i] = x * y  # (where it has read)
            out.append(x)  # (out is longer than xs: zip ends with xs, as Python's)
            log.append(i)
        return sum(out) * xs[0]

    plain_out = [2.0, 3.0, 5.0]
    primal = fills(0.7, 1.3, plain_out)
    plain_log = list(log)
    del log[:]
    out = [2.0, 3.0, 5.0]
    h = dplus.hessian(lambda a, b: fills(a, b, out))(0.7, 1.3)
    assert out == plain_out and log == plain_log
    close(h, fd_hessian(lambda a, b: fills(a, b, [2.0, 3.0, 5.0]), (0.7, 1.3)), tol=1e-5)
    assert dplus.dplus(lambda a, b: fills(a, b, [2.0, 3.0, 5.0]))(0.7, 1.3).primal == primal


def test_a_loop_left_by_an_exception_leaves_no_watch():
    """The watch of a loop that a refusal or the program's exception leaves ends with the call
    (it stayed in a process-wide table, holding the items and the lists)."""
    from dplus.runtime import live_again

    def raises_inside(a, b, c):
        xs = [a, b, c]
        t = 0.0
        for x, y in zip(xs, [1.0, 2.0, 0.0]):
            xs[0] = x  # (behind the loop: a live zip)
            t += x / y
        return t

    with pytest.raises(ZeroDivisionError):
        dplus.hessian(raises_inside)(*POINTS[0])
    assert not live_again._WATCHED
    with pytest.raises(NonDifferentiableError):
        dplus.hessian(writes_ahead)(*POINTS[0])
    assert not live_again._WATCHED


def _copies_ahead(xs):
    t = 0.0
    for i, (u, w) in enumerate(zip(xs, [1.0, 2.0])):
        if i == 0:
            xs[1] = xs[0]
        t = t + u * w * u
    return t


def _reverses_a_palindrome(xs):
    t = 0.0
    for i, (u, w) in enumerate(zip(xs, [1.0, 2.0, 3.0])):
        if i == 0:
            xs.reverse()  # ([v, w, v]: the same objects at every position)
        t = t + u * w * u * (i + 1.0)
    return t


@pytest.mark.parametrize("f", [_copies_ahead, _reverses_a_palindrome])
def test_one_object_in_two_inputs_changed_ahead_is_refused(f):
    """``xs[1] = xs[0]`` where both positions hold one float object, or ``xs.reverse()`` of
    ``[v, w, v]``: the item the loop takes is the same object, but its sensitivity belongs to
    another input. Made at once, it went to the position as it was: the derivative of a
    gradient taken inside the function was 7.6 for 6.0, 50.86 for 42.4. Refused by name."""

    def g(x):
        v, w = x * 1.0, x * 2.0
        d = dplus.grad(f)([v, v] if f is _copies_ahead else [v, w, v])  # (one object, two inputs)
        return sum(s * x**k for k, s in enumerate(d[0]))

    assert g(0.7) == pytest.approx(4.2 if f is _copies_ahead else 21.84)
    with pytest.raises(NonDifferentiableError, match=r"zip\(\) that changes"):
        dplus.grad1(g)(0.7)
