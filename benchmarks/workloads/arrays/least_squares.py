"""Ridge least squares, A of 1,000 x 20: ``|A x - b|^2 / n + 0.01 |x|^2``; gradient w.r.t. x."""

import numpy as np

NAME = "least_squares"
TITLE = "least squares 1000x20, ridge"
WRT = (0,)
IN_PLACE = False


def primal(x, A, b):
    r = A @ x - b
    return np.sum(r * r) / A.shape[0] + 0.01 * np.sum(x * x)


def hand_grad(x, A, b):
    r = A @ x - b
    return (2.0 * (A.T @ r) / A.shape[0] + 0.02 * x,)


def make_args(n=1000, d=20, seed=22):
    r = np.random.default_rng(seed)
    return (r.normal(size=d), r.normal(size=(n, d)), r.normal(size=n))
