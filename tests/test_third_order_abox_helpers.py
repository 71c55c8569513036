"""Third derivatives through rules whose backprops hand the box-sensitivity map ``Abox`` to
helpers (iteration, reductions, list methods): the survey of T5 (tests/fuzz/FINDINGS.md).
Each third derivative against central differences of the second, and the second against
differences of the first."""

import math

import pytest

import dplus


def _derivative(f, n):
    for _ in range(n):
        f = dplus.grad1(f)
    return f


def _central(f, x, eps=1e-5):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def through_map(x):
    xs = [x, x * x]
    ys = list(map(lambda v: v * x, xs))
    return ys[0] * ys[1]  # x^5


def through_zip(x):
    xs = [x, x * x]
    ys = [x * x, x]
    return sum(a * b for a, b in zip(xs, ys)) * x  # 2x^4


def through_sum(x):
    xs = [x * x, x, x * x * x]
    return sum(xs) * x


def through_sum_start(x):
    xs = [x * x, x]
    return sum(xs, x * x * x) * x


def through_sorted(x):
    xs = [x * x * x, 2.0 * x, x * x]
    ys = sorted(xs)
    return ys[0] * ys[1] + ys[2] * x


def through_enumerate(x):
    t = 0.0
    for i, v in enumerate([x, x * x, x * x * x]):
        t = t + v * i * x
    return t


def through_reversed(x):
    ys = list(reversed([x, x * x]))
    return ys[0] * ys[1] * x


def through_minmax(x):
    xs = [x * x, x * x * x + 5.0, 3.0 * x]
    return max(xs) * min(xs)


def through_listcopy(x):
    ys = list([x * x, x])
    ys.append(x * x * x)
    return ys[0] * ys[1] * ys[2]


def through_listcomp(x):
    ys = [v * v for v in [x, x * x]]
    return ys[0] * ys[1] * x


def through_dict_items(x):
    d_ = {"a": x * x, "b": x}
    t = 0.0
    for k, v in d_.items():
        t = t + v * v * x
    return t


def through_dict_values(x):
    d_ = {"a": x * x, "b": x}
    return sum(d_.values()) * x * x


def through_nested_list(x):
    m = [[x, x * x], [x * x * x, 1.0]]
    return m[0][1] * m[1][0] * m[0][0]


def through_pop(x):
    xs = [x, x * x, x * x * x]
    v = xs.pop()
    return v * xs[1] * xs[0]


def through_slice(x):
    xs = [x, x * x, x * x * x]
    ys = xs[1:]
    return ys[0] * ys[1] * x


def through_insert(x):
    xs = [x, x * x]
    xs.insert(1, x * x * x)
    return xs[0] * xs[1] * xs[2]


def through_tuple_unpack(x):
    a, b, *rest = [x, x * x, x * x * x, x]
    return a * b * rest[0] * rest[1]


def through_any_all_len(x):
    xs = [x * x, x]
    return len(xs) * xs[0] * xs[1] * x


def through_extend(x):
    ys = [x * 2.0, x * x]
    ys.extend([x * x * x])
    return ys[0] * ys[2] + ys[1] * x


PROGRAMS = [v for k, v in list(globals().items()) if k.startswith("through_")]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [0.7, -1.3])
def test_third_order_through_rules_that_pass_abox_to_helpers(f, x):
    for n in (2, 3):
        got = float(_derivative(f, n)(x))
        want = float(_central(_derivative(f, n - 1), x))
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-5), (n, got, want)
