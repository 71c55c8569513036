"""``dplus.parallel.map`` on a Dask ``LocalCluster`` of 1 and 2 worker processes, and on Ray
(``RayWorkers`` of 1 and 2 actors) when Ray is installed, beside the gradient computed in
this process (issue #24).

Two workloads: an ensemble of 16 particle simulations (``steps`` Euler steps each, the
gradient of the summed losses with respect to the shared friction and force scale), and a
sum of per-example losses of a small model over ``examples`` examples. Then the overhead of
a task against its size: 16 tasks of one item each, an item a loop of m steps, m from 10 to
10,000, on one worker. Each cell is a fresh process; the gradients are compared with the
in-process one before anything is reported; the machine's 1-minute load average when each
cell started is printed beside it (other processes compete for the cores). Opt-in (long):
``python -m benchmarks --only parallel``; needs ``dask[distributed]`` (and ``ray`` for its
rows).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import json, math, os, sys, time
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


def busy(params, x0):
    a, b = params
    x = x0
    for _ in range(size):
        x = math.sin(a * x) + b * 0.5
    return x * x


dplus.define_dplus(simulate)
dplus.define_dplus(example_loss)
dplus.define_dplus(busy)


def main():
    global size
    workload, size, backend, workers = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    chunks = None
    if workload == "ensemble":
        items = [(0.1 * i, -0.05 * i, 0.3, 0.1 * (i % 4)) for i in range(16)]
        one, params = simulate, (0.1, 1.0)
    elif workload == "examples":
        items = [(i / size, math.sin(7.0 * i / size)) for i in range(size)]
        one, params = example_loss, (0.5, 0.1)
    else:  # "tasks": 16 tasks of one item, each a loop of `size` steps
        items = [0.1 * i for i in range(16)]
        one, params, chunks = busy, (0.9, 0.3), 16

    load = os.getloadavg()[0]
    client = None
    if backend == "dask":
        from distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None))
    elif backend == "ray":
        import ray
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        client = dplus.parallel.RayWorkers(workers)

    def total(p, q):
        return sum(dplus.parallel.map(lambda item: one((p, q), item), items, client=client, chunks=chunks))

    def total_in_process(p, q):
        return sum(one((p, q), item) for item in items)

    def workers_cpu():
        # (each worker process's own CPU seconds so far: what other load changes least)
        if backend == "dask":
            return list(client.run(time.process_time).values())
        if backend == "ray":
            n = client.count()
            return client.at(range(n), time.process_time, [()] * n)
        return []

    dplus.define_dplus(total)
    g = dplus.grad(total)(*params)  # warm-up: transformation on the driver and the workers
    runs = []
    for _ in range(3):
        w0, c0, t0 = workers_cpu(), time.process_time(), time.perf_counter()
        g = dplus.grad(total)(*params)
        t1, c1 = time.perf_counter(), time.process_time()
        w1 = workers_cpu()
        runs.append({"time": t1 - t0, "cpu": c1 - c0, "workers_cpu": [b - a for a, b in zip(w0, w1)]})
    best = min(runs, key=lambda run: run["time"])
    t0, c0 = time.perf_counter(), time.process_time()
    total_in_process(*params)
    primal_time, primal_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({**best, "grad": g, "primal_time": primal_time, "primal_cpu": primal_cpu,
                      "load": load, "load_after": os.getloadavg()[0]}))
    if backend == "dask":
        client.close()
    elif backend == "ray":
        client.close()
        ray.shutdown()


if __name__ == "__main__":
    main()
"""


