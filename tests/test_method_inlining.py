"""Method calls inlined at their call site (issue #21, ``transform.inline``): ``obj.m(args)``
on names becomes a branch per class of the module holding an inlinable ``define_dplus``
function under ``m``, tested at run time (``runtime.calls.holds_method``: the class itself,
holding that function, looking attributes up as ``object`` does, nothing of that name on
the instance), with the general call as the last branch.

Every program here is differentiated as usual and inside ``general_paths_only()`` (no
inlining); the two must agree with each other and with central finite differences, the
program's result and its arguments must be unchanged, and the inlined branch must run
where it may (and only there): instances of two classes at one call site, subclasses
overriding or inheriting the method, a method rebound on the instance or replaced on the
class between calls, static and class methods, properties, ``functools.partial``,
decorators, recursion, ``super()``, defaults, ``*args``, keywords, a method raising, an
unbound argument, a method rebinding ``self`` or calling back into the caller, ``__getattr__`` and
``__getattribute__``, a metaclass.
"""

from __future__ import annotations

import functools
import math
import types

import pytest
from path_helpers import both_ways, close, fd_gradient, fd_hessian

import dplus
from dplus import define_dplus
from dplus.transform import inline
from dplus.transform.transformer import general_paths_only

# --------------------------------------------------------------------------
# the classes (several hold ``step``: every call site below has a branch for each; a
# module's classes are inlined for at most six holding one name, hence ``advance``)


class Body:
    def __init__(self, x, v):
        self.x = x
        self.v = v

    @define_dplus
    def step(self, dt):
        a = -math.sin(self.x) - 0.1 * self.v
        self.x += dt * self.v
        self.v = self.v + dt * a
        return a * self.x  # (mutates self and returns a value)


class Slotted:
    __slots__ = ("x", "v")

    def __init__(self, x, v):
        self.x = x
        self.v = v

    @define_dplus
    def step(self, dt):
        self.x = self.x * (1.0 + dt * self.v)
        return self.x


class Overriding(Body):
    @define_dplus
    def step(self, dt):
        self.v = self.v * math.cos(dt * self.x)
        return self.v


class Inheriting(Body):
    pass


class CallsSuper(Body):
    @define_dplus
    def step(self, dt):
        r = super().step(dt)
        return r * 2.0


class WithGetattr(Body):
    @define_dplus
    def __getattr__(self, name):
        if name == "w":
            return 3.0 * self.v
        raise AttributeError(name)

    @define_dplus
    def step(self, dt):  # (inlined: found in the class, __getattr__ is not asked)
        self.x = self.x + dt * self.w
        return self.x


class WithGetattribute(Body):
    reads: list[str] = []

    def __getattribute__(self, name):  # (the value unchanged: a Python hook that changes it
        WithGetattribute.reads.append(name)  # is a known gap, test_attribute_segments)
        return object.__getattribute__(self, name)

    @define_dplus
    def step(self, dt):
        self.x = self.x * dt
        return self.x


class Meta(type):
    pass


class WithMetaclass(metaclass=Meta):
    def __init__(self, x, v):
        self.x = x
        self.v = v

    @define_dplus
    def step(self, dt):  # (not inlined: reading the class runs its metaclass's lookup)
        self.x = self.x * (1.0 + dt)
        return self.x


@define_dplus
def _static_step(dt):
    return dt * 3.0


@define_dplus
def _free_step(body, dt):
    body.x = body.x * dt
    return body.x


def _unknown_decorator(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)

    return wrapper


class Static(Body):
    step = staticmethod(_static_step)


class ClassMethod(Body):
    @classmethod
    @define_dplus
    def step(cls, dt):
        return dt * 2.0


class Property(Body):
    @property
    def step(self):
        return _static_step


class Partial(Body):
    step = functools.partialmethod(_free_step)


class Decorated(Body):
    @define_dplus
    @_unknown_decorator
    @define_dplus
    def step(self, dt):
        self.x = self.x + dt
        return self.x


