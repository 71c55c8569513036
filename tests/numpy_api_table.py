"""The differentiable NumPy API that autograd covers (its ``numpy_vjps.py``, ``numpy_wrapper.py``
and ``linalg.py``), plus the functions of issue #22, as one table of calls on random arrays.

Run as a script to list the gaps, each call tried at first and at second order::

    .venv/bin/python tests/numpy_api_table.py

``tests/test_numpy_rules_more.py`` checks every entry of the table (the known engine limits
at second order are marked there).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

rng = np.random.default_rng(1122)


def a(*shape: int) -> Any:
    return rng.normal(size=shape)


def pos(*shape: int) -> Any:
    return rng.uniform(0.5, 2.0, size=shape)


def unit(*shape: int) -> Any:
    return rng.uniform(-0.8, 0.8, size=shape)


def spd(n: int) -> Any:
    m = rng.normal(size=(n, n))
    return m @ m.T + n * np.eye(n)


def sym(n: int) -> Any:
    m = rng.normal(size=(n, n))
    return m + m.T


def distinct(*shape: int) -> Any:
    """Values far apart, so that sorting and choosing are smooth nearby."""
    n = int(np.prod(shape))
    return (rng.permutation(n) + rng.uniform(0.1, 0.3, size=n)).reshape(shape)


LEVELS = np.array([0.1, 0.5, 0.95])
QUERIES = np.array(
    [0.5, 1.5]
)  # (an array made outside: built from a list inside, it would be a list at second order)

# name -> (function of the differentiable arguments, argument makers)
Entry = tuple[str, Callable[..., Any], Callable[[], tuple]]

ENTRIES: list[Entry] = [
    # ----- elementwise
    ("nan_to_num", lambda x: np.nan_to_num(x), lambda: (a(3, 2),)),
    (
        "nan_to_num/nan",
        lambda x, n: np.nan_to_num(np.log(x), nan=n),
        lambda: (np.array([0.5, -1.0, 2.0, -0.2]), 0.3),
    ),
    ("nan_to_num/complex", lambda z: np.nan_to_num(z), lambda: (a(3) + 1j * a(3),)),
    ("angle", lambda z: np.angle(z), lambda: (a(4) + 1j * a(4),)),
    ("angle/real", lambda x: np.angle(x + 0.5), lambda: (pos(4),)),
    ("angle/deg", lambda z: np.angle(z, deg=True), lambda: (a(4) + 1j * a(4),)),
    ("real_if_close", lambda x: np.real_if_close(x + 0j), lambda: (a(3),)),
    ("real_if_close/complex", lambda z: np.real_if_close(z), lambda: (a(3) + 1j * a(3),)),
    ("sinc", np.sinc, lambda: (a(4),)),
    ("heaviside-free log1p", np.log1p, lambda: (pos(3),)),
    ("square", np.square, lambda: (a(3),)),
    ("cbrt", np.cbrt, lambda: (pos(3),)),
    ("logaddexp2", np.logaddexp2, lambda: (a(3), a(2, 3))),
    ("float_power", np.float_power, lambda: (pos(3), a(3))),
    ("copysign", np.copysign, lambda: (a(3), a(3))),
    ("ldexp", lambda x: np.ldexp(x, 3), lambda: (a(3),)),
    ("nextafter-free spacing", lambda x: x * 2.0, lambda: (a(3),)),
    # ----- reductions and scans
    ("cumprod", lambda x: np.cumprod(x, axis=1), lambda: (a(3, 4),)),
    ("cumprod/flat", np.cumprod, lambda: (a(5),)),
    ("nanprod", lambda x: np.nanprod(x, axis=0), lambda: (a(3, 4),)),
    ("nanmax", lambda x: np.nanmax(x, axis=1), lambda: (distinct(3, 4),)),
    ("nanmin", lambda x: np.nanmin(x), lambda: (distinct(3, 4),)),
    ("nanvar", lambda x: np.nanvar(x, axis=0), lambda: (a(3, 4),)),
    ("nanstd", lambda x: np.nanstd(x, axis=1, keepdims=True), lambda: (a(3, 4),)),
    ("nancumsum", lambda x: np.nancumsum(x, axis=0), lambda: (a(3, 4),)),
    ("average", lambda x: np.average(x, axis=0), lambda: (a(3, 4),)),
    ("average/weights", lambda x, w: np.average(x, axis=1, weights=w), lambda: (a(3, 4), pos(4))),
    ("ptp", lambda x: np.ptp(x, axis=0), lambda: (distinct(3, 4),)),
    ("median", lambda x: np.median(x, axis=1), lambda: (distinct(3, 5),)),
    ("percentile", lambda x: np.percentile(x, 30.0), lambda: (distinct(7),)),
    ("quantile", lambda x: np.quantile(x, 0.3, axis=0), lambda: (distinct(7, 2),)),
    ("trapezoid", lambda y: np.trapezoid(y, dx=0.5), lambda: (a(6),)),
    ("trapezoid/x", lambda y, x: np.trapezoid(y, x), lambda: (a(6), np.cumsum(pos(6)))),
    (
        "quantile/array-q",
        lambda x: np.quantile(x, LEVELS, axis=1, keepdims=True),
        lambda: (distinct(2, 6),),
    ),
    ("median/flat-keepdims", lambda x: np.median(x, keepdims=True), lambda: (distinct(3, 4),)),
    ("percentile/array-q", lambda x: np.percentile(x, 100 * LEVELS), lambda: (distinct(9),)),
    ("cov", lambda x: np.cov(x), lambda: (a(3, 5),)),
    ("cov/y-columns", lambda x, y: np.cov(x, y, rowvar=False, ddof=0), lambda: (a(5, 2), a(5))),
    ("corrcoef", lambda x: np.corrcoef(x), lambda: (a(3, 5),)),
    # ----- products
    ("kron", np.kron, lambda: (a(2, 3), a(3, 2))),
    ("kron/1d", np.kron, lambda: (a(3), a(2))),
    ("kron/mixed", np.kron, lambda: (a(2, 2), a(3))),
    ("cross", np.cross, lambda: (a(4, 3), a(4, 3))),
    ("cross/broadcast", np.cross, lambda: (a(3), a(4, 3))),
    ("cross/axis", lambda x, y: np.cross(x, y, axisa=0, axisb=0), lambda: (a(3, 4), a(3, 4))),
    ("cross/2d", np.cross, lambda: (a(5, 3), a(5, 3))),
    ("vdot", np.vdot, lambda: (a(3, 2), a(3, 2))),
    ("convolve", np.convolve, lambda: (a(5), a(3))),
    ("convolve/same", lambda x, k: np.convolve(x, k, mode="same"), lambda: (a(6), a(3))),
    ("correlate", lambda x, k: np.correlate(x, k, mode="valid"), lambda: (a(6), a(3))),
    ("correlate/full", lambda x, k: np.correlate(x, k, mode="full"), lambda: (a(5), a(3))),
    ("correlate/same", lambda x, k: np.correlate(x, k, mode="same"), lambda: (a(6), a(4))),
    ("correlate/longer", lambda x, k: np.correlate(x, k, mode="full"), lambda: (a(3), a(5))),
    ("correlate/longer-same", lambda x, k: np.correlate(x, k, mode="same"), lambda: (a(3), a(6))),
    ("convolve/longer-valid", lambda x, k: np.convolve(x, k, mode="valid"), lambda: (a(3), a(5))),
    ("convolve/even-same", lambda x, k: np.convolve(x, k, mode="same"), lambda: (a(7), a(4))),
    ("vander/increasing", lambda x: np.vander(x, 4, increasing=True), lambda: (a(3),)),
    ("polyval", np.polyval, lambda: (a(4), a(5))),
    ("vander", lambda x: np.vander(x, 3), lambda: (a(4),)),
    ("matrix_power", lambda m: np.linalg.matrix_power(m, 3), lambda: (a(3, 3),)),
    (
        "multi_dot",
        lambda x, y, z: np.linalg.multi_dot([x, y, z]),
        lambda: (a(2, 3), a(3, 4), a(4, 2)),
    ),
    ("matmul/batched", np.matmul, lambda: (a(2, 3, 4), a(4, 2))),
    ("vecdot", lambda x, y: np.vecdot(x, y), lambda: (a(3, 4), a(4))),
    ("matrix_transpose", lambda x: np.matrix_transpose(x), lambda: (a(2, 3, 4),)),
    # ----- linear algebra
    ("pinv", np.linalg.pinv, lambda: (a(4, 3),)),
    ("cholesky", np.linalg.cholesky, lambda: (spd(3),)),
    ("eigh", lambda m: np.linalg.eigh(m)[0], lambda: (sym(3),)),
    ("eigh/vectors", lambda m: np.abs(np.linalg.eigh(m)[1]), lambda: (sym(3),)),
    ("eigvalsh", np.linalg.eigvalsh, lambda: (sym(3),)),
    ("svd/values", lambda m: np.linalg.svd(m, compute_uv=False), lambda: (a(4, 3),)),
    ("svd", lambda m: np.abs(np.linalg.svd(m, full_matrices=False)[0]), lambda: (a(4, 3),)),
    ("svdvals", lambda m: np.linalg.svdvals(m), lambda: (a(4, 3),)),
    ("qr", lambda m: np.linalg.qr(m)[1], lambda: (a(4, 3),)),
    ("qr/q", lambda m: np.sin(np.linalg.qr(m)[0]), lambda: (a(5, 3),)),
    ("qr/square", lambda m: np.linalg.qr(m)[0] * np.linalg.qr(m)[1][0], lambda: (a(3, 3),)),
    ("qr/mode-r", lambda m: np.linalg.qr(m, mode="r") ** 2, lambda: (a(4, 2),)),
    ("qr/batched", lambda m: np.linalg.qr(m)[0], lambda: (a(2, 4, 3),)),
    ("eig/values", lambda m: np.linalg.eigvals(m), lambda: (sym(3) + np.diag([5.0, 0.0, -5.0]),)),
    ("eig/values-complex", lambda m: np.linalg.eigvals(m), lambda: (a(4, 4),)),
    ("eig/values-batched", lambda m: np.linalg.eigvals(m), lambda: (a(2, 3, 3),)),
    ("eig/complex-matrix", lambda m: np.linalg.eig(m)[0], lambda: (a(3, 3) + 1j * a(3, 3),)),
    # the eigenvectors themselves, phase included (NumPy's gauge: unit norm, the largest
    # component real; positive for a complex matrix, of NumPy's arbitrary sign for a real
    # one, so there the check squares them: a function that keeps the phase, not the sign)
    ("eig/vectors-real", lambda m: np.linalg.eig(m)[1] ** 2, lambda: (sym(3) + np.triu(a(3, 3)),)),
    ("eig/vectors", lambda m: np.linalg.eig(m)[1] ** 2, lambda: (a(4, 4),)),
    ("eig/vectors-complex", lambda m: np.linalg.eig(m)[1], lambda: (a(3, 3) + 1j * a(3, 3),)),
    (
        "eig/both",
        lambda m: np.linalg.eig(m)[0][:, None] * np.linalg.eig(m)[1] ** 2,
        lambda: (a(2, 3, 3),),
    ),
    ("lstsq", lambda m, b: np.linalg.lstsq(m, b)[0], lambda: (a(5, 3), a(5))),
    ("lstsq/residuals", lambda m, b: np.linalg.lstsq(m, b)[1], lambda: (a(5, 3), a(5, 2))),
    ("lstsq/wide", lambda m, b: np.linalg.lstsq(m, b)[0], lambda: (a(2, 4), a(2))),
    (
        "tensorsolve-free solve/batched",
        np.linalg.solve,
        lambda: (spd(3)[None] + np.zeros((2, 1, 1)), a(2, 3, 2)),
    ),
    ("inv/batched", np.linalg.inv, lambda: (spd(3)[None] + a(2, 3, 3) * 0.1,)),
    ("det/batched", np.linalg.det, lambda: (a(2, 3, 3),)),
    ("vector_norm", lambda x: np.linalg.vector_norm(x, axis=1), lambda: (a(3, 4),)),
    ("matrix_norm", lambda x: np.linalg.matrix_norm(x), lambda: (a(3, 4),)),
    ("outer/2d", np.outer, lambda: (a(2, 2), a(3))),
    # ----- shapes
    ("rot90", np.rot90, lambda: (a(3, 4),)),
    ("rot90/k", lambda x: np.rot90(x, 3, axes=(1, 2)), lambda: (a(2, 3, 4),)),
    ("rot90/k2", lambda x: np.rot90(x, k=-2), lambda: (a(3, 4),)),
    ("rollaxis", lambda x: np.rollaxis(x, 2), lambda: (a(2, 3, 4),)),
    ("rollaxis/start", lambda x: np.rollaxis(x, 0, 3), lambda: (a(2, 3, 4),)),
    ("rollaxis/back", lambda x: np.rollaxis(x, 2, 1), lambda: (a(2, 3, 4),)),
    ("append", np.append, lambda: (a(3, 2), a(4))),
    ("append/axis", lambda x, y: np.append(x, y, axis=0), lambda: (a(3, 2), a(1, 2))),
    ("append/1d", np.append, lambda: (a(3), a(2))),
    ("dsplit", lambda x: np.dsplit(x, 2)[1], lambda: (a(2, 3, 4),)),
    ("dsplit/sum", lambda x: tuple(np.dsplit(x, [1, 3])), lambda: (a(2, 3, 4),)),
    ("hsplit", lambda x: np.hsplit(x, 2)[0], lambda: (a(3, 4),)),
    ("vsplit", lambda x: np.vsplit(x, [1])[1], lambda: (a(3, 4),)),
    ("split", lambda x: np.split(x, 3, axis=1)[2], lambda: (a(2, 6),)),
    ("array_split", lambda x: np.array_split(x, 3)[0], lambda: (a(7, 2),)),
    ("dstack", lambda x, y: np.dstack((x, y)), lambda: (a(2, 3), a(2, 3))),
    ("dstack/1d", lambda x, y: np.dstack((x, y)), lambda: (a(3), a(3))),
    ("row_stack-free vstack/1d", lambda x, y: np.vstack((x, y)), lambda: (a(3), a(3))),
    ("hstack/scalars", lambda x: np.hstack(x), lambda: (a(3),)),
    ("stack/axis", lambda x, y: np.stack((x, y), axis=-1), lambda: (a(2, 3), a(2, 3))),
    ("column_stack/1d", np.column_stack, lambda: (a(3),)),
    ("block", lambda x, y: np.block([[x, y], [y, x]]), lambda: (a(2, 2), a(2, 2))),
    (
        "block/mixed",
        lambda x, y, s: np.block([[x, y], [np.zeros((1, 3)) + s, s]]),
        lambda: (a(2, 3), a(2, 1), 0.5),
    ),
    ("block/1d", lambda x, y: np.block([x, y, x]), lambda: (a(3), a(2))),
    ("partition", lambda x: np.partition(x, 2), lambda: (distinct(6),)),
    ("partition/axis", lambda x: np.partition(x, (1, 3), axis=0), lambda: (distinct(5, 3),)),
    ("sort/axis0", lambda x: np.sort(x, axis=0), lambda: (distinct(4, 3),)),
    (
        "select",
        lambda x, y: np.select([x > 0, y > 0], [x, y * 2.0], default=-1.0),
        lambda: (a(5), a(5)),
    ),
    (
        "select/default",
        lambda x, y, d: np.select([x > 0], [y], default=d),
        lambda: (a(5), a(5), a(5)),
    ),
    (
        "select/tuples",
        lambda x, y, d: np.select((x > 0, y > 0), (x * y, y), default=d),
        lambda: (a(5), a(5), a(5)),
    ),
    (
        "pad/reflect-odd",
        lambda x: np.pad(x, 2, mode="reflect", reflect_type="odd"),
        lambda: (a(4),),
    ),
    ("pad/constant", lambda x: np.pad(x, 2), lambda: (a(3, 2),)),
    (
        "pad/constant_values",
        lambda x, c: np.pad(x, ((1, 2), (0, 1)), constant_values=c),
        lambda: (a(3, 2), 0.7),
    ),
    ("pad/edge", lambda x: np.pad(x, ((2, 1), (1, 3)), mode="edge"), lambda: (a(3, 2),)),
    ("pad/reflect", lambda x: np.pad(x, ((2, 1), (1, 3)), mode="reflect"), lambda: (a(4, 5),)),
    ("pad/reflect-long", lambda x: np.pad(x, 5, mode="reflect"), lambda: (a(3),)),
    ("pad/symmetric", lambda x: np.pad(x, ((2, 1), (1, 3)), mode="symmetric"), lambda: (a(4, 5),)),
    ("pad/wrap", lambda x: np.pad(x, ((2, 1), (1, 3)), mode="wrap"), lambda: (a(3, 4),)),
    ("pad/wrap-long", lambda x: np.pad(x, 7, mode="wrap"), lambda: (a(3),)),
    ("pad/linear_ramp", lambda x: np.pad(x, 2, mode="linear_ramp"), lambda: (a(4),)),
    ("pad/mean", lambda x: np.pad(x, 2, mode="mean"), lambda: (a(4),)),
    ("pad/maximum", lambda x: np.pad(x, 2, mode="maximum"), lambda: (distinct(4),)),
    (
        "pad/reflect-odd-2d",
        lambda x: np.pad(x, ((2, 1), (1, 3)), mode="reflect", reflect_type="odd"),
        lambda: (a(4, 5),),
    ),
    (
        "pad/reflect-odd-long",
        lambda x: np.pad(x, 7, mode="reflect", reflect_type="odd"),
        lambda: (a(3),),
    ),
    (
        "pad/symmetric-odd",
        lambda x: np.pad(x, ((3, 1), (0, 2)), mode="symmetric", reflect_type="odd"),
        lambda: (a(3, 4),),
    ),
    (
        "pad/linear_ramp-2d",
        lambda x, e: np.pad(
            x, ((2, 1), (1, 3)), mode="linear_ramp", end_values=((e, 1.0), (-2.0, e))
        ),
        lambda: (a(3, 4), 0.7),
    ),
    (
        "pad/mean-stat_length",
        lambda x: np.pad(x, ((2, 1), (1, 3)), mode="mean", stat_length=((1, 2), (3, 10))),
        lambda: (a(4, 5),),
    ),
    (
        "pad/minimum-2d",
        lambda x: np.pad(x, ((1, 2), (2, 0)), mode="minimum"),
        lambda: (distinct(3, 4),),
    ),
    (
        "pad/maximum-stat_length",
        lambda x: np.pad(x, (2, 3), mode="maximum", stat_length=2),
        lambda: (distinct(5),),
    ),
    ("pad/median", lambda x: np.pad(x, ((1, 2), (2, 1)), mode="median"), lambda: (distinct(3, 5),)),
    ("r_", lambda x, y: np.r_[x, y], lambda: (a(3), a(2))),
    ("r_/scalars", lambda x, y: np.r_[x, 2.0, y], lambda: (a(3), a(2))),
    ("r_/slice", lambda x: np.r_[x, 0:3], lambda: (a(3),)),
    ("r_/2d", lambda x, y: np.r_[x, y], lambda: (a(2, 3), a(1, 3))),
    ("r_/directive", lambda x, y: np.r_["1", x, y], lambda: (a(2, 3), a(2, 1))),
    ("c_", lambda x, y: np.c_[x, y], lambda: (a(3), a(3))),
    ("c_/2d", lambda x, y: np.c_[x, y], lambda: (a(3, 2), a(3))),
    ("gradient", np.gradient, lambda: (a(6),)),
    ("gradient/spacing", lambda y: np.gradient(y, 0.5), lambda: (a(6),)),
    ("gradient/2d", lambda y: np.gradient(y, axis=1), lambda: (a(4, 5),)),
    ("gradient/2d-both", lambda y: tuple(np.gradient(y)), lambda: (a(4, 5),)),
    ("gradient/edge2", lambda y: np.gradient(y, edge_order=2), lambda: (a(6),)),
    ("gradient/coords", lambda y, x: np.gradient(y, x), lambda: (a(6), np.cumsum(pos(6)))),
    ("diff/n2", lambda x: np.diff(x, n=2, axis=0), lambda: (a(5, 3),)),
    ("repeat/axis", lambda x: np.repeat(x, 2, axis=1), lambda: (a(2, 3),)),
    ("tile/2d", lambda x: np.tile(x, (2, 1, 2)), lambda: (a(2, 3),)),
    ("atleast_3d", np.atleast_3d, lambda: (a(3),)),
    ("diagflat", np.diagflat, lambda: (a(3),)),
    ("trace/offset", lambda x: np.trace(x, 1), lambda: (a(3, 4),)),
    ("diag/k", lambda x: np.diag(x, -1), lambda: (a(3),)),
    (
        "take_along_axis",
        lambda x: np.take_along_axis(x, np.array([[0, 2], [1, 1]]), axis=1),
        lambda: (a(2, 3),),
    ),
    ("compress", lambda x: np.compress([True, False, True], x, axis=0), lambda: (a(3, 2),)),
    ("extract", lambda x: np.extract(x > 0, x), lambda: (a(6),)),
    ("choose", lambda x, y: np.choose(np.array([0, 1, 0]), (x, y)), lambda: (a(3), a(3))),
    ("piecewise-free where/1arg", lambda x: x[np.where(x > 0)], lambda: (a(6),)),
    ("resize", lambda x: np.resize(x, (3, 3)), lambda: (a(2, 2),)),
    ("flip/axes", lambda x: np.flip(x, (0, 2)), lambda: (a(2, 3, 4),)),
    ("roll/tuple", lambda x: np.roll(x, (1, -2), axis=(0, 1)), lambda: (a(3, 4),)),
    ("squeeze/axis", lambda x: np.squeeze(x, axis=1), lambda: (a(3, 1, 2),)),
    ("broadcast_arrays", lambda x, y: tuple(np.broadcast_arrays(x, y)), lambda: (a(3, 1), a(4))),
    ("meshgrid", lambda x, y: tuple(np.meshgrid(x, y)), lambda: (a(3), a(2))),
    ("interp", lambda fp: np.interp(QUERIES, np.arange(4.0), fp), lambda: (a(4),)),
    (
        "interp/all",
        lambda x, xp, fp: np.interp(x, xp, fp, left=-1.0),
        lambda: (np.array([-0.5, 0.3, 1.7, 2.2, 5.0]), np.array([0.0, 1.0, 1.5, 3.0]), a(4)),
    ),
]


def run(entries: list[Entry] = ENTRIES) -> list[tuple[str, int, str]]:
    """Try every entry at first and second order; the gaps as (name, order, error)."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from array_checks import check_grads

    gaps = []
    for name, fn, make in entries:
        for order in (1, 2):
            try:
                check_grads(fn, *make(), order=order)
            except Exception as e:
                gaps.append((name, order, f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"))
                break
    return gaps


if __name__ == "__main__":
    only = sys.argv[1:]
    chosen = [e for e in ENTRIES if not only or any(e[0].startswith(o) for o in only)]
    found = run(chosen)
    for name, order, err in found:
        print(f"{name:28s} order {order}: {err}")
    print(f"{len(found)} gaps of {len(chosen)} entries")
