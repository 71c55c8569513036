"""Checkpointing (issue #24): time and peak memory of a long simulation's gradient with and
without ``dplus.checkpoint_loop``.

Four particles in a smooth force field (the ``particles`` workload's physics, the state a
tuple of 16 floats), ``n`` Euler steps; the gradient of the final squared distance to a
target with respect to the friction and the initial velocity. Each cell runs in a fresh
process; its memory is the growth of its resident set's peak during the gradient (the
high-water mark reset before the call, on Linux; ``ru_maxrss`` elsewhere), the primal's
beside it.
A cell runs under an address-space limit (a share of the memory available when it starts),
so a gradient that does not fit (the plain loop's at 10^6 steps may not) fails alone with a
``MemoryError`` reported in its row, instead of taking memory from the rest of the machine.
The gradients of the schedules are compared with the plain loop's before anything is
reported (with the revolve schedule's when the plain one did not fit). The load average of
the machine is printed beside each cell. Opt-in (long): ``python -m benchmarks --only
checkpoint``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import json, math, os, resource, sys, time
import dplus

DT = 0.01
n, schedule = int(sys.argv[1]), sys.argv[2]
snapshots = int(sys.argv[3]) if len(sys.argv) > 3 else None

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
    options = {"schedule": schedule}
    if schedule == "revolve":
        options["snapshots"] = snapshots
    return loss(dplus.checkpoint_loop(lambda s: step(s, c), start(v0), n, **options))

dplus.define_dplus(start)
dplus.define_dplus(loss)

def run(n):
    if schedule == "primal":
        return plain(0.1, 0.3, n), None
    if schedule == "plain":
        return None, dplus.grad(plain)(0.1, 0.3, n)[:2]
    return None, dplus.grad(checkpointed)(0.1, 0.3, n)[:2]

def status_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return None

def reset_peak():
    # (Linux: the resident set's high-water mark starts again from the current size)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False

run(10)  # transformation, caches
exact = reset_peak()
base = status_mib("VmRSS") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
load = os.getloadavg()[0]
t0 = time.perf_counter()
c0 = time.process_time()
try:
    value, g = run(n)
except MemoryError:
    dt = time.perf_counter() - t0
    g = None  # (drop what the failed call held before reporting)
    print(json.dumps({"error": f"MemoryError after {dt:.0f} s", "load": load}))
    sys.exit(0)
dt = time.perf_counter() - t0
cpu = time.process_time() - c0
peak = status_mib("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"time": dt, "cpu": cpu, "peak_mib": peak - base, "grad": g, "load": load,
                  "load_after": os.getloadavg()[0]}))
"""

# revolve's snapshots in the table: about as many states as bisection keeps at 10^6 steps
REVOLVE_SNAPSHOTS = 20


def available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * 1024**3


def _cell(n: int, schedule: str, snapshots: int | None = None) -> dict:
    limit = int(0.6 * available_bytes())

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    # (in a file: dplus reads the source of what it differentiates)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "checkpoint_cell.py"
        script.write_text(CHILD)
        argv = [sys.executable, str(script), str(n), schedule]
        if snapshots is not None:
            argv.append(str(snapshots))
        r = subprocess.run(
            argv, capture_output=True, text=True, timeout=7200, preexec_fn=limit_memory
        )
    if r.returncode:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return {"error": last, "limit_gib": limit / 1024**3}
    cell = json.loads(r.stdout.strip().splitlines()[-1])
    cell["limit_gib"] = limit / 1024**3
    shown = {key: value for key, value in cell.items() if key != "grad"}
    print(f"checkpoint n={n} {schedule}: {shown}", file=sys.stderr, flush=True)
    return cell


def _mib(x: float) -> str:
    return "< 0.1 MiB" if x < 0.1 else f"{x:.1f} MiB"


def _matches(grad: list, reference: list | None) -> str:
    if reference is None:
        return "?"
    same = all(abs(a - b) <= 1e-9 * max(1.0, abs(b)) for a, b in zip(grad, reference))
    return "yes" if same else "NO"


def run_checkpointing(cfg: Any, out: Any) -> None:
    sizes = [10_000] if cfg.quick else [100_000, 1_000_000]
    k = REVOLVE_SNAPSHOTS
    out(
        "Checkpointing a long simulation (4 particles, n Euler steps; gradient in c and v0; each cell a fresh "
        "process, after a warm-up call; memory: peak RSS during the call above the RSS before it; load: the 1-minute load "
        f"average when the cell started / ended, on {os.cpu_count()} cores; CPU time: the process's own, which other load "
        "changes less than the wall clock):"
    )
    header = [
        "n",
        "schedule",
        "CPU time",
        "wall time",
        "CPU / primal CPU",
        "peak memory",
        "gradient",
        "load",
    ]
    rows = []
    schedules: list[tuple[str, str, int | None]] = [
        ("plain", "plain loop", None),
        ("sqrt", "sqrt", None),
        ("bisection", "bisection", None),
        ("revolve", f"revolve, {k} snapshots", k),
    ]
    for n in sizes:
        primal = _cell(n, "primal")
        cells = {name: _cell(n, name, snapshots) for name, _, snapshots in schedules}
        reference = cells["plain"].get("grad") or cells["revolve"].get("grad")
        for name, label, _ in schedules:
            cell = cells[name]
            if "error" in cell:
                rows.append(
                    [
                        f"{n:,}",
                        label,
                        f"did not run: {cell['error'][:70]} (limit {cell['limit_gib']:.1f} GiB)",
                        "",
                        "",
                        "",
                        "",
                        f"{cell.get('load', float('nan')):.1f}",
                    ]
                )
                continue
            if name == "plain" or (name == "revolve" and "grad" not in cells["plain"]):
                same = "reference"
            else:
                same = "matches" if _matches(cell["grad"], reference) == "yes" else "DIFFERS"
            ratio = cell["cpu"] / primal["cpu"] if primal.get("cpu") else float("nan")
            rows.append(
                [
                    f"{n:,}",
                    label,
                    f"{cell['cpu']:.1f} s",
                    f"{cell['time']:.1f} s",
                    f"{ratio:.0f}x",
                    _mib(cell["peak_mib"]),
                    same,
                    f"{cell['load']:.1f} / {cell['load_after']:.1f}",
                ]
            )
        if "time" in primal:
            rows.append(
                [
                    f"{n:,}",
                    "(primal)",
                    f"{primal['cpu']:.2f} s",
                    f"{primal['time']:.2f} s",
                    "1x",
                    _mib(primal["peak_mib"]),
                    "",
                    f"{primal['load']:.1f} / {primal['load_after']:.1f}",
                ]
            )
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    out("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        out("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
