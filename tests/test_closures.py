"""Closures, nonlocal, late binding, recursion, define_dplus, mutual recursion, methods."""

from __future__ import annotations

from operator import mul

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplus
from dplus import BoxSensitivities, box, define_dplus, grad, grad1, lift_dplus, set_box, unbox
from dplus.gradcheck import check_grad

floats = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False, allow_infinity=False)
settings_ = settings(max_examples=25, deadline=None)


# ---------------------------------------------------------------------------
# closures over values


def test_closure_captures_outer_variable():
    y = 3.0
    f = lambda x: x + y
    assert grad(f)(2.0) == (1.0,)


def test_closure_sensitivity_of_captured_variable():
    def make(y):
        return lift_dplus(lambda x: x * y)

    r = make(5.0)(2.0)
    assert r.primal == 10.0
    assert r.backprop(1.0, BoxSensitivities()) == ((2.0,), 5.0)
    assert grad(dplus.apply)(make(5.0), [2.0]) == ((2.0,), [5.0])


def f_two_sibling_lambdas(x):
    h = lambda g: g(x) * 2.0
    s = lambda v: v * v
    return h(s)


def test_two_sibling_lambdas():
    assert grad1(f_two_sibling_lambdas)(2.0) == 8.0


def f_two_sibling_defs(x):
    def h(g):
        return g(x) * 2.0

    def s(v):
        return v * v

    return h(s)


def test_two_sibling_defs():
    assert grad1(f_two_sibling_defs)(2.0) == 8.0


def test_identity_through_nested_lambdas():
    f = lambda x: (lambda y: (lambda z: z)(y))(x)
    assert grad1(f)(3.0) == 1.0


def f_closure_inside(x, y):
    def scale(v):
        return v * y

    def twice(v):
        return scale(scale(v))

    return twice(x) + scale(1.0)


def test_closure_defined_inside_differentiated_function():
    # x y^2 + y
    assert grad(f_closure_inside)(2.0, 3.0) == (9.0, 2 * 2.0 * 3.0 + 1.0)


@settings_
@given(floats, floats)
def test_closure_inside_fd(x, y):
    check_grad(f_closure_inside, x, y)


def f_returns_closure(x):
    def g(t):
        return t * x * x

    return g


def f_uses_returned_closure(x, t):
    g = f_returns_closure(x)
    return g(t)


def test_closure_returned_from_called_function():
    dplus.define_dplus(f_returns_closure)
    assert grad(f_uses_returned_closure)(2.0, 3.0) == (12.0, 4.0)


def f_closure_list(x):
    fs = []
    for k in range(3):
        fs.append(lambda t, k=k: t * k * x)
    return fs[0](1.0) + fs[1](2.0) + fs[2](3.0)


def test_closures_made_in_a_loop_with_default_binding():
    # x*(0 + 2 + 6)
    assert grad1(f_closure_list)(2.0) == 8.0


def f_late_binding(x):
    fs = []
    for k in range(3):
        fs.append(lambda t: t * k * x)  # noqa: B023  (late binding is what the test checks)
    # late binding: every lambda sees the final k == 2
    return fs[0](1.0) + fs[1](1.0)


def test_late_binding():
    assert f_late_binding(1.0) == 4.0
    assert grad1(f_late_binding)(3.0) == 4.0


def f_late_binding_rebind(x):
    y = x
    g = lambda: y * y
    y = x * 3.0
    return g()


def test_late_binding_sees_rebinding():
    # g sees y = 3x: 9 x^2
    assert f_late_binding_rebind(1.0) == 9.0
    assert grad1(f_late_binding_rebind)(2.0) == 36.0


def f_closure_in_comprehension(xs, y):
    fs = [lambda t: t * y for _ in xs]
    return sum(f(x) for f, x in zip(fs, xs))


def test_closures_created_in_comprehension():
    assert grad(f_closure_in_comprehension)([1.0, 2.0], 3.0) == ([3.0, 3.0], 3.0)


# ---------------------------------------------------------------------------
# nonlocal


