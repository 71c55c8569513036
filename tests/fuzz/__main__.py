"""Long fuzzing runs: ``python -m tests.fuzz --programs 20000 --seed 1000 [--order 2] [--features ...]``."""

from __future__ import annotations

import argparse
import signal
import sys

from .generator import ALL
from .runner import run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--programs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0, help="first seed; program k uses seed + k")
    p.add_argument("--order", type=int, default=1, choices=(1, 2, 3))
    p.add_argument(
        "--features",
        nargs="*",
        default=None,
        help=f"families and constructs to include (default all): {' '.join(ALL)}",
    )
    p.add_argument("--exclude", nargs="*", default=(), help="families to leave out")
    p.add_argument("--out", default="fuzz-failures", help="directory for the shrunk reproductions")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--shrink-seconds", type=float, default=60.0)
    p.add_argument("--time-limit", type=float, default=5.0, help="seconds per program")
    p.add_argument("--budget", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--progress", type=int, default=200, help="print progress every N programs")
    a = p.parse_args(argv)
    features = set(a.features or ALL)
    unknown = (features | set(a.exclude)) - set(ALL)
    if unknown:
        p.error(f"unknown feature families: {sorted(unknown)}")
    features -= set(a.exclude)
    signal.signal(
        signal.SIGTERM, signal.default_int_handler
    )  # kill <pid>: stop and print the table
    summary = run(
        range(a.seed, a.seed + a.programs),
        features,
        a.order,
        out_dir=a.out,
        budget=a.budget,
        shrink=not a.no_shrink,
        shrink_budget=a.shrink_seconds,
        time_limit=a.time_limit,
        progress_every=a.progress,
    )
    print()
    print(summary.table())
    print(f"\nshrunk reproductions in {a.out}/")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
