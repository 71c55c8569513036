"""4. Sum of a matrix-vector product on lists of lists, n = 100 (10 000 multiply-adds)."""

import random

from ._base import Workload


def sum_matvec(m, v):
    total = 0.0
    for row in m:
        acc = 0.0
        for a, b in zip(row, v):
            acc += a * b
        total += acc
    return total


def sum_matvec_grad(m, v):
    gm = [list(v) for _ in m]
    gv = [0.0] * len(v)
    for row in m:
        for j, a in enumerate(row):
            gv[j] += a
    return (gm, gv)


def make_args(n):
    r = random.Random(4)
    m = [[r.uniform(-1, 1) for _ in range(n)] for _ in range(n)]
    v = [r.uniform(-1, 1) for _ in range(n)]
    return (m, v)


WORKLOAD = Workload(
    name="matvec",
    title="sum of matrix-vector product, n = 100",
    primal=sum_matvec,
    hand_grad=sum_matvec_grad,
    make_args=make_args,
    wrt=(0, 1),
    default_size=100,
    check_size=10,
)