def next_counter(x0):
    x = x0

    def nxt():
        nonlocal x
        v = x
        x = x + 1
        return v

    return nxt() * (nxt() * nxt())


def test_counter_closure_mutated():
    assert grad(next_counter)(3.0) == (47.0,)


def f_counter_twice(x0):
    x = x0

    def bump(k):
        nonlocal x
        x = x * k

    bump(x0)
    bump(2.0)
    return x


def test_nonlocal_rebinding_twice():
    # x0 * x0 * 2
    assert grad1(f_counter_twice)(3.0) == 12.0


def f_nonlocal_nested_two_levels(x):
    acc = 0.0

    def outer(v):
        def inner(w):
            nonlocal acc
            acc = acc + w * w

        inner(v)
        inner(v * 2.0)

    outer(x)
    return acc


def test_nonlocal_two_levels_deep():
    # x^2 + 4x^2
    assert grad1(f_nonlocal_nested_two_levels)(3.0) == 30.0


def f_nonlocal_in_loop(xs):
    total = 0.0

    def add(v):
        nonlocal total
        total += v * v

    for x in xs:
        add(x)
    return total


def test_nonlocal_accumulator_in_loop():
    xs = [1.0, -2.0, 3.0]
    assert grad(f_nonlocal_in_loop)(xs) == ([2 * x for x in xs],)


def f_nonlocal_plain_in_loop(xs):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v * v

    for x in xs:
        add(x)
    return total


@settings_
@given(st.lists(floats, max_size=5))
def test_nonlocal_rebinding_in_loop(xs):
    assert grad(f_nonlocal_plain_in_loop)(xs) == ([2 * x for x in xs],)


def f_rebind_argument(x):
    x = x * x
    x = x + 1.0
    return x


def test_set_style_rebinding_of_arguments():
    assert grad1(f_rebind_argument)(3.0) == 6.0


def f_captured_rebind(x):
    y = x

    def read():
        return y * 2.0

    a = read()
    y = x * x
    b = read()
    return a + b


def test_set_style_rebinding_of_captured_variable():
    # 2x + 2x^2
    assert grad1(f_captured_rebind)(3.0) == 2.0 + 12.0


def f_nonlocal_closure_returned(x):
    state = x

    def step(k):
        nonlocal state
        state = state * k
        return state

    return step


def f_drive_stateful(x):
    step = f_nonlocal_closure_returned(x)
    step(2.0)
    return step(x)


def test_stateful_closure_returned_from_define_dplus():
    define_dplus(f_nonlocal_closure_returned)
    # x * 2 * x = 2x^2
    assert grad1(f_drive_stateful)(3.0) == 12.0


# ---------------------------------------------------------------------------
# recursion


@define_dplus
def pow_(x, n):
    return 1.0 if n == 0 else x * pow_(x, n - 1)


def test_recursion_define_dplus():
    assert grad(pow_)(2.0, 3) == (12.0, 0)


@define_dplus
def fact_acc(x, n, acc):
    if n == 0:
        return acc
    return fact_acc(x, n - 1, acc * x)


def test_tail_accumulating_recursion():
    assert grad(fact_acc)(2.0, 4, 1.0) == (32.0, 0, 16.0)


def f_local_recursion(x, n):
    def go(k):
        if k == 0:
            return 1.0
        return x * go(k - 1)

    return go(n)


def test_recursion_through_local_def():
    assert grad(f_local_recursion)(2.0, 5) == (80.0, 0)


def f_recursion_through_box(x, n):
    b = box(None)

    def go(k):
        if k == 0:
            return 1.0
        return x * unbox(b)(k - 1)

    set_box(b, go)
    return unbox(b)(n)


def test_recursion_through_box():
    assert grad(f_recursion_through_box)(2.0, 3) == (12.0, 0)


def f_y_combinator(x, n):
    Y = lambda f: (lambda g: g(g))(lambda g: f(lambda *a: g(g)(*a)))
    power = Y(lambda rec: lambda k: 1.0 if k == 0 else x * rec(k - 1))
    return power(n)


