"""The computations of the suite written in the styles people use (issue #21): each
group shares its arguments and hand-written gradient, one ``Workload`` per style,
named ``group/style``.  ``python -m benchmarks --only styles`` times them."""

from .._base import Workload
from . import dense, dict_model, dot, horner, particles

STYLES: list[Workload] = [
    *dot.WORKLOADS,
    *dense.WORKLOADS,
    *particles.WORKLOADS,
    *horner.WORKLOADS,
    *dict_model.WORKLOADS,
]

STYLE_BY_NAME: dict[str, Workload] = {w.name: w for w in STYLES}

__all__ = ["STYLES", "STYLE_BY_NAME"]
