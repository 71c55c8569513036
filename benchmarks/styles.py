"""The styles family (issue #21): each computation of the suite written as people write
it (explicit loops, comprehensions and generator expressions, index loops into nested
lists, objects with methods, tuples unpacked in loop targets, dicts of parameters),
timed like the main table, then summarised per computation: dplus's gradient / primal
ratio for every style side by side, and the suite median.

Opt-in: ``python -m benchmarks --only styles`` (with ``--tools`` to pick columns).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from .workloads.styles import STYLES

if TYPE_CHECKING:
    from .runner import Config, Report

GOAL_STYLE = 10.0  # every style at most this many times its primal (issue #21)
GOAL_MEDIAN = 5.0  # the suite median at most this


def run_styles(cfg: Config, out: Report, workloads: list | None = None) -> None:
    from .runner import run_table

    chosen = STYLES if workloads is None else workloads
    out("Styles: the same computations written as people write them (issue #21)")
    out()
    results = run_table(cfg, chosen, out)
    if "dplus" in cfg.tools:
        summarise(chosen, results, out)


def summarise(workloads: list, results: dict, out: Report) -> None:
    """One line per computation: each style's dplus gradient / primal ratio."""
    out("dplus gradient / primal by computation and style (goal: each <= 10x, median <= 5x):")
    ratios: list[float] = []
    groups: dict[str, list[str]] = {}
    for w in workloads:
        group, style = w.extra["group"], w.extra["style"]
        r = _ratio(results, w.name)
        if r is not None:
            ratios.append(r)
        mark = "" if r is None or r <= GOAL_STYLE else " (!)"
        groups.setdefault(group, []).append(f"{style} {_fmt(r)}{mark}")
    for group, cells in groups.items():
        out(f"  {group:11} " + ", ".join(cells))
    if ratios:
        med = statistics.median(ratios)
        over = sum(r > GOAL_STYLE for r in ratios)
        out(
            f"  median {med:.1f}x over {len(ratios)} styles; worst {max(ratios):.1f}x; "
            f"{over} above {GOAL_STYLE:g}x"
        )
    out()


def _ratio(results: dict, name: str) -> float | None:
    d, p = results.get((name, "dplus")), results.get((name, "primal"))
    if d is None or p is None or not (d.ok and p.ok) or not p.seconds:
        return None
    return d.seconds / p.seconds


def _fmt(r: Any) -> str:
    return "-" if r is None else f"{r:.1f}x"
