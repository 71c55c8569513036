"""The benchmark workloads: plain-Python functions with hand-written gradients.

``ALL`` lists them in table order; each has ``.primal``, ``.hand_grad``,
``.args(size=None)``, ``.wrt``, ``.select(full_grad)`` and
``.check_hand_grad()`` (see :class:`benchmarks.workloads._base.Workload`).
"""

from . import (
    dict_model,
    dot,
    matvec,
    mlp,
    particles,
    quaternion,
    recursive,
    scalar_loop,
    scalar_mul,
)
from ._base import Workload, dplus_setup_error, max_rel_error, to_floats

ALL: list[Workload] = [
    scalar_loop.WORKLOAD,
    scalar_mul.WORKLOAD,
    dot.WORKLOAD,
    matvec.WORKLOAD,
    quaternion.WORKLOAD,
    mlp.WORKLOAD,
    particles.WORKLOAD,
    dict_model.WORKLOAD,
    recursive.WORKLOAD,
]

BY_NAME: dict[str, Workload] = {w.name: w for w in ALL}

__all__ = ["ALL", "BY_NAME", "Workload", "max_rel_error", "to_floats", "dplus_setup_error"]
