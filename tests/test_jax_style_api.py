"""The conveniences JAX and autograd users reach for first (issue #23): value_and_grad,
argnums, has_aux, keyword arguments through gradient functions, gradients in the structure
of dataclasses / attrs classes / NamedTuples, and errors at the door."""

from __future__ import annotations

import dataclasses
import math
import typing

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplus
from dplus import ArgumentError, DplusError, grad, grad1, value_and_grad

floats = st.floats(-3.0, 3.0)


def fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


def model(x, y, scale=1.0, *, shift=0.0):
    return math.sin(x) * y * scale + shift * x


@dataclasses.dataclass
class Params:
    w: float
    b: list
    name: str = "p"


@attrs.frozen
class FrozenParams:
    w: float
    inner: Params


class Pair(typing.NamedTuple):
    a: float
    b: float


@dplus.define_dplus
def loss(p, x):
    return p.w * x * x + sum(bi * x for bi in p.b)


@settings(max_examples=25, deadline=None)
@given(floats, floats, floats, floats)
def test_keyword_arguments_pass_through_and_are_not_differentiated(x, y, scale, shift):
    g = grad(model)(x, y, scale=scale, shift=shift)
    assert g[0] == pytest.approx(
        fd(lambda t: model(t, y, scale, shift=shift), x), rel=1e-5, abs=1e-6
    )
    assert g[1] == pytest.approx(math.sin(x) * scale, rel=1e-9, abs=1e-12)
    assert len(g) == 2
    Dg = dplus.D(model)(x, y, scale=scale)(1.0)
    assert Dg == pytest.approx(grad(model)(x, y, scale=scale))
    r = dplus.dplus(model)(x, y, shift=shift)
    assert r.primal == model(x, y, shift=shift)


@settings(max_examples=25, deadline=None)
@given(floats, floats)
def test_value_and_grad_argnums(x, y):
    value, g = value_and_grad(model)(x, y)
    assert value == model(x, y)
    assert g == pytest.approx(math.cos(x) * y)
    value, g = value_and_grad(model, argnums=1)(x, y, scale=2.0)
    assert value == model(x, y, 2.0)
    assert g == pytest.approx(2.0 * math.sin(x))
    _, gs = value_and_grad(model, argnums=(1, 0))(x, y)
    assert gs == pytest.approx((math.sin(x), math.cos(x) * y))
    assert grad(model, argnums=-1)(x, y) == pytest.approx(math.sin(x))
    assert grad(model, argnums=0)(x, y) == grad(model)(x, y)[0]


@settings(max_examples=25, deadline=None)
@given(floats, floats)
def test_has_aux(x, y):
    calls = []

    def with_aux(x, y):
        calls.append(1)
        return x * y * y, {"y": y, "note": "aux"}

    (value, aux), g = value_and_grad(with_aux, has_aux=True)(x, y)
    assert value == x * y * y and aux == {"y": y, "note": "aux"}
    assert g == pytest.approx(y * y)
    g, aux = grad(with_aux, argnums=(0, 1), has_aux=True)(x, y)
    assert g == pytest.approx((y * y, 2 * x * y)) and aux["y"] == y
    assert len(calls) == 2  # one forward pass each


def test_gradients_keep_the_structure_of_the_arguments():
    p = Params(1.5, [0.5, -2.0])
    value, g = value_and_grad(loss)(p, 3.0)
    assert value == loss(p, 3.0)
    assert type(g) is Params and g.w == pytest.approx(9.0) and g.b == pytest.approx([3.0, 3.0])
    assert p == Params(1.5, [0.5, -2.0])  # the argument itself untouched
    fp = FrozenParams(2.0, Params(1.0, [1.0]))
    g = grad(lambda q, x: q.w * loss(q.inner, x), argnums=0)(fp, 2.0)
    assert type(g) is FrozenParams and type(g.inner) is Params
    assert g.w == pytest.approx(loss(fp.inner, 2.0)) and g.inner.w == pytest.approx(8.0)
    assert g.inner.b == pytest.approx([4.0])
    g = grad(lambda t: t.a * t.b, argnums=0)(Pair(2.0, 5.0))
    assert g == Pair(5.0, 2.0)
    nested = {"layers": [Pair(1.0, 2.0), Pair(3.0, 4.0)], "bias": 0.5}
    g = grad(lambda d: sum(p.a * p.b for p in d["layers"]) + d["bias"], argnums=0)(nested)
    assert g == {"layers": [Pair(2.0, 1.0), Pair(4.0, 3.0)], "bias": 1.0}


