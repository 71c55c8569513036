"""Issue #18: closures, default values and higher-order calls that gave wrong derivatives
(or raised from inside dplus). Each case is checked against central finite differences on
several inputs, with fast paths and with the general path only, and where it makes sense
at second order (the Hessian against differences of the gradient)."""

from __future__ import annotations

import functools
import math

import pytest
from path_helpers import (
    check_first_order,
    check_second_order,
    close,
)

import dplus
from dplus import D, grad, grad1
from dplus.transform.transformer import general_paths_only

INPUTS = [(1.3, 0.7), (-0.4, 2.1), (2.5, -1.2), (0.3, 0.9)]


def check_both_orders(f, inputs=INPUTS):
    for args in inputs:
        check_first_order(f, *args)
        check_second_order(f, *args)


# ---------------------------------------------------------------------------
# 1. a closure made in a nested block reads a variable first assigned in that block


def closure_in_if(x, y):
    if x > 0:
        v = y * 2.0
        h = lambda: v
        x = h()
    return x


def closure_after_early_return(x, y):
    if x < -10.0:
        return x
    v = y * x + 1.0

    def h():
        return v * v

    return h()


def closure_in_loop_body(x, y):
    s = x
    for i in range(3):
        v = y * s
        h = lambda a: a + v  # noqa: B023  (the program under test: late binding is what it checks)
        s = h(x)
    return s


def closure_in_else(x, y):
    if x > 10.0:
        return x
    else:
        w = x * y
        v = w + 1.0
        g = lambda a: a * v
        return g(x)


@pytest.mark.parametrize(
    "f", [closure_in_if, closure_after_early_return, closure_in_loop_body, closure_in_else]
)
def test_closure_in_nested_block_reads_its_variables(f):
    check_both_orders(f)


def test_closure_in_if_reported_case():
    assert grad(closure_in_if)(1.0, 3.0) == (0.0, 2.0)
    with general_paths_only():
        assert grad(closure_in_if)(1.0, 3.0) == (0.0, 2.0)


# ---------------------------------------------------------------------------
# 2. default values computed from differentiable variables


def default_from_variable(x, y):
    def g(p, q=x):
        return p * q

    return g(y)


def lambda_default(x, y):
    g = lambda p, q=x * x: p * q
    return g(y) + g(y, y)


def keyword_only_default(x, y):
    def g(p, *, q=x, r=2.0):
        return p * q * r

    return g(y) + g(x, q=y)


def default_partly_passed(x, y):
    z = x * 3.0

    def g(p, q=z, r=y):
        return p * q + r * z

    return g(y) + g(x, y) + g(x, r=x)


def defaults_made_in_loop(x, y):
    fs = ()
    for i in range(3):

        def g(p, q=x * (i + 1.0)):
            return p * q

        fs = fs + (g,)
    out = 0.0
    for g in fs:
        out = out + g(y)
    return out


def default_in_closure_of_closure(x, y):
    def outer(a):
        def inner(b, c=a * x):
            return b * c

        return inner(y)

    return outer(y)


DEFAULTS = [
    default_from_variable,
    lambda_default,
    keyword_only_default,
    default_partly_passed,
    defaults_made_in_loop,
    default_in_closure_of_closure,
]


@pytest.mark.parametrize("f", DEFAULTS)
def test_default_value_carries_sensitivity(f):
    check_both_orders(f)


def test_default_reported_case():
    assert grad(default_from_variable)(2.0, 3.0) == (3.0, 2.0)


def test_default_sensitivity_in_closure_sensitivity():
    """A nested function's defaults' sensitivities follow its closure variables'."""

    def make(x, y):
        def g(p, q=x):
            return p * q + y

        return g

    g = make(2.0, 5.0)
    gplus = dplus.lift_dplus(make)(2.0, 5.0).primal
    r = gplus(3.0)
    assert r.primal == g(3.0) == 11.0
    assert r.backprop(1.0, dplus.BoxSensitivities()) == ((1.0, 3.0), 2.0)
    r = gplus(3.0, 4.0)  # q passed: the default gets nothing
    assert r.backprop(1.0, dplus.BoxSensitivities()) == ((1.0, dplus.gen_zero), 4.0, 3.0)


