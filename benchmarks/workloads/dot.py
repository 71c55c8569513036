"""3. Dot product of two lists of floats, n = 1000."""

import random

from ._base import Workload


def dot(xs, ys):
    s = 0.0
    for x, y in zip(xs, ys):
        s += x * y
    return s


def dot_grad(xs, ys):
    return (list(ys), list(xs))


def make_args(n):
    r = random.Random(3)
    return ([r.uniform(-1, 1) for _ in range(n)], [r.uniform(-1, 1) for _ in range(n)])


WORKLOAD = Workload(
    name="dot",
    title="dot product, n = 1000",
    primal=dot,
    hand_grad=dot_grad,
    make_args=make_args,
    wrt=(0, 1),
    default_size=1000,
    check_size=50,
)
