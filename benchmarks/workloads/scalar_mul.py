"""2. Scalar multiplication ``x * y``: the fixed per-call overhead of each tool."""

from ._base import Workload


def mul(x, y):
    return x * y


def mul_grad(x, y):
    return (y, x)


WORKLOAD = Workload(
    name="scalar_mul",
    title="x * y",
    primal=mul,
    hand_grad=mul_grad,
    make_args=lambda n: (3.25, -1.5),
    wrt=(0, 1),
    default_size=1,
    size_label="-",
)
