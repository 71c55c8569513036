"""check_grad: finite differences over every float in nested arguments, and clear failures."""

from __future__ import annotations

import math
import operator
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplus import Box, DplusError, ProcResult, SensitivityError, register_primitive
from dplus.gradcheck import GradCheckError, check_grad

# ---------------------------------------------------------------------------
# primitives with hand-written (sometimes deliberately wrong) rules


def nested(x, d):
    """x * d[0] + d[2]['w'] ** 2 (d[1] unused)."""
    return x * d[0] + d[2]["w"] ** 2


def _nested_plus(x, d, wrong_w=False):
    def bp(A, Abox):
        w = d[2]["w"]
        sw = A * (3 * w if wrong_w else 2 * w)
        return ((), A * d[0], [A * x, 0.0, {"w": sw}])

    return ProcResult(nested(x, d), bp)


register_primitive(nested, _nested_plus)


def nested_wrong(x, d):
    return nested(x, d)


register_primitive(nested_wrong, lambda x, d: _nested_plus(x, d, wrong_w=True))


def two_wrong(x, y):
    return x * y


# d/dx is off by 1%, d/dy by 50%: the worst is y
register_primitive(
    two_wrong, lambda x, y: ProcResult(x * y, lambda A, Abox: ((), 1.01 * A * y, 1.5 * A * x))
)


def consume(xs):
    """Reads two elements, then overwrites the first (mutating its argument)."""
    v = xs[0] * xs[1]
    xs[0] = 0.0
    return v


register_primitive(
    consume,
    lambda xs: (lambda a, b: ProcResult(consume(xs), lambda A, Abox: ((), [A * b, A * a])))(
        xs[0], xs[1]
    ),
)


def boxed_square(b):
    return b.value * b.value


register_primitive(
    boxed_square, lambda b: ProcResult(boxed_square(b), lambda A, Abox: ((), Box(2 * A * b.value)))
)


Point = namedtuple("Point", "x y")


def point_norm(p):
    return math.hypot(p.x, p.y)


register_primitive(
    point_norm,
    lambda p: ProcResult(
        point_norm(p), lambda A, Abox: ((), Point(A * p.x / point_norm(p), A * p.y / point_norm(p)))
    ),
)


def array_energy(a):
    return float(np.sum(a**2 * np.arange(a.size).reshape(a.shape)))


def _array_energy_plus(a, wrong_at=None):
    def bp(A, Abox):
        g = 2 * A * a * np.arange(a.size).reshape(a.shape)
        if wrong_at is not None:
            g = g.copy()
            g[wrong_at] += 1.0
        return ((), g)

    return ProcResult(array_energy(a), bp)


register_primitive(array_energy, _array_energy_plus)


def array_energy_wrong(a):
    return array_energy(a)


register_primitive(array_energy_wrong, lambda a: _array_energy_plus(a, wrong_at=(1, 2)))


def conj_wrong(z):
    return abs(z) ** 2


# the right sensitivity is 2 * conj(z); this one forgets the conjugate
register_primitive(conj_wrong, lambda z: ProcResult(abs(z) ** 2, lambda A, Abox: ((), 2 * A * z)))


def no_grad_for_list(xs):
    return xs[0]


register_primitive(no_grad_for_list, lambda xs: ProcResult(xs[0], lambda A, Abox: ((), None)))


# ---------------------------------------------------------------------------


def test_returns_the_gradient():
    assert check_grad(math.sin, 1.0) == (math.cos(1.0),)
    g = check_grad(nested, 2.0, [3.0, 5.0, {"w": 4.0}])
    assert g == (3.0, [2.0, 0.0, {"w": 8.0}])


def test_names_the_worst_component_by_path():
    with pytest.raises(GradCheckError) as info:
        check_grad(nested_wrong, 2.0, [3.0, 5.0, {"w": 4.0}])
    err = info.value
    assert isinstance(err, AssertionError) and isinstance(err, DplusError)
    msg = str(err)
    assert "args[1][2]['w']" in msg
    assert "analytic 12.0" in msg and "numeric 8.0" in msg[msg.index("numeric") :][:20]
    assert "1 of 4 components" in msg
    assert "nested_wrong" in msg