def test_registered_gradient_structure():
    class Vec:
        def __init__(self, xs):
            self.xs = xs

    dplus.register_gradient_structure(Vec, lambda v, s: Vec(s["xs"]))

    def norm2(v):
        return sum(x * x for x in v.xs)

    g = grad(norm2, argnums=0)(Vec([1.0, 2.0]))
    assert type(g) is Vec and g.xs == [2.0, 4.0]
    assert grad(norm2)(Vec([1.0, 2.0])) == ({"xs": [2.0, 4.0]},)  # rackpropagator style unchanged


def test_errors_at_the_door():
    with pytest.raises(ArgumentError, match="given None"):
        grad(None)
    with pytest.raises(ArgumentError, match="given 3.0"):
        dplus.D(3.0)
    with pytest.raises(ArgumentError, match=r"grad\(model\) was called with arguments"):
        grad(model)()
    with pytest.raises(TypeError):  # ArgumentError is a TypeError too
        grad(model)(1.0, 2.0, 3.0, 4.0)
    with pytest.raises(ArgumentError, match="argnums"):
        value_and_grad(model, argnums="x")
    with pytest.raises(ArgumentError, match="positional argument 5"):
        grad(model, argnums=5)(1.0, 2.0)
    with pytest.raises(DplusError, match="has_aux=True"):
        value_and_grad(lambda x: (x, x))(1.0)

    def raises_inside(x):
        return x + "a"

    with pytest.raises(TypeError) as info:  # the user's own TypeError stays theirs
        grad(raises_inside)(1.0)
    assert not isinstance(info.value, DplusError)


@pytest.mark.parametrize(
    "fn, x, expected",
    [
        (math.sqrt, 0.0, math.inf),
        (math.cbrt, 0.0, math.inf),
        (math.asin, 1.0, math.inf),
        (math.asin, -1.0, math.inf),
        (math.acos, 1.0, -math.inf),
        (math.acosh, 1.0, math.inf),
        (lambda x: x**0.5, 0.0, math.inf),
        (lambda x: math.pow(x, 0.25), 0.0, math.inf),
        (lambda x: x**1.5, 0.0, 0.0),
    ],
)
def test_infinite_derivatives_are_inf_as_in_autograd_and_jax(fn, x, expected):
    assert grad1(fn)(x) == expected
    with dplus.transform.transformer.general_paths_only():
        assert grad1(fn)(x) == expected


def test_atan2_at_the_origin_is_nan():
    g = grad(math.atan2)(0.0, 0.0)
    assert all(math.isnan(v) for v in g)


def test_keyword_arguments_at_second_order():
    x = 0.7
    assert grad1(lambda t: grad(model)(t, 2.0, scale=3.0)[0])(x) == pytest.approx(
        -math.sin(x) * 6.0
    )


def test_jax_style_inside_differentiated_code_nests():
    # (was refused: the JAX-style forms are differentiable again; tests/test_jax_style_nested.py)
    x = 0.5
    inner = lambda t: value_and_grad(model)(t, 2.0)[1]
    expected = (inner(x + 1e-6) - inner(x - 1e-6)) / 2e-6
    assert grad1(inner)(x) == pytest.approx(expected, rel=1e-6)
