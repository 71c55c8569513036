"""``dplus.parallel.map`` on a Dask ``LocalCluster`` of 1 and 2 worker processes (issue #24),
beside the gradient computed in this process.

Two workloads: an ensemble of 16 particle simulations (``steps`` Euler steps each, the
gradient of the summed losses with respect to the shared friction and force scale), and a
sum of per-example losses of a small model over ``examples`` examples. The gradients are
compared with the in-process one before anything is reported. Opt-in (long):
``python -m benchmarks --only parallel``; needs ``dask[distributed]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import json, math, sys, time
import dplus

DT = 0.01
size = 0


def simulate(params, start):
    c, k = params
    x, y, vx, vy = start
    for _ in range(size):
        fx = -k * x + 0.3 * math.sin(2.0 * y)
        fy = -k * y + 0.3 * math.cos(2.0 * x)
        x, y, vx, vy = x + DT * vx, y + DT * vy, vx + DT * (fx - c * vx), vy + DT * (fy - c * vy)
    return (x - 1.0) ** 2 + (y + 0.5) ** 2


def example_loss(params, xy):
    w, b = params
    x, y = xy
    return (math.tanh(w * x + b) - y) ** 2


dplus.define_dplus(simulate)
dplus.define_dplus(example_loss)


def main():
    global size
    workload, size, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if workload == "ensemble":
        items = [(0.1 * i, -0.05 * i, 0.3, 0.1 * (i % 4)) for i in range(16)]
        one, params = simulate, (0.1, 1.0)
    else:
        items = [(i / size, math.sin(7.0 * i / size)) for i in range(size)]
        one, params = example_loss, (0.5, 0.1)

    client = None
    if workers:
        from distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None))

    def total(p, q):
        return sum(dplus.parallel.map(lambda item: one((p, q), item), items, client=client))

    def total_in_process(p, q):
        return sum(one((p, q), item) for item in items)

    dplus.define_dplus(total)
    g = dplus.grad(total)(*params)  # warm-up: transformation on the driver and the workers
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        g = dplus.grad(total)(*params)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    total_in_process(*params)
    primal_time = time.perf_counter() - t0
    print(json.dumps({"time": min(times), "grad": g, "primal_time": primal_time}))
    if client is not None:
        client.close()


if __name__ == "__main__":
    main()
"""


def _cell(workload: str, size: int, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "parallel_cell.py"
        script.write_text(CHILD)
        r = subprocess.run(
            [sys.executable, str(script), workload, str(size), str(workers)],
            capture_output=True,
            text=True,
            timeout=3600,
            cwd=tmp,
        )
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_parallel(cfg: Any, out: Any) -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        out("dplus.parallel.map: dask[distributed] is not installed; skipped")
        return
    cases = [
        (
            "ensemble",
            2_000 if cfg.quick else 20_000,
            "16 particle simulations, {size:,} steps each",
        ),
        (
            "examples",
            10_000 if cfg.quick else 100_000,
            "sum of per-example losses, {size:,} examples",
        ),
    ]
    out(
        "dplus.parallel.map (gradient time, best of 3 after a warm-up; workers are processes of a LocalCluster, "
        "1 thread each):"
    )
    header = ["workload", "where", "gradient time", "speed-up vs 1 worker", "gradient matches"]
    rows = []
    for workload, size, title in cases:
        label = title.format(size=size)
        reference = _cell(workload, size, 0)
        one_worker = None
        for workers in (0, 1, 2):
            cell = reference if workers == 0 else _cell(workload, size, workers)
            where = (
                "in process (no client)"
                if workers == 0
                else f"LocalCluster, {workers} worker{'s' * (workers > 1)}"
            )
            if "error" in cell:
                rows.append([label, where, "error: " + cell["error"][:80], "", ""])
                continue
            if workers == 1:
                one_worker = cell["time"]
            speed = f"{one_worker / cell['time']:.2f}x" if workers == 2 and one_worker else ""
            same = (
                "reference"
                if workers == 0
                else (
                    "yes"
                    if "grad" in reference
                    and all(
                        abs(a - b) <= 1e-9 * max(1.0, abs(b))
                        for a, b in zip(cell["grad"], reference["grad"])
                    )
                    else "NO"
                )
            )
            rows.append([label, where, f"{cell['time']:.3f} s", speed, same])
        if "primal_time" in reference:
            rows.append([label, "primal, in process", f"{reference['primal_time']:.3f} s", "", ""])
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    out("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        out("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