def test_the_worst_of_several():
    with pytest.raises(GradCheckError) as info:
        check_grad(two_wrong, 2.0, 3.0)
    msg = str(info.value)
    assert "args[1]" in msg and "2 of 2 components" in msg
    # with a loose tolerance only the 50% error fails
    with pytest.raises(GradCheckError, match=r"args\[1\].*1 of 2"):
        check_grad(two_wrong, 2.0, 3.0, rtol=0.05)
    assert check_grad(two_wrong, 2.0, 3.0, rtol=0.5) == pytest.approx((3.03, 3.0))


def test_ints_and_bools_are_not_perturbed():
    g = check_grad(operator.mul, 2.5, 3)
    assert g == (3.0, 2.5)
    # an int argument with a wrong gradient goes unnoticed: only floats are checked
    assert check_grad(two_wrong, 2.0, 3, rtol=0.05) == pytest.approx((3.0 * 1.01, 3.0))


def test_functions_that_mutate_their_arguments_are_evaluated_on_copies():
    xs = [2.0, 3.0]
    g = check_grad(consume, xs)
    assert g == ([3.0, 2.0],)
    assert xs == [2.0, 3.0]


def test_complex_arguments():
    z = 1.0 + 2.0j
    assert check_grad(abs, z)[0] == pytest.approx(z.conjugate() / abs(z))
    with pytest.raises(GradCheckError, match=r"args\[0\]"):
        check_grad(conj_wrong, z)


def test_numpy_arrays_element_paths():
    a = np.linspace(0.5, 2.0, 6).reshape(2, 3)
    g = check_grad(array_energy, a)
    assert g[0].shape == (2, 3)
    with pytest.raises(GradCheckError, match=r"args\[0\]\[1, 2\]"):
        check_grad(array_energy_wrong, a)


def test_boxes_and_named_tuples():
    assert check_grad(boxed_square, Box(3.0))[0].value == 6.0
    g = check_grad(point_norm, Point(3.0, 4.0))
    assert g[0] == Point(0.6, 0.8)


def test_non_scalar_results_need_a_sensitivity():
    with pytest.raises(SensitivityError):
        check_grad(math.modf, 2.5)
    assert check_grad(math.modf, 2.5, sensitivity=(1.0, 0.0)) == (1.0,)
    S = np.array([1.0, -2.0])
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    y = np.array([0.5, -1.0])
    g = check_grad(operator.matmul, x.T, np.array([1.0, 2.0, 3.0]), sensitivity=S)
    assert g[0].shape == (2, 3)
    assert check_grad(operator.add, x, y, sensitivity=np.ones((3, 2)))[1].tolist() == [3.0, 3.0]


def test_a_dropped_sensitivity_is_reported():
    # the rule returns None for the list; the API fills in zeros, which finite differences refute
    with pytest.raises(GradCheckError, match=r"args\[0\]\[0\]: analytic 0.0, numeric 0.99"):
        check_grad(no_grad_for_list, [1.0, 2.0])


def test_complex_results_are_checked_through_the_real_part():
    import cmath

    assert check_grad(cmath.exp, 0.5 + 0.5j)[0] == pytest.approx(cmath.exp(0.5 + 0.5j))


@settings(max_examples=30, deadline=None)
@given(x=st.floats(-5, 5), y=st.floats(0.5, 5))
def test_agrees_with_the_rules(x, y):
    check_grad(math.atan2, x, y)
    check_grad(operator.truediv, x, y)
    check_grad(math.hypot, x, y, 1.0)


def test_eps_controls_the_step():
    # too large a step: truncation error of sin's third derivative shows
    with pytest.raises(GradCheckError):
        check_grad(math.sin, 1.0, eps=0.1, rtol=1e-6)
    check_grad(math.sin, 1.0, eps=1e-5)


def _plain(x, ys):
    total = 0.0
    for y in ys:
        total = total + x * math.sin(y)
    return total


def test_plain_python_functions_through_the_transformer():
    g = check_grad(_plain, 1.5, [0.5, 1.0, 2.0])
    assert g[0] == pytest.approx(sum(math.sin(v) for v in [0.5, 1.0, 2.0]))