def test_recursion_through_y_combinator():
    assert f_y_combinator(2.0, 3) == 8.0
    assert grad(f_y_combinator)(2.0, 3) == (12.0, 0)


@define_dplus
def is_even_f(x, n):
    return x * x if n == 0 else is_odd_g(x, n - 1) * x


@define_dplus
def is_odd_g(x, n):
    return x if n == 0 else is_even_f(x, n - 1) + x


def test_mutual_recursion_define_dplus():
    # f(x,0)=x^2, g(x,0)=x
    # g1 = x^2 + x, f2 = (x^2+x) x = x^3 + x^2 ...
    def f_ref(x, n):
        return x * x if n == 0 else g_ref(x, n - 1) * x

    def g_ref(x, n):
        return x if n == 0 else f_ref(x, n - 1) + x

    for n in range(6):
        assert grad(is_even_f)(2.0, n)[0] == pytest.approx(
            (f_ref(2.0 + 1e-6, n) - f_ref(2.0 - 1e-6, n)) / 2e-6, rel=1e-6
        )


@define_dplus
def mr_f(x, n):
    if n == 0:
        return x
    return mr_g(x * x, n - 1) + x


@define_dplus
def mr_g(x, n):
    if n == 0:
        return x
    return mr_f(x + x, n - 1) * x


def test_mutual_recursion_check_grad():
    for n in range(5):
        check_grad(lambda x: mr_f(x, n), 1.3)  # noqa: B023  (checked at once, in this iteration)


@define_dplus
def rk_f(x, n):
    # the Racket suite's mutual recursion case
    return x if n == 0 else x * rk_g(x, n - 1)


@define_dplus
def rk_g(x, n):
    return x if n == 0 else x + rk_f(x, n - 1)


def test_mutual_recursion_racket_case():
    # f(x, 5) = x^2 + x^3 + x^4
    assert rk_f(5.0, 5) == 775.0
    assert dplus.dplus(rk_f)(5.0, 5).primal == 775.0
    assert grad(rk_f)(5.0, 5) == (585.0, 0)


@define_dplus
def deep_sum(x, n):
    if n == 0:
        return 0.0
    return x + deep_sum(x, n - 1)


def test_recursion_depth_300():
    assert grad(deep_sum)(1.0, 300) == (300.0, 0)


def test_recursion_limited_only_by_primal():
    import sys

    n = sys.getrecursionlimit() - 100
    assert deep_sum(1.0, n) == float(n)  # the primal fits
    assert grad(deep_sum)(1.0, n) == (float(n), 0)


def test_second_derivative_through_if():
    def f(x):
        if x > 0:
            return x * x * x
        return -x * x

    assert grad1(grad1(f))(2.0) == 12.0
    assert grad1(grad1(f))(-2.0) == -2.0


# ---------------------------------------------------------------------------
# methods of user classes


class Poly:
    def __init__(self, coeffs):
        self.coeffs = coeffs

    @define_dplus
    def __call__(self, x):
        s = 0.0
        for c in reversed(self.coeffs):
            s = s * x + c
        return s

    @define_dplus
    def deriv_at(self, x):
        s = 0.0
        for i, c in enumerate(self.coeffs):
            if i > 0:
                s = s + i * c * x ** (i - 1)
        return s

    @define_dplus
    def scaled(self, k):
        return Poly([c * k for c in self.coeffs])

    @staticmethod
    @define_dplus
    def square(x):
        return x * x

    @classmethod
    def unit(cls):
        return cls([1.0])


class Poly2:
    def __init__(self, coeffs):
        self.coeffs = coeffs

    @define_dplus
    def deriv_at(self, x):
        s = 0.0
        for i, c in enumerate(self.coeffs):
            if i > 0:
                s = s + i * c * x ** (i - 1)
        return s


def test_method_called_on_argument():
    p = Poly2([1.0, 2.0, 3.0])
    g = grad(lambda p, x: p.deriv_at(x))(p, 2.0)
    # deriv = c1 + 2 c2 x -> d/dc = [0, 1, 2x], d/dx = 2 c2
    assert g == ({"coeffs": [0.0, 1.0, 4.0]}, 6.0)


