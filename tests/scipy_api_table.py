"""The scipy.special and scipy.linalg calls dplus differentiates, on random arrays (see
numpy_api_table.py). Run as a script to list the gaps."""

from __future__ import annotations

import sys

import numpy as np
import scipy.linalg as sla
import scipy.special as sc
from numpy_api_table import Entry, a, pos, spd, sym, unit

rng = np.random.default_rng(3344)


def upper(n):
    return np.triu(rng.normal(size=(n, n))) + 3 * np.eye(n)


def lower(n):
    return np.tril(rng.normal(size=(n, n))) + 3 * np.eye(n)


ENTRIES: list[Entry] = [
    ("gammaln", sc.gammaln, lambda: (pos(3, 2) + 0.5,)),
    ("digamma", sc.digamma, lambda: (pos(4) + 0.5,)),
    ("psi", sc.psi, lambda: (pos(4) + 0.5,)),
    ("polygamma", lambda x: sc.polygamma(2, x), lambda: (pos(4) + 0.5,)),
    ("polygamma/orders", lambda x: sc.polygamma(np.array([0, 1, 3]), x), lambda: (pos(3) + 0.5,)),
    ("gamma", sc.gamma, lambda: (pos(4) + 0.5,)),
    ("beta", sc.beta, lambda: (pos(3) + 0.5, pos(2, 3) + 0.5)),
    ("betaln", sc.betaln, lambda: (pos(3) + 0.5, pos(3) + 1.0)),
    ("erf", sc.erf, lambda: (a(4),)),
    ("erfc", sc.erfc, lambda: (a(4),)),
    ("erfinv", sc.erfinv, lambda: (unit(4),)),
    ("erfcinv", sc.erfcinv, lambda: (unit(4) + 1.0,)),
    ("wofz", sc.wofz, lambda: (a(4) + 1j * (pos(4) + 0.2),)),  # (astropy's Voigt1D)
    ("wofz/real", lambda x: sc.wofz(2.0 * x + 0.7j), lambda: (a(4),)),
    ("expit", sc.expit, lambda: (a(3, 2),)),
    ("logit", sc.logit, lambda: (unit(4) * 0.5 + 0.5,)),
    ("log_expit", sc.log_expit, lambda: (a(4),)),
    ("xlogy", sc.xlogy, lambda: (a(3), pos(2, 3))),
    ("xlogy/zero", sc.xlogy, lambda: (np.array([0.0, 1.5, -0.5]), pos(3))),
    ("xlog1py", sc.xlog1py, lambda: (a(3), pos(3))),
    ("logsumexp", sc.logsumexp, lambda: (a(3, 4),)),
    ("logsumexp/axis", lambda x: sc.logsumexp(x, axis=1), lambda: (a(3, 4),)),
    ("logsumexp/keepdims", lambda x: sc.logsumexp(x, axis=0, keepdims=True), lambda: (a(3, 4),)),
    ("logsumexp/axes", lambda x: sc.logsumexp(x, axis=(0, 2)), lambda: (a(2, 3, 2),)),
    ("logsumexp/b", lambda x, w: sc.logsumexp(x, axis=-1, b=w), lambda: (a(3, 4), pos(4))),
    ("softmax", sc.softmax, lambda: (a(5),)),
    ("softmax/axis", lambda x: sc.softmax(x, axis=1), lambda: (a(3, 4),)),
    ("log_softmax", lambda x: sc.log_softmax(x, axis=0), lambda: (a(3, 4),)),
    ("j0", sc.j0, lambda: (a(4) * 3.0,)),
    ("j1", sc.j1, lambda: (a(4) * 3.0,)),
    ("y0", sc.y0, lambda: (pos(4) + 0.5,)),
    ("y1", sc.y1, lambda: (pos(4) + 0.5,)),
    ("i0", sc.i0, lambda: (a(4),)),
    ("i1", sc.i1, lambda: (a(4),)),
    ("i0e", sc.i0e, lambda: (a(4) * 2.0,)),
    ("i1e", sc.i1e, lambda: (a(4) * 2.0,)),
    ("k0", sc.k0, lambda: (pos(4) + 0.5,)),
    ("k1", sc.k1, lambda: (pos(4) + 0.5,)),
    ("k0e", sc.k0e, lambda: (pos(4) + 0.5,)),
    ("k1e", sc.k1e, lambda: (pos(4) + 0.5,)),
    ("jv", lambda x: sc.jv(2, x), lambda: (a(4) * 3.0,)),
    ("jn/orders", lambda x: sc.jn(np.array([0, 1, 3]), x), lambda: (a(2, 3) * 3.0,)),
    ("yv", lambda x: sc.yv(1, x), lambda: (pos(4) + 0.5,)),
    ("yn", lambda x: sc.yn(2, x), lambda: (pos(4) + 0.5,)),
    ("iv", lambda x: sc.iv(3, x), lambda: (a(4),)),
    ("ive", lambda x: sc.ive(1, x), lambda: (a(4) * 2.0,)),
    ("kv", lambda x: sc.kv(2, x), lambda: (pos(4) + 0.5,)),
    ("kve", lambda x: sc.kve(0, x), lambda: (pos(4) + 0.5,)),
    ("rgamma", sc.rgamma, lambda: (pos(4) + 0.5,)),
    ("ndtr", sc.ndtr, lambda: (a(4),)),
    ("log_ndtr", sc.log_ndtr, lambda: (a(4) * 2.0,)),
    ("ndtri", sc.ndtri, lambda: (unit(4) * 0.4 + 0.5,)),
    ("solve_triangular", sla.solve_triangular, lambda: (upper(3), a(3))),
    (
        "solve_triangular/lower",
        lambda m, b: sla.solve_triangular(m, b, lower=True),
        lambda: (lower(3), a(3, 2)),
    ),
    (
        "solve_triangular/trans",
        lambda m, b: sla.solve_triangular(m, b, trans=1),
        lambda: (upper(3), a(3, 2)),
    ),
    (
        "solve_triangular/unit",
        lambda m, b: sla.solve_triangular(m, b, lower=True, unit_diagonal=True, trans="T"),
        lambda: (lower(3), a(3)),
    ),
    ("cholesky", sla.cholesky, lambda: (spd(3),)),
    ("cholesky/lower", lambda m: sla.cholesky(m, lower=True), lambda: (spd(4),)),
    ("solve", sla.solve, lambda: (spd(3) + a(3, 3), a(3))),
    ("solve/pos", lambda m, b: sla.solve(m, b, assume_a="pos"), lambda: (spd(3), a(3, 2))),
    (
        "solve/sym-lower",
        lambda m, b: sla.solve(m, b, assume_a="sym", lower=True),
        lambda: (sym(3) + 4 * np.eye(3), a(3)),
    ),
    ("inv", sla.inv, lambda: (spd(3) + a(3, 3),)),
    ("det", sla.det, lambda: (a(3, 3),)),
    ("eigh", lambda m: sla.eigh(m)[0], lambda: (sym(3),)),
    ("eigh/vectors", lambda m: np.abs(sla.eigh(m, lower=False)[1]), lambda: (sym(3),)),
    ("eigh/values_only", lambda m: sla.eigh(m, eigvals_only=True), lambda: (sym(4),)),
    ("expm", sla.expm, lambda: (a(3, 3) * 0.5,)),
]


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from numpy_api_table import run

    found = run(ENTRIES)
    for name, order, err in found:
        print(f"{name:28s} order {order}: {err}")
    print(f"{len(found)} gaps of {len(ENTRIES)} entries")
