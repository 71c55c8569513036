"""Dot product of two lists of floats, n = 1000, in four styles."""

from .. import dot as _dot
from ._make import style_workloads


def dot_loop(xs, ys):
    acc = 0.0
    for x, y in zip(xs, ys):
        acc = acc + x * y
    return acc


def dot_genexpr(xs, ys):
    return sum(x * y for x, y in zip(xs, ys))


def dot_index(xs, ys):
    acc = 0.0
    for i in range(len(xs)):
        acc += xs[i] * ys[i]
    return acc


def dot_enumerate(xs, ys):
    acc = 0.0
    for i, x in enumerate(xs):
        acc += x * ys[i]
    return acc


WORKLOADS = style_workloads(
    _dot.WORKLOAD,
    "dot",
    {
        "loop": dot_loop,
        "genexpr": dot_genexpr,
        "index": dot_index,
        "enumerate": dot_enumerate,
    },
)
