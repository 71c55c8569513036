"""An explicit heat-equation stencil written in place, 200 points, 50 steps:
``u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 u[1:-1] + u[:-2])``; the gradient of the final
energy ``sum(u**2)`` w.r.t. the initial state."""

import numpy as np

NAME = "stencil"
TITLE = "heat stencil in place, 200 points x 50 steps"
WRT = (0,)
IN_PLACE = True
STEPS = 50


def primal(u0):
    u = u0 * 1.0
    for _ in range(STEPS):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return np.sum(u * u)


def hand_grad(u0):
    u = u0 * 1.0
    for _ in range(STEPS):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    g = 2.0 * u
    for _ in range(STEPS):  # the transposed step
        inner = g[1:-1].copy()
        g = g.copy()
        g[1:-1] -= 0.2 * inner
        g[2:] += 0.1 * inner
        g[:-2] += 0.1 * inner
    return (g,)


def make_args(n=200, seed=23):
    return (np.random.default_rng(seed).normal(size=n),)
