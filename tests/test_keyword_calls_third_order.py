"""K3: calls with keyword arguments, differentiated to the third order.

Each program is checked at orders 1, 2 and 3, each order against central differences of the
order below (itself checked the same way), at several points. The mechanisms fixed:

- the tower's call of a transform with keywords went through ``runtime.calls.call``, whose
  rule at the next order takes a plus-function for one that stands for itself (made inside
  transformed code), so the order-3 code got the order-2 result's primal (raw
  ``AttributeError``/``TypeError``); it goes through ``call_plus`` now, as without keywords;
- rule code building keyword sensitivities as plain dicts (mutable values one order up,
  whose sensitivities live in ``Abox``) lost terms; they are ``KeywordDict`` values, and
  reading one (``[k]``, ``get``, ``items``, ``values``, ``dict(...)``) returns its
  sensitivity as a value;
- a keyword named like a positional-only parameter (``def va(f, /, **kw)``; the tower's
  own ``_call_tower(f, /, *args, **kwargs)``) went to that parameter's sensitivity.
"""

import functools
import math
import types

import numpy as np
import pytest

import dplus

POINTS = [0.7, -1.3, 1.9]


def _derivative(f, n):
    for _ in range(n):
        f = dplus.grad1(f)
    return f


def _central(f, x, eps=1e-5):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def check_orders(f, x, orders=3):
    for n in range(1, orders + 1):
        got = float(_derivative(f, n)(x))
        want = float(_central(_derivative(f, n - 1), x))
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-5), (n, got, want)


def built_dict(x):
    return dict(a=x * x)["a"] * x


def built_dicts_two_keys(x):
    return dict(a=x * x, b=x)["a"] * dict(a=x * x, b=x)["b"] * x


def sorted_with_key(x):
    ys = sorted([x, 2 * x, x * x], key=lambda v: -v)
    return ys[0] * ys[1] * ys[2]


def nested_keyword_only(x):
    def h(u, *, scale):
        return u * u * scale

    return h(x, scale=x * x)


def nested_keyword_default(x):
    def h(u, *, s=3.0):
        return u * s * s

    return h(x * x, s=x) + h(x)


@dplus.define_dplus
def _defined(a, b=1.0):
    return a * a * b * b


def defined_keyword(x):
    return _defined(x, b=x * x)


def double_star_parameter(x):
    def va(first, **kw):
        return first * sum(kw.values()) * kw["extra"]

    return va(x, extra=x * x)


def double_star_two_keys(x):
    def va(**kw):
        return kw["e"] * kw["f"] * kw["e"]

    return va(e=x * x, f=x)


def keyword_named_like_positional_only(x):
    def va(f, /, **kw):
        return f * kw["f"] * kw["g"]

    return va(x, f=x * x, g=x)


def array_sum_axis(x):
    a = np.array([[x, x * x], [2.0 * x, x * x * x]])
    return float(np.sum(np.sum(a, axis=0) * x))


@dplus.define_dplus
def _scaled(a, b=1.0, c=2.0):
    return a * b * b * c


def double_star_spread(x):
    kw = {"b": x * x, "c": x}
    return _scaled(x, **kw)


class _Scaler:
    def __init__(self, w):
        self.w = w

    @dplus.define_dplus
    def apply(self, u, p=1.0):
        return self.w * u * p * p


def method_keyword(x):
    return _Scaler(x).apply(x, p=x)


PROGRAMS = [
    double_star_spread,
    method_keyword,
    built_dict,
    built_dicts_two_keys,
    sorted_with_key,
    nested_keyword_only,
    nested_keyword_default,
    defined_keyword,
    double_star_parameter,
    double_star_two_keys,
    keyword_named_like_positional_only,
    array_sum_axis,
]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", POINTS)
def test_keyword_calls_to_the_third_order(f, x):
    check_orders(f, x)


def test_exact_third_derivatives_through_keywords():
    # polynomials: x**3, x**4, x**5, x**6 whose third derivatives are known exactly
    d3 = lambda f: _derivative(f, 3)
    for x in POINTS:
        assert d3(built_dict)(x) == pytest.approx(6.0, rel=1e-12)
        assert d3(nested_keyword_only)(x) == pytest.approx(24.0 * x, rel=1e-12)
        assert d3(double_star_parameter)(x) == pytest.approx(60.0 * x * x, rel=1e-12)
        assert d3(defined_keyword)(x) == pytest.approx(120.0 * x**3, rel=1e-12)


def test_keyword_named_like_positional_only_first_order():
    # it went to the positional-only parameter's sensitivity at the first order too
    # (4 x**3: 1.372 at 0.7; it gave 1.8522)
    assert dplus.grad1(keyword_named_like_positional_only)(0.7) == pytest.approx(4 * 0.7**3)


def _k(a, b=1.0, c=2.0):
    return a * b * b * c


def _partial_keyword(x):
    g = functools.partial(_k, c=x * x)
    return g(x, b=x)


def _namespace(x):
    s = types.SimpleNamespace(a=x * x, b=x)
    return s.a * s.b * x


@pytest.mark.parametrize("f", [_partial_keyword, _namespace], ids=lambda f: f.__name__)
def test_keyword_calls_refused_at_the_third_order_in_user_terms(f):
    # right at the first two orders, or refused there; at the third, a DplusError (no raw
    # AttributeError as before)
    for n in (1, 2):
        try:
            check_orders(f, 0.7, orders=n)
        except dplus.DplusError:
            pass
    try:
        got = _derivative(f, 3)(0.7)
    except dplus.DplusError:
        return
    assert math.isclose(got, _central(_derivative(f, 2), 0.7), rel_tol=1e-5)
