"""Every rule family at second order: the Hessian-vector product dplus computes (reverse over
reverse, through each rule's backprop differentiated again) against central differences of
dplus's first-order gradient, on random inputs and a random direction (the model is autograd's
``check_grads`` at order 2). The first-order gradients are checked against finite differences
by the rule families' own tests; here their derivatives are."""

from __future__ import annotations

import cmath
import functools
import itertools
import math
import operator
import random
import statistics
import zlib

import numpy as np
import pytest

import dplus
from dplus.transform.transformer import general_paths_only


def _flat(v):
    if isinstance(v, (float, int)) and not isinstance(v, bool):
        return [float(v)]
    if isinstance(v, np.ndarray):
        return [float(e) for e in np.ravel(v)]
    if isinstance(v, (list, tuple)):
        return [e for x in v for e in _flat(x)]
    if isinstance(v, dict):
        return [e for k in sorted(v) for e in _flat(v[k])]
    return [0.0] if v is None else [float(v)]


def _moved(args, direction, h):
    def move(a, d):
        if isinstance(a, np.ndarray):
            return a + h * d
        if isinstance(a, list):
            return [move(x, y) for x, y in zip(a, d)]
        if isinstance(a, tuple):
            return tuple(move(x, y) for x, y in zip(a, d))
        return a + h * d

    return tuple(move(a, d) for a, d in zip(args, direction))


def _random_like(a, rng):
    if isinstance(a, np.ndarray):
        return np.array([rng.uniform(-1, 1) for _ in range(a.size)]).reshape(a.shape)
    if isinstance(a, list):
        return [_random_like(x, rng) for x in a]
    if isinstance(a, tuple):
        return tuple(_random_like(x, rng) for x in a)
    return rng.uniform(-1, 1)


def check_hvp(f, args, seed=0, h=1e-5, rtol=1e-5, atol=1e-6):
    """dplus.hvp(f) along a random direction against differences of dplus.grad(f)."""
    rng = random.Random(seed)
    direction = _random_like(args, rng)
    hv = _flat(dplus.hvp(f)(args, direction))
    g = dplus.grad(f)
    fd = [
        (u - d) / (2 * h)
        for u, d in zip(
            _flat(g(*_moved(args, direction, h))), _flat(g(*_moved(args, direction, -h)))
        )
    ]
    assert len(hv) == len(fd)
    for a, b in zip(hv, fd):
        assert abs(a - b) <= atol + rtol * max(abs(a), abs(b)), (hv, fd)
    return hv


def check_both_paths(f, args, seed=0):
    fast = check_hvp(f, args, seed)
    with general_paths_only():
        general = check_hvp(f, args, seed)
    np.testing.assert_allclose(fast, general, rtol=1e-9, atol=1e-12)


def _points(n, seed, lo=0.3, hi=1.7):
    rng = random.Random(seed)
    return [tuple(rng.uniform(lo, hi) for _ in range(n)) for _ in range(3)]


