"""JAX-style gradients nest: ``grad(grad(f, argnums=0), argnums=0)``, ``value_and_grad`` inside a
function being differentiated, ``has_aux`` inside, third order - checked against dplus's own
``hessian`` and against central differences of the first derivative, on several points."""

import dataclasses
import math
from typing import NamedTuple

import attrs
import pytest

import dplus
from dplus import grad, value_and_grad

POINTS = [(0.5, 2.0), (-1.3, 0.7), (2.2, -0.4)]


def f(x, y):
    return math.sin(x) * y * y + math.exp(x * y / 4.0)


def central(g, args, i, eps=1e-6):
    up, down = list(args), list(args)
    up[i] += eps
    down[i] -= eps
    return (g(*up) - g(*down)) / (2 * eps)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("i", [0, 1])
@pytest.mark.parametrize("j", [0, 1])
def test_grad_of_grad_with_argnums(point, i, j):
    second = grad(grad(f, argnums=i), argnums=j)(*point)
    assert second == pytest.approx(dplus.hessian(f)(*point)[i][j], rel=1e-9, abs=1e-12)
    assert second == pytest.approx(central(grad(f, argnums=i), point, j), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("point", POINTS)
def test_jacobian_of_grad_with_a_tuple_of_argnums(point):
    jac = dplus.jacobian(grad(f, argnums=(0, 1)))(*point)
    hess = dplus.hessian(f)(*point)
    for row, expected in zip(jac, hess):
        assert row == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("point", POINTS)
def test_value_and_grad_called_inside(point):
    def slope_y(x, y):
        value, g = value_and_grad(f, argnums=1)(x, y)
        return g * value

    expected = tuple(central(slope_y, point, k) for k in range(2))
    assert grad(slope_y)(*point) == pytest.approx(expected, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("point", POINTS)
def test_has_aux_inside(point):
    def loss_and_aux(a, b):
        v = math.sin(a) * b * b
        return v, a * 3.0

    def outer(x, y):
        g, aux = grad(loss_and_aux, argnums=0, has_aux=True)(x, y)
        return g * aux

    expected = tuple(central(outer, point, k) for k in range(2))
    assert grad(outer)(*point) == pytest.approx(expected, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("point", POINTS)
def test_third_order(point):
    third = grad(grad(grad(f, argnums=0), argnums=0), argnums=1)(*point)
    assert third == pytest.approx(
        central(grad(grad(f, argnums=0), argnums=0), point, 1), rel=1e-5, abs=1e-7
    )


def test_tuple_argument_at_second_order():
    def rosen(p):
        return sum(
            100.0 * (p[i + 1] - p[i] ** 2) ** 2 + (1.0 - p[i]) ** 2 for i in range(len(p) - 1)
        )

    p = (1.3, 0.7, 0.8)
    hess_row0 = grad(lambda q: grad(rosen, argnums=0)(q)[0], argnums=0)(p)
    # hessian's result for one tuple argument: [argument][component][argument][component]
    assert hess_row0 == pytest.approx(dplus.hessian(rosen)(p)[0][0][0], rel=1e-9)


@dataclasses.dataclass
class Params:
    w: float
    b: float


@attrs.frozen
class FrozenParams:
    w: float
    b: float


class TupleParams(NamedTuple):
    w: float
    b: float


def _loss(p, x):
    return (p.w * x + p.b) ** 2 * p.w


def _dw(p, x):
    return grad(_loss, argnums=0)(p, x).w


@pytest.mark.parametrize("cls", [Params, FrozenParams])
def test_structured_argument_at_second_order(cls):
    # the gradient in the instance's own structure is a copy whose fields are set with
    # object.__setattr__ (frozen classes too): differentiated again like the rest
    h = 1e-5
    for w, b, x in [(0.8, -0.3, 1.7), (-1.2, 0.4, 0.3)]:
        got_p, got_x = grad(_dw, argnums=(0, 1))(cls(w, b), x)
        assert got_x == pytest.approx((_dw(cls(w, b), x + h) - _dw(cls(w, b), x - h)) / (2 * h))
        want_w = (_dw(cls(w + h, b), x) - _dw(cls(w - h, b), x)) / (2 * h)
        want_b = (_dw(cls(w, b + h), x) - _dw(cls(w, b - h), x)) / (2 * h)
        assert (got_p.w, got_p.b) == pytest.approx((want_w, want_b), rel=1e-6)


def test_named_tuple_argument_at_second_order_is_refused_not_wrong():
    with pytest.raises(dplus.DplusError):
        grad(_dw, argnums=1)(TupleParams(0.8, -0.3), 1.7)


def test_sensitivity_and_argnums_together_inside_is_an_argument_error():
    def bad(x):
        return grad(f, 1.0, argnums=0)(x, 2.0)

    with pytest.raises(dplus.ArgumentError):
        grad(bad)(0.5)
