"""Regression tests of the fuzzer's open trust bugs (tests/fuzz/FINDINGS.md; issues #18 and #26).

Each construct is checked against central finite differences on several inputs, with the fast
paths and under ``general_paths_only()``, and at second order where dplus supports it.
"""

from __future__ import annotations

import pytest

import dplus
from dplus.transformer import general_paths_only

from path_helpers import check_fd, check_first_order, check_second_order, close

BOTH_PATHS = pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])


def on_path(general: bool):
    import contextlib

    return general_paths_only() if general else contextlib.nullcontext()


# ---------------------------------------------------------------------------
# F15: a dict passed as ``**d``, then shrunk, keeps the sensitivity of the keys the call read


def sum_of_keywords_then_pop(d):
    def g(first, *rest, scale=1.0, **kw):
        return sum(kw.values())

    v = g(0.5, **d)
    d.pop("c", 0.5)
    return v


@dplus.define_dplus
def weighted(a, b=2.0, **kw):
    return a * b * b + sum(kw.values())


def double_star_then_pop_and_del(d):
    v = weighted(**d)
    d.pop("b")
    del d["c"]
    return v * d["a"]


def double_star_then_clear_and_refill(d):
    v = weighted(**d)
    d.clear()
    d["a"] = 3.0
    return v + d["a"]


def local_dict_then_pop(x, y, z):
    d = {"a": x, "b": y, "c": z}
    v = weighted(**d)
    d.pop("b")
    return v * x


def star_list_then_pop(xs):
    def g(*a):
        return a[0] * a[1] * a[2]

    v = g(*xs)
    xs.pop()
    del xs[0]
    return v


DICTS = [
    {"a": -1.47, "b": 0.16, "c": -0.40},
    {"a": 0.3, "b": 1.2, "c": -0.7},
    {"a": 2.5, "b": -0.9, "c": 1.1},
]


@BOTH_PATHS
@pytest.mark.parametrize("f", [sum_of_keywords_then_pop, double_star_then_pop_and_del,
                               double_star_then_clear_and_refill])
@pytest.mark.parametrize("d", DICTS)
def test_double_star_dict_shrunk_after_the_call(f, d, general):
    with on_path(general):
        check_fd(f, dict(d))
        grad = dplus.grad(f)(dict(d))[0]
    assert set(grad) == set(d)
    assert all(v != 0.0 for v in grad.values())  # every key the call read has a sensitivity


def test_double_star_popped_key_keeps_its_sensitivity():
    close(dplus.grad(sum_of_keywords_then_pop)(dict(DICTS[0])), ({"a": 1.0, "b": 1.0, "c": 1.0},))


@pytest.mark.parametrize("args", [(0.3, 1.2, -0.7), (-1.1, 0.4, 2.0), (0.9, -0.6, 0.25)])
def test_double_star_local_dict_popped(args):
    check_first_order(local_dict_then_pop, *args)


@BOTH_PATHS
@pytest.mark.parametrize("xs", [[1.0, 2.0, 3.0], [-0.5, 1.5, 0.7], [2.2, -1.3, 0.4]])
def test_star_list_shrunk_after_the_call(xs, general):
    with on_path(general):
        check_fd(star_list_then_pop, list(xs))
