"""Horner evaluation of a degree-199 polynomial, in four styles.  Gradient with respect
to the coefficients and ``x``."""

from functools import reduce

from .. import recursive as _recursive
from .._base import Workload, differentiable
from ._make import style_workloads


@differentiable
def horner_from(coeffs, x, i):
    if i == len(coeffs):
        return 0.0
    return coeffs[i] + x * horner_from(coeffs, x, i + 1)


def horner_recursive(coeffs, x):
    return horner_from(coeffs, x, 0)


def horner_loop(coeffs, x):
    acc = 0.0
    for c in reversed(coeffs):
        acc = acc * x + c
    return acc


def horner_index(coeffs, x):
    acc = 0.0
    for i in range(len(coeffs) - 1, -1, -1):
        acc = acc * x + coeffs[i]
    return acc


def horner_reduce(coeffs, x):
    return reduce(lambda acc, c: acc * x + c, reversed(coeffs), 0.0)


def horner_grad(coeffs, x):
    return _recursive.horner_grad(coeffs, x, 0)


def make_args(depth):
    return _recursive.make_args(depth)[:2]


BASE = Workload(
    name="horner",
    title="Horner, degree 199",
    primal=horner_recursive,
    hand_grad=horner_grad,
    make_args=make_args,
    wrt=(0, 1),
    default_size=200,
    check_size=50,
    size_label="depth",
)

WORKLOADS = style_workloads(
    BASE,
    "horner",
    {
        "recursive": horner_recursive,
        "loop": horner_loop,
        "index": horner_index,
        "reduce": horner_reduce,
    },
)
