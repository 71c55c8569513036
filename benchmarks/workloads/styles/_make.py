"""One ``Workload`` per style of a computation: the same arguments, the same hand-written
gradient, a different primal."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .._base import Workload


def style_workloads(
    base: Workload, group: str, primals: dict[str, Callable], test_size: int | None = None
) -> list[Workload]:
    """``base`` with each of ``primals`` as its primal, named ``group/style``.
    ``test_size`` is the small size tests run at (default: ``base.check_size``)."""
    out = []
    for style, primal in primals.items():
        w = dataclasses.replace(
            base,
            name=f"{group}/{style}",
            title=f"{base.title}: {style}",
            primal=primal,
            extra={**base.extra, "group": group, "style": style, "test_size": test_size},
        )
        out.append(w)
    return out