MATH = {
    "sin": lambda x: (math.sin(x)) * x,
    "cos": lambda x: (math.cos(x)) * x,
    "tan": lambda x: (math.tan(x)) * x,
    "exp": lambda x: (math.exp(x)) * x,
    "log": lambda x: (math.log(x)) * x,
    "log2": lambda x: (math.log2(x)) * x,
    "log10": lambda x: (math.log10(x)) * x,
    "log1p": lambda x: (math.log1p(x)) * x,
    "expm1": lambda x: (math.expm1(x)) * x,
    "sqrt": lambda x: (math.sqrt(x)) * x,
    "tanh": lambda x: (math.tanh(x)) * x,
    "sinh": lambda x: (math.sinh(x)) * x,
    "cosh": lambda x: (math.cosh(x)) * x,
    "asin": lambda x: (math.asin(x / 2)) * x,
    "acos": lambda x: (math.acos(x / 2)) * x,
    "atan": lambda x: (math.atan(x)) * x,
    "asinh": lambda x: (math.asinh(x)) * x,
    "acosh": lambda x: (math.acosh(1 + x)) * x,
    "atanh": lambda x: (math.atanh(x / 2)) * x,
    "erf": lambda x: (math.erf(x)) * x,
    "erfc": lambda x: (math.erfc(x)) * x,
    "lgamma": lambda x: (math.lgamma(x)) * x,
    "gamma": lambda x: (math.gamma(x)) * x,
    "fabs": lambda x: (math.fabs(x)) * x,
    "pow": lambda x: (math.pow(x, 2.5)) * x,
    "degrees": lambda x: (math.degrees(x)) * x,
    "radians": lambda x: (math.radians(x)) * x,
    "cbrt": lambda x: (math.cbrt(x) if hasattr(math, "cbrt") else x ** (1 / 3)) * x,
    "exp2": lambda x: (math.exp2(x) if hasattr(math, "exp2") else 2**x) * x,
}
MATH2 = {
    "atan2": lambda x, y: math.atan2(x, y),
    "hypot": lambda x, y: math.hypot(x, y),
    "pow2": lambda x, y: math.pow(x, y),
    "copysign": lambda x, y: math.copysign(x, y) * y,
    "fmod": lambda x, y: math.fmod(x * 3, y) * x,
    "dist": lambda x, y: math.dist((x, y), (0.1, 0.2)),
    "prod": lambda x, y: math.prod([x, y, x]),
    "fsum": lambda x, y: math.fsum([x * y, x]) ** 2,
    "sumprod": lambda x, y: (
        (math.sumprod((x, y), (y, x)) if hasattr(math, "sumprod") else 2 * x * y) ** 2
    ),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_second_order(name):
    f = MATH[name]
    for k, (x,) in enumerate(_points(1, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, (x,), seed=k)


@pytest.mark.parametrize("name", sorted(MATH2))
def test_math_two_arguments_second_order(name):
    f = MATH2[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


def _augmented(x, y):
    t = x
    t *= y
    t += x * x
    t /= y + 1.0
    t **= 2
    return t


OPERATORS = {
    "add": lambda x, y: (x + y) ** 2,
    "sub": lambda x, y: (x - y) ** 3,
    "mul": lambda x, y: x * y * x,
    "truediv": lambda x, y: x / y,
    "pow": lambda x, y: x**y,
    "pow_const": lambda x, y: x**3 + y**-2,
    "neg": lambda x, y: -(x * y) * x,
    "abs": lambda x, y: abs(x - 2.0) * y,
    "floordiv": lambda x, y: (x // 0.5) * y * y,
    "mod": lambda x, y: (x * 3) % y * x,
    "operator_mul": lambda x, y: operator.mul(x, operator.add(x, y)),
    "operator_pow": lambda x, y: operator.pow(x, y),
    "operator_truediv": lambda x, y: operator.truediv(y, x) * y,
    "augmented": _augmented,
    "compare": lambda x, y: x * y if x < y else x / y,
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operators_second_order(name):
    f = OPERATORS[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


BUILTINS = {
    "sum_list": lambda x, y: sum([x * y, x, y * y]) ** 2,
    "sum_tuple": lambda x, y: sum((x * y, x)) ** 2,
    "sum_start": lambda x, y: sum([x, y], x * y) ** 2,
    "max_list": lambda x, y: max([x * x, y, 0.1]) * x,
    "min_args": lambda x, y: min(x * y, y + 1.0) ** 2,
    "max_key": lambda x, y: max([x, y], key=lambda v: -v) * x * y,
    "abs": lambda x, y: abs(x - y) * x,
    "pow": lambda x, y: pow(x, y) * x,
    "round": lambda x, y: round(x) * x * y,
    "float": lambda x, y: float(x * y) ** 2,
    "sorted": lambda x, y: sorted([x * y, y, x])[0] * sorted((x, y))[1] * x,
    "reversed": lambda x, y: [v * v for v in reversed([x, y])][0] * y,
    "zip": lambda x, y: sum(a * b for a, b in zip([x, y], [y, x * x])) ** 2,
    "enumerate": lambda x, y: sum([i * v * v for i, v in enumerate([x, y, x * y])]),
    "list_of_map": lambda x, y: sum(list(map(lambda v: v * v, [x, y]))) * x,
    "divmod": lambda x, y: divmod(x * 3, y)[1] * x,
}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtins_second_order(name):
    f = BUILTINS[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


def _list_methods(x, y):
    L = [x, y]
    L.append(x * y)
    L.extend([y * y, x])
    L.insert(1, x + y)
    v = L.pop()
    L.reverse()
    L[0] = L[0] * v
    return L[0] * L[2] + L[-1] * sum(L[1:3])


def _dict_methods(x, y):
    d = {"a": x, "b": y}
    d["c"] = d["a"] * d["b"]
    d.update({"e": x * x})
    e = d.pop("e")
    t = 0.0
    for k, v in d.items():
        t = t + v * e
    return t + d.get("c", 0.0) * d.setdefault("b", 1.0)


def _nested_containers(x, y):
    rows = [[x, y], [x * y, 1.0]]
    rows[1][1] = rows[0][0] * rows[1][0]
    table = {"rows": rows, "w": (x, y)}
    return table["rows"][1][1] * table["w"][1] + len(table["rows"]) * x


class _Point:
    pass


def _box_and_object(x, y):
    b = dplus.box(x)
    dplus.set_box(b, dplus.unbox(b) * y)
    p = _Point()
    p.v = dplus.unbox(b)
    p.v = p.v * x
    return p.v * y


CONTAINERS = {
    "list_methods": _list_methods,
    "dict_methods": _dict_methods,
    "nested": _nested_containers,
    "tuple_unpack": lambda x, y: (lambda a, b: a * b * b)(*(x, y)),
    "list_unpack": lambda x, y: (lambda L: L[0] * L[1] ** 2)([x, y]),
    "slice": lambda x, y: sum([x, y, x * y][1:]) ** 2,
    "comprehension": lambda x, y: sum([v * w for v in (x, y) for w in [x, y]]) * x,
    "dict_comprehension": lambda x, y: (lambda d: d[0] * d[1] * x)(
        {i: v * v for i, v in enumerate([x, y])}
    ),
    "box_and_object": _box_and_object,
}


@pytest.mark.parametrize("name", sorted(CONTAINERS))
def test_containers_second_order(name):
    f = CONTAINERS[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


FUNCTIONAL = {
    "reduce": lambda x, y: functools.reduce(lambda a, b: a * b + a, [x, y, x], 1.0),
    "reduce_reads_variable": lambda x, y: functools.reduce(lambda a, b: a * b * y, (x, y, x)),
    "partial": lambda x, y: functools.partial(lambda a, b: a * b * b, x)(y),
    "accumulate": lambda x, y: list(itertools.accumulate([x, y, x * y], operator.mul))[-1] * x,
    "starmap": lambda x, y: sum(itertools.starmap(operator.mul, [(x, y), (y, y)])) * x,
    "chain": lambda x, y: sum(itertools.chain([x, y], (x * y,))) ** 2,
    "islice": lambda x, y: sum(itertools.islice([x, y, x * y], 2)) ** 2 * x,
    "map_reads_variable": lambda x, y: sum(map(lambda v: v * y, [x, y])) ** 2,
    "sorted_key_reads_variable": lambda x, y: sorted([x, y], key=lambda v: v * y)[0] * x * y,
}


# rules that call their function argument through _iterables.Calls (reduce, map, accumulate,
# starmap) and a partial of a lambda were F14 (tests/fuzz/FINDINGS.md): fixed, checked here


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_second_order(name):
    f = FUNCTIONAL[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


STATISTICS = {
    "mean": lambda x, y: statistics.mean([x, y, x * y]) ** 2,
    "fmean": lambda x, y: statistics.fmean([x * x, y]) * x,
    "variance": lambda x, y: statistics.variance([x, y, x * y]),
    "stdev": lambda x, y: statistics.stdev([x, y, 2.0 * x * y]),
    "pvariance": lambda x, y: statistics.pvariance((x, y, x * y)),
    "median": lambda x, y: statistics.median([x, y, x * y + 3.0]) * x,
    "geometric_mean": lambda x, y: statistics.geometric_mean([x, y]) * x,
    "harmonic_mean": lambda x, y: statistics.harmonic_mean([x, y]) * y,
}


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_statistics_second_order(name):
    f = STATISTICS[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


CMATH = {
    "abs_exp": lambda x, y: abs(cmath.exp(complex(x, y))) * x,
    "phase": lambda x, y: cmath.phase(complex(x, y)) * y,
    "sqrt": lambda x, y: (cmath.sqrt(complex(x, y)) * complex(y, x)).real,
    "log": lambda x, y: cmath.log(complex(x, y) * x).imag * x,
    "sin": lambda x, y: (cmath.sin(complex(x, y)) ** 2).real,
}


@pytest.mark.parametrize("name", sorted(CMATH))
def test_cmath_second_order(name):
    f = CMATH[name]
    for k, args in enumerate(_points(2, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, args, seed=k)


_C = np.array([0.5, -1.2, 2.0])
_M = np.array([[1.0, 0.3, -0.2], [0.1, 0.8, 0.5], [-0.4, 0.2, 1.5]])
NUMPY = {
    "ufuncs": lambda a: np.sum(np.sin(a) * np.exp(a) + np.log(a) * np.sqrt(a) + np.tanh(a) ** 2),
    "power": lambda a: np.sum(a**3 + np.power(a, 2.5) + 1.0 / a),
    "reductions": lambda a: np.prod(a) + np.mean(a**2) * np.max(a * _C) + np.std(a) + np.var(a * a),
    "dot": lambda a: np.dot(a, _M @ a) + a @ a * np.sum(a),
    "matmul_outer": lambda a: np.sum(np.outer(a, a) @ _M * np.outer(a, _C)),
    "einsum": lambda a: np.einsum("i,ij,j->", a, _M, a) + np.einsum("ii->", np.outer(a, a) ** 2),
    "einsum_diagonal": lambda a: np.sum(np.einsum("ii->i", np.outer(a, a * a)) * _C),
    "sort": lambda a: np.sum(np.sort(a * _C) ** 3 * _C),
    "sort_2d": lambda a: np.sum(np.sort(np.outer(a, _C), axis=0) ** 3 * _M),
    "concatenate": lambda a: np.sum(np.concatenate([a * a, a * _C]) ** 2),
    "vstack_hstack": lambda a: (
        np.sum(np.vstack([a, a * a]) ** 3) + np.sum(np.hstack([a, _C * a]) ** 2)
    ),
    "stack": lambda a: np.sum(np.stack([a, a**2], axis=1) ** 2),
    "array_of_list": lambda a: np.sum(np.array([a[0] * a[1], a[2]]) ** 3),
    "indexing": lambda a: a[0] * a[2] ** 2 + np.sum(a[1:] ** 3) + np.sum(a[[0, 0, 2]] ** 2),
    "where_clip": lambda a: np.sum(np.where(a > 1.0, a**2, a**3) + np.clip(a, 0.5, 1.5) ** 2),
    "cumsum": lambda a: np.sum(np.cumsum(a) ** 2 + np.cumsum(a * a) * _C),
    "diagonal": lambda a: (
        np.sum(np.diagonal(np.outer(a, a * a), 1) ** 2)
        + np.sum(np.diag(np.outer(a, _C), -1) * a[1:])
    ),
    "linalg": lambda a: np.linalg.norm(a * _C) ** 3 + np.linalg.det(_M + np.diag(a)),
    "solve_inv": lambda a: (
        np.sum(np.linalg.solve(_M + np.diag(a), _C)) + np.sum(np.linalg.inv(_M + np.diag(a * a)))
    ),
    "reshape_transpose": lambda a: (
        np.sum(np.reshape(np.outer(a, a), (9,))[::2] ** 2) + np.sum(np.outer(a, _C).T @ a)
    ),
    "maximum_abs": lambda a: np.sum(np.maximum(a, 1.0) ** 2 + np.abs(a - 1.0) * a),
    "diag_trace": lambda a: np.trace(np.outer(a, a) @ _M) + np.sum(np.diag(np.outer(a, a)) ** 2),
    "logsumexp_like": lambda a: np.log(np.sum(np.exp(a * _C))),
    "tile_repeat": lambda a: (
        np.sum(np.tile(a, 2) ** 3) + np.sum(np.repeat(a, 2) ** 2 * np.arange(6.0))
    ),
}


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_numpy_second_order(name):
    f = NUMPY[name]
    for k, point in enumerate(_points(3, zlib.crc32(name.encode()) % 1000)):
        check_both_paths(f, (np.array(point),), seed=k)
