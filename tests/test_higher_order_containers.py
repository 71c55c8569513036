"""Second and higher order through lists, dicts, boxes, objects and their mutation (issue #20):
the box-sensitivity map of one order is differentiated by the next (dplus/higher/box_map.py, dplus/higher/stashes.py).
Each case compares the k-th derivative with central differences of the (k-1)-th, computed by
dplus (checked itself at first order), at several points, with fast paths and without."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dplus
from dplus import grad, grad1, hessian
from dplus.transform.transformer import general_paths_only

POINTS = (0.7, 1.2, 1.9)


def nth(f, k):
    for _ in range(k):
        f = grad1(f)
    return f


def check_order(f, k, points=POINTS, h=1e-5, rtol=1e-6, atol=1e-7):
    for s in points:
        value = nth(f, k)(s)
        lower = nth(f, k - 1)
        fd = (lower(s + h) - lower(s - h)) / (2 * h)
        assert abs(value - fd) <= atol + rtol * max(abs(value), abs(fd)), (s, value, fd)
        with general_paths_only():
            assert nth(f, k)(s) == pytest.approx(value, rel=1e-12, abs=1e-12)


def list_mutation(s):
    L = [s, s * s]
    L[0] = L[0] * L[1]
    L.append(math.sin(s))
    return L[0] + L[2] * L[1]


def dict_mutation(s):
    d = {"a": s, "b": s * s}
    d["c"] = d["a"] * d["b"]
    return d["c"] * d["a"] + d.pop("b")


def list_built_in_loop(s):
    L = []
    for i in range(3):
        L.append(s * i + s * s)
    t = 0.0
    for i in range(len(L)):
        t = t + L[i] * L[i]
    return t


def box_rebound(s):
    b = dplus.box(s)
    dplus.set_box(b, dplus.unbox(b) * s)
    return dplus.unbox(b) * s


class Params:
    def __init__(self, a):
        self.a = a


def object_attributes(s):
    p = Params(s)
    p.a = p.a * s
    p.b = p.a + s
    return p.a * p.b


def nested_lists(s):
    L = [[s, s * s], [s * 3.0]]
    L[0][1] = L[0][1] * L[1][0]
    return L[0][0] * L[0][1] + L[1][0]


def nonlocal_total(s):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v * s

    add(s)
    add(s * s)
    return total


def list_unpacked(s):
    xs = [s, 2 * s, s * s]
    a, b, c = xs
    return a * b * c + sum((a, b))


def list_slice(s):
    L = [s, s * s, s * s * s]
    return L[1:][0] * L[-1]


def loop_over_list(s):
    xs = [s, s * s, 3.0]
    t = 0.0
    for v in xs:
        t = t + v * v * v
    return t


def loop_over_array(s):
    a = np.array([s, 2.0]) * s
    t = 0.0
    for v in a:
        t = t + v * v * v
    return t


def sum_of_list(s):
    return sum([s * i for i in range(3)]) ** 2


def dict_argument(s):
    return (lambda d: d["a"] * d["b"])({"a": s, "b": s * s})


def dict_of_lists(s):
    d = {"a": [s, s * s], "b": (s, 3.0)}
    return sum(d["a"]) * d["b"][0] + sum(d["b"])


def sum_of_tuple(s):
    return sum((s * s, s, 2.0 * s)) ** 2


def _product_of_box_list(bb, w):
    v = dplus.unbox(bb)
    return v[0] * v[1] * w


def gradient_of_a_box_argument(s):
    g = grad(_product_of_box_list)(dplus.box([s, s * s]), s)  # (Box([s * s, s]), s ** 3)
    return g[0].value[1] * s + g[1]


SECOND_AND_THIRD = [
    list_mutation,
    dict_mutation,
    list_built_in_loop,
    box_rebound,
    nested_lists,
    nonlocal_total,
    list_unpacked,
    loop_over_list,
    loop_over_array,
    dict_argument,
    dict_of_lists,
    sum_of_tuple,
]
SECOND = SECOND_AND_THIRD + [object_attributes, list_slice, sum_of_list, gradient_of_a_box_argument]


@pytest.mark.parametrize("f", SECOND, ids=lambda f: f.__name__)
def test_second_order_through_containers(f):
    check_order(f, 2)


@pytest.mark.parametrize("f", SECOND_AND_THIRD, ids=lambda f: f.__name__)
def test_third_order_through_containers(f):
    check_order(f, 3, points=(0.7, 1.3))


def test_hessian_of_a_function_of_a_list():
    def g(xs):
        return xs[0] ** 2 * xs[1] + math.sin(xs[1])

    def cubes(p):
        s = 0.0
        for v in p:
            s = s + v * v * v
        return s

    for x0, x1 in ((0.5, 2.0), (-1.3, 0.4)):
        block = hessian(g)([x0, x1])[0]  # one argument, a list of 2: rows k, columns l
        rows = [[block[k][0][l] for l in range(2)] for k in range(2)]
        np.testing.assert_allclose(rows, [[2 * x1, 2 * x0], [2 * x0, -math.sin(x1)]], rtol=1e-12)
        assert hessian(cubes)([x0, x1])[0] == [([6 * x0, 0.0],), ([0.0, 6 * x1],)]


def test_gradient_of_a_gradient_taken_inside_of_a_list():
    def g(xs):
        return xs[0] * xs[0] * xs[1]

    def h(a, b):
        return grad(g)([a, b])[0][0]  # 2ab

    for a, b in ((0.5, 2.0), (1.5, -0.3)):
        assert grad(h)(a, b) == pytest.approx((2 * b, 2 * a), rel=1e-12)


X = np.array([0.3, 0.7, 1.1])


def test_hessian_of_a_function_of_an_array_has_shape_x_x():
    for x in (X, np.array([1.4, -0.2, 0.9])):
        ((H,),) = hessian(lambda a: np.sum(np.sin(a) * a))(x)
        assert H.shape == (3, 3)
        np.testing.assert_allclose(H, np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-12)
        (H2, Hb), (Hb2, hbb) = hessian(lambda a, b: np.sum(np.sin(a) * a) * b)(x, 2.0)
        np.testing.assert_allclose(H2, 2 * H, rtol=1e-12)
        np.testing.assert_allclose(Hb, np.sin(x) + x * np.cos(x), rtol=1e-12)
        np.testing.assert_allclose(Hb2, Hb, rtol=1e-12)
        assert hbb == 0.0


ISSUE_CASES = {
    "concatenate": lambda s2: np.sum(np.concatenate([X * s2, X * s2 * s2]) ** 2),
    "vstack": lambda s2: np.sum(np.vstack([X * s2, X * s2 * s2]) ** 2),
    "hstack": lambda s2: np.sum(np.hstack([X * s2, X * s2 * s2]) ** 3),
    "sort": lambda s2: np.sum(np.sort(X * s2 - s2 * s2) ** 3),
    "einsum_trace": lambda s2: np.einsum("ii->", np.outer(X * s2, X * s2) ** 2),
    "array_of_list": lambda s2: np.sum(np.array([s2, 2.0]) ** 3 * s2),
    "array_of_tuple": lambda s2: np.sum(np.array((s2 * s2, 2.0)) ** 3),
}


@pytest.mark.parametrize("name", sorted(ISSUE_CASES))
def test_numpy_rules_whose_reverse_was_refused_at_second_order(name):
    check_order(ISSUE_CASES[name], 2)


def test_dot_at_third_order():
    check_order(lambda s: np.dot(X * s, X * s * s), 3)
    assert nth(lambda s: np.dot(X * s, X * s * s), 3)(1.2) == pytest.approx(
        6 * np.dot(X, X), rel=1e-12
    )
