"""Derivatives of derivatives and the derived helpers, against closed forms and finite differences."""

import math
from operator import mul

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplus
from dplus import D, grad, grad1, hessian, hvp, jacobian, jvp

floats = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False, allow_infinity=False).filter(
    lambda v: v == 0.0 or abs(v) > 1e-6
)


def close(a, b, rel=1e-9, abs_=1e-9):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)


def poly(x):
    return 3.0 * x**4 + 2.0 * x**3 - x + 1.0


def loop_if_closure(x):
    scale = 2.0
    h = lambda t: t * scale
    s = 0.0
    for i in range(3):
        if x > 0:
            s = s + h(x) * x
        else:
            s = s - x * x * i
    return s


@settings(max_examples=30, deadline=None)
@given(floats)
def test_first_and_second_order_closed_forms(x):
    assert close(grad1(math.sin)(x), math.cos(x))
    assert close(grad1(grad1(math.sin))(x), -math.sin(x))
    assert close(grad1(math.exp)(x), math.exp(x))
    assert close(grad1(grad1(math.exp))(x), math.exp(x))
    assert close(grad1(poly)(x), 12.0 * x**3 + 6.0 * x**2 - 1.0)
    assert close(grad1(grad1(poly))(x), 36.0 * x**2 + 12.0 * x)


@settings(max_examples=30, deadline=None)
@given(floats.filter(lambda v: abs(v) > 1e-3))
def test_loop_if_and_closure_to_second_order(x):
    # x > 0: s = 3 * 2 x^2 = 6 x^2 ; x <= 0: s = -(0 + 1 + 2) x^2 = -3 x^2
    if x > 0:
        assert close(grad1(loop_if_closure)(x), 12.0 * x)
        assert close(grad1(grad1(loop_if_closure))(x), 12.0)
    else:
        assert close(grad1(loop_if_closure)(x), -6.0 * x)
        assert close(grad1(grad1(loop_if_closure))(x), -6.0)


def test_spec_examples_of_nesting():
    assert grad1(grad1(math.cos))(0.0) == -1.0
    assert D(grad(mul))(3.0, 4.0)((1.0, 0.0)) == (0.0, 1.0)


def test_gradient_of_a_function_that_uses_grad_inside():
    # the inner function closes over x: its sensitivity goes back through grad1's closure
    f = lambda x: grad1(lambda y: y * y * x)(3.0) * x  # d/dy (y^2 x) = 2 y x ; times x: 6 x^2
    for x in (1.5, -0.3, 2.0):
        assert close(grad1(f)(x), 12.0 * x)


def test_second_derivative_of_a_function_that_uses_grad_of_a_local_function_says_so():
    f = lambda x: grad1(lambda y: y * y * x)(3.0) * x
    with pytest.raises(
        dplus.NonDifferentiableError, match="define the function it differentiates outside"
    ):
        grad1(grad1(f))(1.5)


def test_second_order_through_a_list_valued_rule_is_not_silently_zero():
    def myprod(xs):
        return xs[0] * xs[1] * xs[2]

    dplus.register_primitive(
        myprod,
        lambda xs: dplus.ProcResult(
            myprod(xs), lambda A, B: ((), [A * xs[1] * xs[2], A * xs[0] * xs[2], A * xs[0] * xs[1]])
        ),
    )
    assert grad(lambda xs: grad(myprod)(xs)[0][0])([1.0, 2.0, 4.0]) == ([0.0, 4.0, 2.0],)


def test_jacobian_of_a_vector_function():
    f = lambda x, y: [x * y, math.sin(x) + y * y]
    J = jacobian(f)(2.0, 3.0)
    assert J[0] == (3.0, 2.0)
    assert close(J[1][0], math.cos(2.0)) and J[1][1] == 6.0


def test_jacobian_of_a_scalar_function_is_the_gradient():
    assert jacobian(lambda x, y: x * y)(2.0, 3.0) == (3.0, 2.0)


@settings(max_examples=20, deadline=None)
@given(floats, floats)
def test_hessian_against_closed_form(x, y):
    g = lambda x, y: x * x * y + math.sin(y)
    H = hessian(g)(x, y)
    assert close(H[0][0], 2.0 * y) and close(H[0][1], 2.0 * x)
    assert close(H[1][0], 2.0 * x) and close(H[1][1], -math.sin(y))


@settings(max_examples=20, deadline=None)
@given(floats, floats, floats, floats)
def test_hvp_equals_hessian_times_vector(x, y, v0, v1):
    g = lambda x, y: x * x * y + math.sin(y) * x
    H = hessian(g)(x, y)
    hv = hvp(g)((x, y), (v0, v1))
    assert close(hv[0], H[0][0] * v0 + H[0][1] * v1)
    assert close(hv[1], H[1][0] * v0 + H[1][1] * v1)


@settings(max_examples=20, deadline=None)
@given(floats, floats, floats, floats)
def test_jvp_against_finite_differences(x, y, tx, ty):
    f = lambda x, y: (x * y, math.exp(x) - y)
    primal, tangent = jvp(f)((x, y), (tx, ty))
    assert primal == f(x, y)
    h = 1e-6
    plus = f(x + h * tx, y + h * ty)
    minus = f(x - h * tx, y - h * ty)
    for t, p, m in zip(tangent, plus, minus):
        assert close(t, (p - m) / (2 * h), rel=1e-5, abs_=1e-6)


def test_closure_returned_from_a_differentiated_function_is_a_plus_function():
    def make(y):
        return lambda x: x * y

    r = dplus.lift_dplus(make)(3.0)
    inner = r.primal  # the plus-function of the closure (SPEC section 1)
    r2 = inner(2.0)
    assert r2.primal == 6.0
    assert r2.backprop(1.0, dplus.BoxSensitivities()) == ((2.0,), 3.0)  # (d/dy,), d/dx


def test_rule_code_never_calls_a_registered_transform_directly():
    """Rule code that calls another rule's transform as a plain function breaks the next
    order (inside differentiated code a registered transform stands for itself): such
    calls go through ``apply_transform`` / ``call``. Checked over every rule module."""
    import ast
    import importlib
    import inspect

    from dplus.runtime.registry import is_registered_transform

    modules = [
        "dplus.primitives." + m
        for m in (
            "operators",
            "operator_operands",
            "operator_sequences",
            "operator_builders",
            "math",
            "cmath",
            "builtins",
            "builtin_iteration",
            "builtin_eval",
            "containers",
            "container_reads",
            "container_writes",
            "container_displays",
            "container_methods",
            "functional",
            "statistics",
            "numpy",
            "numpy_ufuncs",
            "numpy_products",
            "numpy_arrays",
            "numpy_table",
            "_iterables",
        )
    ]
    modules += [
        "dplus.runtime.core",
        "dplus.runtime.handover",
        "dplus.runtime.fold",
        "dplus.runtime.calls",
        "dplus.runtime.routers",
        "dplus.runtime.arguments",
        "dplus.runtime.list_writes",
        "dplus.api",
        "dplus.higher.transform_of_plus",
        "dplus.higher.call_rules",
        "dplus.higher.sensitivity_rules",
        "dplus.higher.argument_rules",
        "dplus.higher.iterable_rules",
    ]
    offenders = []
    for name in modules:
        mod = importlib.import_module(name)
        tree = ast.parse(inspect.getsource(mod))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                target = getattr(mod, node.func.id, None)
                if target is not None and is_registered_transform(target):
                    offenders.append(f"{name}:{node.lineno} calls {node.func.id}(...)")
    assert not offenders, offenders