def test_top_level_defaults_stay_constants():
    def scaled(x, k=2.0):
        return x * k

    assert grad(scaled)(3.0) == (2.0,)
    assert dplus.lift_dplus(scaled)(3.0).backprop(1.0, dplus.BoxSensitivities()) == ((), 2.0)


# ---------------------------------------------------------------------------
# 3. a display read by a closure is not replaced by its elements


def tuple_read_by_uncalled_lambda(x, y):
    t = (x, 2.0)
    g = lambda p: t[0] * p  # noqa: F841  (the program under test: a lambda never called)
    return x * y + 3.0


def list_read_by_called_lambda(x, y):
    t = [x, y]
    g = lambda p: t[0] * p + t[1]
    return g(y) * x


def tuple_read_by_nested_def(x, y):
    t = (x * y, 2.0)
    a, b = t

    def g(p):
        return t[0] * p

    return g(a) + b


def tuple_as_default(x, y):
    t = (x, y)

    def g(p, q=t):
        return p * q[0] * q[1]

    return g(x)


@pytest.mark.parametrize(
    "f", [tuple_read_by_uncalled_lambda, tuple_read_by_nested_def, tuple_as_default]
)
def test_display_read_by_closure(f):
    check_both_orders(f)


def test_list_read_by_closure():
    # (first order only: derivatives of derivatives of list reads are not supported yet)
    for args in INPUTS:
        check_first_order(list_read_by_called_lambda, *args)


# ---------------------------------------------------------------------------
# 5. keyword arguments at second order (and the first-order cases they rest on)


@dplus.define_dplus
def helper_plain(a, k):
    return a * k * k


@dplus.define_dplus
def helper_default(a, k=1.0):
    return a * a * k


def keyword_to_registered_plain(x, y):
    return helper_plain(x, k=y) * x


def keyword_to_registered_default(x, y):
    return helper_default(y, k=x) + helper_default(x)


def keyword_to_nested_plain(x, y):
    def g(a, k):
        return a * k + k * k

    return g(x, k=y) * y


def keyword_to_nested_keyword_only(x, y):
    def g(a, *, k, m=2.0):
        return a * k * m

    return g(x, k=y) + g(y, m=x, k=x)


def keyword_to_lambda_reordered(x, y):
    g = lambda a, b, c: a * b + c * a
    return g(x, c=y, b=x * y)


def partial_with_bound_keyword(x, y):
    return functools.partial(helper_default, k=x)(y) + functools.partial(helper_plain, k=y)(x)


def partial_with_call_keyword(x, y):
    return functools.partial(helper_plain, x)(k=y) + functools.partial(helper_default, k=2.0)(
        x, k=y
    )


def partial_positional(x, y):
    return functools.partial(helper_plain, x)(y * x)


KEYWORDS = [
    keyword_to_registered_plain,
    keyword_to_registered_default,
    keyword_to_nested_plain,
    keyword_to_nested_keyword_only,
    keyword_to_lambda_reordered,
    partial_with_bound_keyword,
    partial_with_call_keyword,
    partial_positional,
]


@pytest.mark.parametrize("f", KEYWORDS)
def test_keyword_calls_both_orders(f):
    check_both_orders(f)


def test_keyword_reported_cases():
    # (the first order was silently (12, 0): define_dplus's wrapper handed keywords to a
    # plus-function answering by position)
    close(grad(keyword_to_registered_plain)(2.0, 3.0), (2 * 2.0 * 9.0, 2 * 2.0 * 2.0 * 3.0))
    close(
        dplus.hessian(keyword_to_registered_plain)(2.0, 3.0),
        ((2 * 9.0, 4 * 2.0 * 3.0), (4 * 2.0 * 3.0, 2 * 2.0 * 2.0)),
    )
    assert grad1(grad1(lambda x: functools.partial(helper_plain, k=x)(x)))(3.0) == pytest.approx(
        18.0
    )