class Defaults:
    def __init__(self, x, v):
        self.x = x
        self.v = v

    @define_dplus
    def step(self, dt=0.5):
        self.x = self.x + dt * self.v
        return self.x

    @define_dplus
    def many(self, *dts):
        self.x = self.x * dts[0]
        return self.x

    @define_dplus
    def grow(self, x, n):
        if n > 0:
            x = self.grow(x * self.v, n - 1)
        return x + self.x

    @define_dplus
    def check(self, limit):
        if self.x > limit:
            raise ValueError(f"x over {limit}")
        self.x = self.x * self.v
        return self.x

    @define_dplus
    def rebinds_self(self, other):
        self.x = self.x * 2.0
        self = other
        self.x = self.x + 1.0
        return self.v

    @define_dplus
    def late_argument(self, dt):
        self.x = self.x * 2.0
        self.v = self.v + dt
        return self.v

    @define_dplus
    def calls_back(self, h):
        self.x = self.x * self.v
        h()
        self.v = self.v + self.x
        return self.x


class Swapped:
    def __init__(self, x):
        self.x = x

    @define_dplus
    def advance(self, dt):
        self.x = self.x * dt
        return self.x


@define_dplus
def _swapped_other(self, dt):
    self.x = self.x + dt
    return self.x


_swapped_first = Swapped.__dict__["advance"]


# --------------------------------------------------------------------------
# the programs, each of (x, y); the number of calls that take the inlined branch


def two_classes(x, y):
    bodies = [Body(x, y), Slotted(y, x), Overriding(x, x), Body(y, 0.5)]
    total = 0.0
    for _ in range(3):
        for b in bodies:
            r = b.step(0.1)
            total = total + r
    return total + bodies[0].x * bodies[1].v


def not_the_class(x, y):
    bodies = [Inheriting(x, y), CallsSuper(y, x), WithGetattribute(x, y), WithGetattr(y, x)]
    bodies.append(WithMetaclass(x, y))
    total = 0.0
    for b in bodies:
        r = b.step(0.2)
        total = total + r * b.x
    return total + bodies[3].w


def not_functions(x, y):
    bodies = [Static(x, y), ClassMethod(y, x), Property(x, x), Partial(y, y), Decorated(x, y)]
    total = x * y
    for b in bodies:
        r = b.step(y)
        total = total + r * x
    return total + bodies[3].x + bodies[4].x


def rebound_on_the_instance(x, y):
    b = Body(x, y)
    total = 0.0
    for i in range(4):
        if i == 2:
            b.step = types.MethodType(_swapped_other, b)
        r = b.step(0.3)
        total = total + r
    del b.step
    r = b.step(0.3)
    return total + r + b.x * b.v


def replaced_on_the_class(x, y):
    Swapped.advance = _swapped_first
    s = Swapped(x)
    total = 0.0
    for i in range(4):
        if i == 2:
            Swapped.advance = _swapped_other
        r = s.advance(y)
        total = total + r * r
    Swapped.advance = _swapped_first
    return total


def other_signatures(x, y):
    d = Defaults(x, y)
    a = d.step()  # a default
    b = d.step(dt=y)  # a keyword
    c = d.many(y, x)  # *args
    e = d.grow(x, 3)  # recursion
    return a + b * c + e


def raising(x, y):
    """In a try: not inlined (an exception out of an inlined branch would interrupt it)."""
    d = Defaults(x, y)
    limit = 0.5
    total = 0.0
    for _ in range(4):
        try:
            r = d.check(limit)
            total = total + r
        except ValueError:
            total = total * y
            limit = 1e9
    return total + d.x


def rebinding_self(x, y):
    d = Defaults(x, y)
    e = Defaults(y, x)
    r = d.rebinds_self(e)
    return r * d.x + e.x * e.v


def calling_back(x, y):
    d = Defaults(x, y)
    other = Defaults(y, x)

    def h():
        nonlocal d
        d = other

    r = d.calls_back(h)
    return r * d.x + other.v * x


SHARED = [None]


def unbound_argument(x, y):
    d = SHARED[0]
    if x > 5.0:
        dt = 0.1
    d.late_argument(dt)  # (raises before the method runs: d unchanged)
    return d.x * d.v


def raising_out(x, y):
    d = Defaults(x, y)
    total = 0.0
    for _ in range(3):
        r = d.check(0.5)
        total = total + r
    return total


SCALE = 2.0


def in_arithmetic(x, y):
    """Calls inside arithmetic: taken out and inlined where nothing but constants is
    evaluated before them (the first and third), as written otherwise."""
    b = Body(x, y)
    total = 0.0
    for _ in range(2):
        err = b.step(0.1) - y
        total = total + err * err
        total = total - -b.step(0.2)  # (a name read before the call)
        total = 2.0 * (b.step(0.05) + x)
    r = SCALE * b.step(0.1)  # (a global read before the call)
    q = y * (x + b.step(0.05))  # (a local read before the call: it could be unbound)
    q = q + (x * y) - b.step(0.1)  # (an operation before the call)
    return total + r + q * b.v


