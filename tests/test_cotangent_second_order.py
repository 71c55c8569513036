"""Differentiating a backward pass with respect to the sensitivity it is given (the
cotangent ``v`` of ``D(f)(x)(v)`` / ``dplus(f)(x).backprop(v)``), for results whose memory
was written in place. The sensitivity given goes into the memory's entry; one order up that
hand-over must be an addition the next order records, else every path through the memory
is lost (it was: zero derivative in ``v``, silently — found through autograd's
``check_grads`` of ``scipy.stats.chi2.pdf``, whose source writes with ``np.putmask``)."""

from __future__ import annotations

import numpy as np
import pytest

import dplus


def item(x):
    y = x * 1.0
    y[0] = x[1] ** 2
    return y


def slice_write(x):
    y = np.zeros(4)
    y[1:] = x[:3] * 3.0
    return y


def augmented(x):
    y = x * 2.0
    y += x**2
    return y


def putmask(x):
    y = x * 1.0
    np.putmask(y, x > 1.2, x**2)
    return y


def place(x):
    y = np.zeros(x.shape)
    np.place(y, x > 1.2, (x**2)[x > 1.2])
    return y


def view_written(x):
    y = np.sin(x)
    v = y[1:3]
    v *= x[:2]
    return y


def pair(x):
    y = x * 1.0
    y[2] = x[0] * x[3]
    return (y, float(np.sum(x**3)))


def _cotangent_of(f, x):
    r = f(x)
    return (np.zeros(4), 0.0) if isinstance(r, tuple) else np.zeros(4)


def _dot(a, b):
    if isinstance(a, tuple):
        return float(np.sum(a[0] * b[0]) + a[1] * b[1])
    return float(np.sum(a * b))


@pytest.mark.parametrize("f", [item, slice_write, augmented, putmask, place, view_written, pair])
@pytest.mark.parametrize("seed", range(3))
def test_the_derivative_in_the_cotangent(f, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2.0, size=4)
    u = rng.normal(size=4)
    v = (rng.normal(size=4), float(rng.normal())) if f is pair else rng.normal(size=4)

    def scal(x, v):
        return float(np.sum(dplus.dplus(f)(x).backprop(v)[0] * u))

    gx, gv = dplus.grad(scal, argnums=(0, 1))(x, v)
    h = 1e-6
    for e in np.eye(4):
        fd_x = (scal(x + h * e, v) - scal(x - h * e, v)) / (2 * h)
        assert abs(_dot(gx, e) - fd_x) < 1e-6 * max(1.0, abs(fd_x))
    # the backward pass is linear in v: its derivative in v is exact, at any step
    basis = [(e, 0.0) for e in np.eye(4)] + [(np.zeros(4), 1.0)] if f is pair else list(np.eye(4))
    for e in basis:
        up = (v[0] + e[0], v[1] + e[1]) if f is pair else v + e
        down = (v[0] - e[0], v[1] - e[1]) if f is pair else v - e
        fd_v = (scal(x, up) - scal(x, down)) / 2
        assert abs(_dot(gv, e) - fd_v) < 1e-9 * max(1.0, abs(fd_v))
