"""1. Scalar loop: ``for _ in range(n): x = sin(x) * x + 0.5 * cos(x)`` (n = 1000).

The iteration converges to pi/2, where the map's derivative is 1/2, so the
gradient is about 2**-1000 (~1e-301): small but a normal float, and every tool
must get it to ~1e-13 relative.  The finite-difference check runs at n = 10.
"""

import math

from ._base import Workload


def scalar_loop(x, n):
    for _ in range(n):
        x = math.sin(x) * x + 0.5 * math.cos(x)
    return x


def scalar_loop_grad(x, n):
    d = 1.0
    for _ in range(n):
        s, c = math.sin(x), math.cos(x)
        d = d * (c * x + 0.5 * s)  # d/dx [sin(x) x + cos(x)/2] = cos(x) x + sin(x) - sin(x)/2
        x = s * x + 0.5 * c
    return (d,)


def make_args(n):
    return (0.7, n)


WORKLOAD = Workload(
    name="scalar_loop",
    title="scalar loop, 1000 iterations",
    primal=scalar_loop,
    hand_grad=scalar_loop_grad,
    make_args=make_args,
    wrt=(0,),
    default_size=1000,
    check_size=10,
    size_label="iterations",
)