def test_grad1_of_grad1_with_keyword():
    for x in (0.3, -1.1, 2.0):
        d2 = grad1(grad1(lambda t: helper_plain(t, k=t * t)))(x)  # t^5
        assert d2 == pytest.approx(20 * x**3)


def test_keyword_sensitivities_of_plain_parameters_by_name():
    """lift_dplus(f)(..., k=v) returns the keywords' sensitivities as a dict, also when f has
    plain parameters (the derived plus-function answers by position)."""
    r = dplus.lift_dplus(lambda a, k: a * k)(2.0, k=5.0)
    assert r.primal == 10.0
    assert r.backprop(1.0, dplus.BoxSensitivities()) == ((), 5.0, {"k": 2.0})


def test_numpy_keyword_second_order():
    np = pytest.importorskip("numpy")
    f = lambda x: np.sum(np.sin(x * np.ones(3)), axis=0)
    for x in (0.5, -1.2):
        assert grad1(grad1(f))(x) == pytest.approx(-3 * math.sin(x))


# ---------------------------------------------------------------------------
# 4. a nonlocal writer defined in a nested block (second order); its first-order gradient
# was wrong when the variable it reads was read by nothing else (the cause of bug 1)


def nonlocal_writer_in_if(x, y):
    s = x
    if y > -100:

        def add():
            nonlocal s
            s = s * y

        add()
    return s


def nonlocal_writer_reads_local_of_block(x, y):
    s = x
    t = y
    if y > -100:

        def add():
            nonlocal s
            s = s * t

        add()
    return s


def nonlocal_writer_called_twice(x, y):
    s = x
    if x > -100:
        w = y * 0.5

        def add():
            nonlocal s
            s = s * w + x

        add()
        add()
    return s * y


@pytest.mark.parametrize(
    "f", [nonlocal_writer_in_if, nonlocal_writer_reads_local_of_block, nonlocal_writer_called_twice]
)
def test_nonlocal_writer_in_nested_block(f):
    check_both_orders(f)


def test_nonlocal_writer_reported_hessian():
    assert dplus.hessian(nonlocal_writer_reads_local_of_block)(2.0, 3.0) == ((0.0, 1.0), (1.0, 0.0))
    assert grad(nonlocal_writer_reads_local_of_block)(2.0, 3.0) == (3.0, 2.0)


# ---------------------------------------------------------------------------
# 6. tuple concatenation with a zero sensitivity (gen_zero is the identity of +)


def test_concatenation_with_gen_zero():
    import operator

    r = dplus.lift_dplus(operator.add)(dplus.gen_zero, (1.0, 2.0))
    assert r.primal == (1.0, 2.0)
    assert r.backprop((3.0, 4.0), dplus.BoxSensitivities()) == ((), dplus.gen_zero, (3.0, 4.0))
    r = dplus.lift_dplus(operator.add)((1.0, 2.0), dplus.gen_zero)
    assert r.primal == (1.0, 2.0)
    assert r.backprop((3.0, 4.0), dplus.BoxSensitivities()) == ((), (3.0, 4.0), dplus.gen_zero)


def tuple_concatenations(x, y):
    t = ()
    for i in range(3):
        t = t + (x * i,)
    u = (y,) + t + ()
    return u[2] * u[0] + u[3] * x


def test_tuple_concatenation_both_orders():
    check_both_orders(tuple_concatenations)


# ---------------------------------------------------------------------------
# 7, 8. D and dplus inside differentiated code


def D_of_list_result(v0, v1):
    return D(lambda x: [x * x, 2.0 * x])(1.5)([v0, v1])[0]