def test_method_called_on_callable_object_argument():
    p = Poly([1.0, 2.0, 3.0])
    g = grad(lambda p, x: p.deriv_at(x))(p, 2.0)
    # deriv = c1 + 2 c2 x -> d/dc = [0, 1, 2x], d/dx = 2 c2
    assert g == ({"coeffs": [0.0, 1.0, 4.0]}, 6.0)


def test_method_returning_new_object():
    def f(k, x):
        p = Poly([1.0, 2.0])
        q = p.scaled(k)
        return q.deriv_at(x) * x

    assert grad(f)(3.0, 2.0) == (4.0, 6.0)


def test_staticmethod_define_dplus():
    assert grad(lambda x: Poly.square(x) + Poly.square(2.0 * x))(1.0) == (10.0,)


def test_classmethod_constructor_in_differentiated_code():
    def f(x):
        p = Poly.unit()
        return p.deriv_at(x) + x

    assert grad1(f)(2.0) == 1.0


def test_grad_of_method_through_class():
    p = Poly2([0.0, 0.0, 1.0])
    assert grad(Poly2.deriv_at)(p, 3.0) == ({"coeffs": [0.0, 1.0, 6.0]}, 2.0)


def test_callable_object_called_directly_by_grad():
    p = Poly([1.0, 2.0, 3.0])  # 1 + 2x + 3x^2
    assert grad(p)(2.0) == (14.0,)


class Counter:
    def __init__(self, start):
        self.value = start

    @define_dplus
    def bump(self, k):
        self.value = self.value * k
        return self

    @define_dplus
    def read(self):
        return self.value


def test_method_mutating_self():
    def f(x):
        c = Counter(x)
        c.bump(x).bump(2.0)
        return c.read()

    assert grad1(f)(3.0) == 12.0


def test_method_mutating_argument_object():
    def f(c, k):
        c.bump(k)
        return c.read() * c.value

    g = grad(f)(Counter(2.0), 3.0)
    # (v k)^2 -> d/dv = 2 v k^2, d/dk = 2 v^2 k
    assert g == ({"value": 36.0}, 24.0)


class Base:
    def __init__(self, w):
        self.w = w

    @define_dplus
    def f(self, x):
        return self.w * x


class Derived(Base):
    @define_dplus
    def f(self, x):
        return super().f(x) * x


def test_inheritance_and_super():
    assert grad(lambda w, x: Derived(w).f(x))(2.0, 3.0) == (9.0, 12.0)


