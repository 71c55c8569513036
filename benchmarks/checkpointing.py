"""Checkpointing (issue #24): time and peak memory of a long simulation's gradient with and
without ``dplus.checkpoint_loop``.

Four particles in a smooth force field (the ``particles`` workload's physics, the state a
tuple of 16 floats), ``n`` Euler steps; the gradient of the final squared distance to a
target with respect to the friction and the initial velocity. Each cell runs in a fresh
process, so its peak resident memory (``ru_maxrss``) is its own; the primal's is beside it.
The gradients of the schedules are compared with the plain loop's before anything is
reported. Opt-in (long): ``python -m benchmarks --only checkpoint``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import json, math, resource, sys, time
import dplus

DT = 0.01
n, schedule = int(sys.argv[1]), sys.argv[2]

def step(state, c):
    out = []
    for i in range(4):
        x, y, vx, vy = state[4 * i: 4 * i + 4]
        fx = -x + 0.3 * math.sin(2.0 * y)
        fy = -y + 0.3 * math.cos(2.0 * x)
        out += [x + DT * vx, y + DT * vy, vx + DT * (fx - c * vx), vy + DT * (fy - c * vy)]
    return tuple(out)

dplus.define_dplus(step)

def start(v0):
    return tuple(v for i in range(4) for v in (0.1 * i, -0.2 * i, v0, 0.5 * v0))

def loss(state):
    return sum((state[4 * i] - 1.0) ** 2 + (state[4 * i + 1] + 0.5) ** 2 for i in range(4))

@dplus.define_dplus
def plain(c, v0, n):
    s = start(v0)
    for _ in range(n):
        s = step(s, c)
    return loss(s)

@dplus.define_dplus
def checkpointed(c, v0, n):
    return loss(dplus.checkpoint_loop(lambda s: step(s, c), start(v0), n, schedule=schedule))

dplus.define_dplus(start)
dplus.define_dplus(loss)
def run(n):
    if schedule == "primal":
        return plain(0.1, 0.3, n), None
    if schedule == "plain":
        return None, dplus.grad(plain)(0.1, 0.3, n)[:2]
    return None, dplus.grad(checkpointed)(0.1, 0.3, n)[:2]

run(10)  # transformation, caches
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
value, g = run(n)
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"time": dt, "peak_mib": (peak - base) / 1024, "grad": g}))
"""


def _cell(n: int, schedule: str) -> dict:
    # (in a file: dplus reads the source of what it differentiates)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "checkpoint_cell.py"
        script.write_text(CHILD)
        r = subprocess.run(
            [sys.executable, str(script), str(n), schedule],
            capture_output=True,
            text=True,
            timeout=3600,
        )
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout)


def run_checkpointing(cfg: Any, out: Any) -> None:
    sizes = [10_000] if cfg.quick else [10_000, 100_000, 1_000_000]
    out(
        "Checkpointing a long simulation (4 particles, n Euler steps; gradient in c and v0; each cell a fresh process, after a warm-up call;"
        " memory: growth of peak RSS during the call):"
    )
    header = ["n", "schedule", "time", "ratio to primal", "peak memory", "gradient matches plain"]
    rows = []
    for n in sizes:
        primal = _cell(n, "primal")
        reference = None
        for schedule in ("plain", "sqrt", "bisection"):
            cell = _cell(n, schedule)
            if "error" in cell:
                rows.append([f"{n:,}", schedule, "error: " + cell["error"][:80], "", "", ""])
                continue
            if schedule == "plain":
                reference = cell["grad"]
            same = (
                "reference"
                if schedule == "plain"
                else (
                    "yes"
                    if reference is not None
                    and all(
                        abs(a - b) <= 1e-9 * max(1.0, abs(b))
                        for a, b in zip(cell["grad"], reference)
                    )
                    else "NO"
                    if reference is not None
                    else "?"
                )
            )
            ratio = (
                cell["time"] / primal["time"]
                if "time" in primal and primal["time"] > 0
                else float("nan")
            )
            rows.append(
                [
                    f"{n:,}",
                    schedule,
                    f"{cell['time']:.2f} s",
                    f"{ratio:.1f}x",
                    f"{cell['peak_mib']:.1f} MiB",
                    same,
                ]
            )
        if "time" in primal:
            rows.append(
                [
                    f"{n:,}",
                    "(primal)",
                    f"{primal['time']:.3f} s",
                    "1x",
                    f"{primal['peak_mib']:.1f} MiB",
                    "",
                ]
            )
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    out("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        out("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