def D_of_dict_result(v0, v1):
    return D(lambda x: {"a": x * x, "b": 2.0 * x})(1.5)({"a": v0, "b": v1})[0]


def D_of_tuple_result(v0, v1):
    return D(lambda x: (x * x, 2.0 * x))(1.5)((v0, v1))[0]


@pytest.mark.parametrize("f", [D_of_list_result, D_of_dict_result, D_of_tuple_result])
def test_D_differentiated_with_respect_to_the_sensitivity(f):
    for args in INPUTS:
        check_first_order(f, *args)
        close(grad(f)(*args), (3.0, 2.0))


def test_D_reported_cases():
    assert grad(lambda v0, v1: D(lambda x: [x, 2.0 * x])(1.0)([v0, v1])[0])(1.0, 1.0) == (1.0, 2.0)
    assert grad(lambda v0, v1: D(lambda x: {"a": x, "b": 2.0 * x})(1.0)({"a": v0, "b": v1})[0])(
        1.0, 1.0
    ) == (1.0, 2.0)
    assert grad1(lambda x: D(lambda a: (a * a, a * x))(x)((1.0, 1.0))[0])(1.0) == 3.0


def D_closing_over_argument(x, y):
    return D(lambda a: (a * a, a * x * y))(x)((1.0, y))[0]


def product_and_square(a, b):
    return a * b * a


def pair_result(a):
    return (a * a, 2.0 * a)


def list_result(a):
    return [a * a, 2.0 * a]


def D_of_outside_function(x, y):
    return D(product_and_square)(x, y)(y)[0]


def dplus_backprop_inside(x, y):
    r = dplus.dplus(product_and_square)(x, y)
    return r.backprop(y)[0] + r.primal


def D_of_outside_function_tuple_result(x, y):
    return D(pair_result)(x)((y, x * y))[0]


def dplus_of_list_result_inside(x, y):
    r = dplus.dplus(lambda a: [a * x, a * a])(y)
    return r.backprop([x, 1.0])[0] * x


@pytest.mark.parametrize(
    "f",
    [
        D_closing_over_argument,
        D_of_outside_function,
        dplus_backprop_inside,
        D_of_outside_function_tuple_result,
        dplus_of_list_result_inside,
    ],
)
def test_D_and_dplus_inside(f):
    for args in INPUTS:
        check_first_order(f, *args)


@pytest.mark.parametrize(
    "f", [D_of_outside_function, dplus_backprop_inside, D_of_outside_function_tuple_result]
)
def test_D_and_dplus_inside_second_order(f):
    for args in INPUTS:
        check_second_order(f, *args)


def test_D_of_inside_function_second_order_is_a_clear_error():
    # (as for grad: the third derivative of a function made inside is not supported yet)
    with pytest.raises(dplus.NonDifferentiableError, match="D of a function defined inside"):
        dplus.hessian(D_closing_over_argument)(1.5, 2.0)


def test_grad_with_sensitivity_inside():
    # (raised TypeError: grad's transform inside differentiated code took no keyword)
    f = lambda x, w: grad(lambda a: [a * a, x * a], sensitivity=[w, 1.0])(x)[0]
    for x, w in INPUTS:
        close(f(x, w), 2 * x * w + x)
        close(grad(f)(x, w), (2 * w + 1.0, 2 * x), tol=1e-9)
    g = lambda x, w: grad(lambda a: (a * a, x * a), (w, 1.0))(x)[0]
    for x, w in INPUTS:
        close(grad(g)(x, w), (2 * w + 1.0, 2 * x), tol=1e-9)


def test_backprop_made_outside_is_a_clear_error():
    back = D(lambda x: (x, 2.0 * x))(1.0)
    assert back((1.0, 1.0)) == (3.0,)
    with pytest.raises(
        dplus.NonDifferentiableError, match="made outside the code being differentiated"
    ):
        grad(lambda v0, v1: back((v0, v1))[0])(1.0, 1.0)