def _cell(workload: str, size: int, backend: str, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "parallel_cell.py"
        script.write_text(CHILD)
        r = subprocess.run(
            [sys.executable, str(script), workload, str(size), backend, str(workers)],
            capture_output=True,
            text=True,
            timeout=3600,
            cwd=tmp,
        )
    if r.returncode:
        cell = {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    else:
        cell = json.loads(r.stdout.strip().splitlines()[-1])
    shown = {key: value for key, value in cell.items() if key != "grad"}
    print(f"parallel {workload} {size} {backend} x{workers}: {shown}", file=sys.stderr, flush=True)
    return cell


def _same(cell: dict, reference: dict) -> str:
    if "grad" not in reference:
        return "?"
    ok = all(abs(a - b) <= 1e-9 * max(1.0, abs(b)) for a, b in zip(cell["grad"], reference["grad"]))
    return "yes" if ok else "NO"


def _table(out: Any, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    out("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        out("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def _load(cell: dict) -> str:
    return f"{cell['load']:.1f} / {cell['load_after']:.1f}"


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def run_parallel(cfg: Any, out: Any) -> None:
    if not _has("distributed"):
        out("dplus.parallel.map: dask[distributed] is not installed; skipped")
        return
    backends = [("dask", "Dask LocalCluster")]
    if _has("ray"):
        backends.append(("ray", "Ray, RayWorkers"))
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
        "dplus.parallel.map (gradient time, best of 3 after a warm-up; workers are processes, 1 thread each; "
        "CPU: the CPU seconds of the driver process and of each worker process during that gradient; "
        f"load: the 1-minute load average when the cell started / ended, on {os.cpu_count()} cores):"
    )
    header = [
        "workload",
        "where",
        "gradient time",
        "vs 1 worker",
        "CPU: driver",
        "CPU: each worker",
        "gradient matches",
        "load",
    ]
    rows = []
    for workload, size, title in cases:
        label = title.format(size=size)
        reference = _cell(workload, size, "none", 0)
        places = [("none", 0)] + [(b, w) for b, _ in backends for w in (1, 2)]
        one_worker: dict[str, float] = {}
        for backend, workers in places:
            cell = reference if backend == "none" else _cell(workload, size, backend, workers)
            where = (
                "in process (no client)"
                if backend == "none"
                else f"{dict(backends)[backend]}, {workers} worker{'s' * (workers > 1)}"
            )
            if "error" in cell:
                rows.append([label, where, "error: " + cell["error"][:80], "", "", "", "", ""])
                continue
            if workers == 1:
                one_worker[backend] = cell["time"]
            speed = (
                f"{one_worker[backend] / cell['time']:.2f}x"
                if workers == 2 and backend in one_worker
                else ""
            )
            same = "reference" if backend == "none" else _same(cell, reference)
            rows.append(
                [
                    label,
                    where,
                    f"{cell['time']:.3f} s",
                    speed,
                    f"{cell['cpu']:.3f} s",
                    ", ".join(f"{c:.3f} s" for c in cell["workers_cpu"]),
                    same,
                    _load(cell),
                ]
            )
        if "primal_time" in reference:
            rows.append(
                [
                    label,
                    "primal, in process",
                    f"{reference['primal_time']:.3f} s",
                    "",
                    f"{reference['primal_cpu']:.3f} s",
                    "",
                    "",
                    _load(reference),
                ]
            )
    _table(out, header, rows)

    out()
    out(
        "Overhead per task against the task's size (16 tasks of one item, an item a loop of m steps; "
        "one worker; overhead = (time on the worker - time in process) / 16; CPU overhead = (CPU seconds of the "
        "driver and the worker - CPU seconds in process) / 16):"
    )
    header = [
        "m",
        "task (in process)",
        "where",
        "task (1 worker)",
        "overhead per task",
        "CPU overhead per task",
        "load",
    ]
    rows = []
    for m in [10, 1_000] if cfg.quick else [10, 100, 1_000, 10_000]:
        here = _cell("tasks", m, "none", 0)
        if "error" in here:
            rows.append([f"{m:,}", "error: " + here["error"][:80], "", "", "", "", ""])
            continue
        per_task_here = here["time"] / 16
        for backend, name in backends:
            cell = _cell("tasks", m, backend, 1)
            if "error" in cell:
                rows.append([f"{m:,}", "", name, "error: " + cell["error"][:80], "", "", ""])
                continue
            if _same(cell, here) != "yes":
                rows.append([f"{m:,}", "", name, "gradient differs", "", "", ""])
                continue
            per_task = cell["time"] / 16
            # (CPU: the driver's and the worker's seconds against the in-process run's)
            cpu_per_task = (cell["cpu"] + sum(cell["workers_cpu"]) - here["cpu"]) / 16
            rows.append(
                [
                    f"{m:,}",
                    f"{per_task_here * 1e3:.2f} ms",
                    name,
                    f"{per_task * 1e3:.2f} ms",
                    f"{(per_task - per_task_here) * 1e3:.2f} ms",
                    f"{cpu_per_task * 1e3:.2f} ms",
                    _load(cell),
                ]
            )
    _table(out, header, rows)