CASES = [
    # (program, calls that take an inlined branch, order 2 checked)
    (two_classes, 12, True),
    (not_the_class, 1, False),  # (WithGetattr's own step)
    (not_functions, 0, False),
    (rebound_on_the_instance, 3, True),
    (replaced_on_the_class, 2, False),
    (other_signatures, 1, False),  # (the outer call of the recursion)
    (raising, 0, True),
    (rebinding_self, 1, False),
    (calling_back, 1, False),
    (in_arithmetic, 4, False),
]
POINTS = [(0.3, -0.7), (-1.1, 0.4), (0.8, 1.3)]


@pytest.fixture
def taken(monkeypatch):
    """Counts the calls whose test passes, in code transformed while the fixture is on."""
    count = [0]
    holds = inline.holds_method

    def counting(obj, cls, name, fn):
        ok = holds(obj, cls, name, fn)
        count[0] += ok
        return ok

    counting.__name__ = "holds_method"
    monkeypatch.setattr(inline, "holds_method", counting)
    return count


def fresh(f):
    """A copy of ``f`` with a code object of its own: transformed anew (with the fixture)."""
    code = f.__code__.replace()
    g = types.FunctionType(code, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    g.__qualname__ = f.__qualname__
    return g


@pytest.mark.parametrize(
    "program, inlined, second_order", CASES, ids=[c[0].__name__ for c in CASES]
)
def test_inlined_calls_equal_the_general_path(program, inlined, second_order, taken):
    f = fresh(program)
    for x, y in POINTS:
        assert dplus.lift_dplus(f)(x, y).primal == program(x, y)
        taken[0] = 0
        fast, general = both_ways(f, x, y)
        assert taken[0] == inlined
        close(fast, general, tol=1e-12)
        close(fast, fd_gradient(program, (x, y)), tol=1e-5)
    if second_order:
        x, y = POINTS[0]
        h = dplus.hessian(f)(x, y)
        with general_paths_only():
            close(dplus.hessian(f)(x, y), h, tol=1e-9)
        close(h, fd_hessian(program, (x, y)), tol=1e-4)


class Late:
    def __init__(self, x):
        self.x = x

    @define_dplus
    def advance(self, dt):
        self.x = self.x * dt
        return self.x


def late(x, y):
    p = Late(x)
    r = p.advance(y)
    return r + p.x * y


def test_a_method_replaced_between_gradients(taken):
    """The class is changed after the caller was transformed, then a rule is registered for
    the method: each call takes the function the class holds then, with its rule."""
    f = fresh(late)
    g = dplus.grad(f)
    close(g(0.5, 2.0), (2.0 + 2.0 * 2.0, 0.5 + 2.0 * 0.5 * 2.0))
    assert taken[0] == 1
    first = Late.__dict__["advance"]

    @define_dplus
    def other(self, dt):
        self.x = self.x + dt
        return self.x

    Late.advance = other
    try:
        close(g(0.5, 2.0), (1.0 + 2.0, 1.0 + 2.5 + 2.0))
    finally:
        Late.advance = first
    assert taken[0] == 1

    @dplus.register_backprop(first)
    def _(self, dt):
        return lambda A, Abox: ((), dplus.gen_zero, 100.0 * A)

    taken[0] = 0
    assert g(0.5, 2.0)[1] == pytest.approx(100.0 + 1.0)
    assert taken[0] == 0


def test_exceptions_out_of_an_inlined_call(taken):
    """A method raising, and an argument unbound: the same exception, from the same place."""
    for program, exception in ((raising_out, ValueError), (unbound_argument, UnboundLocalError)):
        f = fresh(program)
        SHARED[0] = Defaults(0.4, 0.6)
        with pytest.raises(exception) as plain:
            program(0.8, 0.3)
        taken[0] = 0
        with pytest.raises(exception) as fast:
            dplus.grad(f)(0.8, 0.3)
        assert taken[0] == 1 and str(fast.value) == str(plain.value)
        assert (SHARED[0].x, SHARED[0].v) == (0.4, 0.6)
        with general_paths_only(), pytest.raises(exception):
            dplus.grad(f)(0.8, 0.3)
    close(dplus.grad(fresh(raising_out))(0.2, 1.1), fd_gradient(raising_out, (0.2, 1.1)), 1e-5)
