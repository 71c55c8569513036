"""9. A recursive function: Horner evaluation of a degree-199 polynomial written
as recursion (depth 200), ``horner(cs, x, i) = cs[i] + x * horner(cs, x, i + 1)``.
Gradient with respect to the coefficients and ``x``."""

import random

from ._base import Workload, differentiable


@differentiable
def horner(coeffs, x, i):
    if i == len(coeffs):
        return 0.0
    return coeffs[i] + x * horner(coeffs, x, i + 1)


def horner_grad(coeffs, x, i):
    n = len(coeffs)
    # d/dc_k = x**(k - i); d/dx = sum_k c_k (k - i) x**(k - i - 1)
    gc = [0.0] * n
    p = 1.0
    for k in range(i, n):
        gc[k] = p
        p *= x
    gx = 0.0
    p = 1.0
    for k in range(i + 1, n):
        gx += coeffs[k] * (k - i) * p
        p *= x
    return (gc, gx)


def make_args(depth):
    r = random.Random(9)
    return ([r.uniform(-1, 1) for _ in range(depth)], 0.97, 0)


WORKLOAD = Workload(
    name="recursive",
    title="recursive Horner, depth 200",
    primal=horner,
    hand_grad=horner_grad,
    make_args=make_args,
    wrt=(0, 1),
    default_size=200,
    check_size=50,
    size_label="depth",
)