class Vec:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __add__(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def __mul__(self, k):
        return Vec(self.x * k, self.y * k)


for _m in (Vec.__add__, Vec.__mul__):
    define_dplus(_m)


def test_operator_overloading_methods():
    def f(a, b):
        v = Vec(a, b) + Vec(b, a) * a
        return v.x * v.y

    check_grad(f, 1.5, -0.5)


def test_undecorated_method_reports_unknown_transform():
    class Plain:
        def __init__(self, w):
            self.w = w

        def f(self, x):
            return self.w * x

    with pytest.raises(dplus.UnknownTransformError, match="Plain.f"):
        grad(lambda w, x: Plain(w).f(x))(2.0, 3.0)


# ---------------------------------------------------------------------------
# transform caching


def test_define_dplus_returns_function_unchanged():
    def plain(x):
        return x * 2.0

    same = define_dplus(plain)
    assert same is plain
    assert plain(3.0) == 6.0


def test_recreated_closures_share_one_transform():
    from dplus.transform import transformer

    def make(k):
        return lambda x: x * k

    grad(make(1.0))(1.0)
    n = len(transformer._COMPILED)
    for k in range(10):
        assert grad(make(float(k)))(2.0) == (float(k),)
    assert len(transformer._COMPILED) == n


def test_closure_over_plus_function_value():
    sq = lift_dplus(lambda v: v * v)
    assert grad(dplus.foldl)(lift_dplus(mul), 1, [2, 3, 4]) == ((), 24.0, [12.0, 8.0, 6.0])
    assert grad(lambda x: dplus.apply(sq, [x]))(3.0) == (6.0,)


# ---------------------------------------------------------------------------
# derivatives of derivatives through closures


def dd_nested_def(x):
    def f(y):
        return y * x

    return f(x)


def test_second_derivative_through_nested_def():
    assert grad1(grad1(dd_nested_def))(2.0) == 2.0


def dd_loop(x):
    y = x
    for _ in range(3):
        y = y * x
    return y


def test_second_derivative_through_loop():
    assert grad1(grad1(dd_loop))(2.0) == 48.0


def grad_inside(x):
    return grad1(lambda y: y * y * x)(x)


def test_grad_called_inside_differentiated_function():
    # d/dx [2 x * x] = 4x; the local lambda's sensitivity reaches x through grad1's closure
    for x in (3.0, -0.5, 1.25):
        assert grad1(grad_inside)(x) == 4 * x


# ---------------------------------------------------------------------------
# more closures


def f_closure_mutates_captured_list(x):
    acc = []

    def add(v):
        acc.append(v * v)

    add(x)
    add(2.0 * x)
    return acc[0] + acc[1]


def test_closure_mutating_captured_list():
    assert grad1(f_closure_mutates_captured_list)(3.0) == 30.0


def f_closure_mutates_captured_dict(x):
    d = {}

    def put(k, v):
        d[k] = v

    put("a", x * x)
    return d["a"]


def test_closure_mutating_captured_dict():
    assert grad1(f_closure_mutates_captured_dict)(3.0) == 6.0


def f_closure_factory(x):
    def make_adder(a):
        return lambda b: a + b * x

    add = make_adder(x * x)
    return add(2.0) + add(3.0)


def test_closure_factory_inside():
    # 2 x^2 + 5 x
    assert grad1(f_closure_factory)(2.0) == 8.0 + 5.0


def f_nonlocal_int_counter(x):
    count = 0

    def inc():
        nonlocal count
        count = count + 1

    for _ in range(3):
        inc()
    return x * count


def test_nonlocal_non_differentiable_counter():
    assert grad1(f_nonlocal_int_counter)(2.0) == 3.0


def f_nonlocal_chain(x):
    y = x

    def a():
        nonlocal y

        def b():
            nonlocal y
            y = y * x

        b()
        b()

    a()
    return y


def test_nonlocal_through_two_levels():
    assert grad1(f_nonlocal_chain)(2.0) == 12.0


def f_closures_in_dict(x):
    fs = {}
    for name, k in (("d", 2.0), ("t", 3.0)):

        def f(v, k=k):
            return v * k

        fs[name] = f
    return fs["d"](x) + fs["t"](x)


def test_closures_stored_in_dict():
    assert grad1(f_closures_in_dict)(2.0) == 5.0


MODULE_LIST = [1.0, 2.0]


def f_reads_module_list(x):
    return x * MODULE_LIST[0] + MODULE_LIST[1]


def test_reading_module_level_list():
    assert grad1(f_reads_module_list)(3.0) == 1.0


def f_local_mutual_recursion(x):
    def f(n):
        return x if n == 0 else x * g(n - 1)

    def g(n):
        return x if n == 0 else x + f(n - 1)

    return f(5)


def test_local_mutual_recursion():
    # x^2 + x^3 + x^4 at 5
    assert f_local_mutual_recursion(5.0) == 775.0
    assert grad1(f_local_mutual_recursion)(5.0) == 585.0


def _outer_list(ys):
    def inner(x):
        return x * 2.0 + len(ys)

    return inner


def test_lift_dplus_backprop_has_no_gen_zero():
    out = lift_dplus(_outer_list([1.0]))(2.0).backprop(1.0, BoxSensitivities())
    assert dplus.gen_zero not in out[0] and out[1] == 2.0
    out = lift_dplus(lambda x, y: x)(1.0, 2.0).backprop(1.0, BoxSensitivities())
    assert out == ((), 1.0, 0.0)
