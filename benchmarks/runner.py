"""``python -m benchmarks``: the table, the scaling/memory/nested/transform checks."""

from __future__ import annotations

import argparse
import datetime
import gc
import math
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import funcs
from .arrays import run_arrays
from .bigfn import run_bigfn
from .cells import REL_TOL, Cell, JitWorker, run_cell
from .checkpointing import run_checkpointing
from .parallel import run_parallel
from .styles import run_styles
from .timing import TooSlow, autorange, call_once, fmt_seconds, time_limit
from .tools import TOOLS, Tool, tool_versions
from .workloads import ALL, BY_NAME, dplus_setup_error
from .workloads.styles import STYLE_BY_NAME

SECTIONS = (
    "table",
    "arrays",
    "scaling",
    "memory",
    "nested",
    "transform",
    "bigfn",
    "checkpoint",
    "parallel",
    "styles",
)
OPT_IN = ("bigfn", "checkpoint", "parallel", "styles")  # long: run only when named in --only


@dataclass
class Config:
    quick: bool
    budget: float  # seconds per cell
    cap: float  # seconds for any single call
    repeats: int
    jit_compile_cap: float
    tools: list[str]

    @classmethod
    def make(cls, quick: bool, tools: list[str]) -> Config:
        if quick:
            return cls(True, budget=0.2, cap=1.0, repeats=3, jit_compile_cap=3.0, tools=tools)
        return cls(False, budget=1.5, cap=5.0, repeats=5, jit_compile_cap=40.0, tools=tools)


class Report:
    """Lines printed as they come (``echo``) and kept for the output file."""

    def __init__(self, echo: bool = True) -> None:
        self.lines: list[str] = []
        self.echo = echo

    def __call__(self, text: str = "") -> None:
        for line in text.split("\n"):
            self.lines.append(line)
            if self.echo:
                print(line, flush=True)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def progress(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# header


def machine_lines() -> list[str]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return [
        f"machine:  {platform.platform()}; {cpu or 'cpu ?'}",
        f"          cpu_count {os.cpu_count()}, usable {affinity}",
        f"python:   {platform.python_implementation()} {platform.python_version()} ({sys.executable})",
    ]


def dplus_status() -> str:
    try:
        import dplus

        v = dplus.grad(lambda x: x * x)(3.0)
        return f"dplus.grad(lambda x: x * x)(3.0) = {v!r}"
    except Exception as e:
        return f"dplus.grad(lambda x: x * x)(3.0) fails: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


# --------------------------------------------------------------------------
# table formatting


class Notes:
    """Footnotes; cells with the same message share one."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.labels: list[list[str]] = []

    def add(self, label: str, text: str) -> int:
        if text in self.texts:
            i = self.texts.index(text)
            self.labels[i].append(label)
            return i + 1
        self.texts.append(text)
        self.labels.append([label])
        return len(self.texts)

    @property
    def items(self) -> list[str]:
        out = []
        for text, labels in zip(self.texts, self.labels):
            out.append(f"{', '.join(labels)}: {text}")
        return out


def cell_text(cell: Cell | None, notes: Notes, label: str, width: int = 30) -> str:
    if cell is None:
        return ""
    if cell.status == "ok":
        return fmt_seconds(cell.seconds)
    if cell.status == "n/a":
        n = notes.add(label.split(" / ")[-1], f"not available: {cell.msg}")
        return f"n/a [{n}]"
    if cell.status == "wrong":
        n = notes.add(label, f"WRONG: {cell.detail}")
        return f"WRONG [{n}]"
    if cell.status == "too_slow":
        extra = (
            f"; first call {cell.first:.3g} s"
            if cell.first and "first call" not in cell.detail
            else ""
        )
        n = notes.add(label, f"{cell.detail}{extra}")
        return f"{cell.msg} [{n}]"
    n = notes.add(label, cell.detail or cell.msg)
    text = f"error: {cell.msg}"
    tag = f" [{n}]"
    if len(text) + len(tag) > width:
        text = text[: width - len(tag) - 3] + "..."
    return text + tag


def render_table(header: list[str], rows: list[list[str]], align_left: int = 1) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out = []

    def fmt(row: list[str]) -> str:
        parts = []
        for i, (c, wd) in enumerate(zip(row, widths)):
            parts.append(c.ljust(wd) if i < align_left else c.rjust(wd))
        return "  ".join(parts).rstrip()

    out.append(fmt(header))
    out.append("  ".join("-" * wd for wd in widths))
    out.extend(fmt(r) for r in rows)
    return "\n".join(out)


def fmt_ratio(r: float | None) -> str:
    if r is None or math.isnan(r):
        return "-"
    if r >= 100:
        return f"{r:,.0f}x"
    if r >= 10:
        return f"{r:.1f}x"
    return f"{r:.2f}x"


# --------------------------------------------------------------------------
# main table


def run_table(cfg: Config, workloads: list, out: Report) -> dict:
    tools = [t for t in TOOLS if t.name in cfg.tools]
    results: dict[tuple[str, str], Cell] = {}
    worker = JitWorker()
    fd_lines = []
    try:
        for w in workloads:
            try:
                e = w.check_hand_grad()
                at = (
                    ""
                    if w.size_label == "-"
                    else f", at {w.size_label} = {w.check_size or w.default_size}"
                )
                fd_lines.append(f"  {w.name:12} ok (max relative error {e:.1e}{at})")
                hand_ok = True
            except Exception as ex:
                fd_lines.append(f"  {w.name:12} FAILED: {ex}")
                hand_ok = False
            args = w.args()
            ref = w.hand_grad(*args) if hand_ok else None
            for t in tools:
                progress(f"{w.name} / {t.name}")
                if t.name == "jax-jit" and t.available():
                    cell = worker.run(
                        t.name,
                        w.name,
                        None,
                        cfg.budget,
                        cfg.jit_compile_cap,
                        timeout=cfg.jit_compile_cap + 3 * cfg.budget + 6.0,
                    )
                elif t.is_ad and ref is None:
                    cell = Cell(
                        "error",
                        msg="hand-written gradient failed its check",
                        detail="not timed: the reference gradient failed the finite-difference check",
                    )
                else:
                    cell = run_cell(t, w, args, ref, cfg.budget, cfg.cap)
                results[(w.name, t.name)] = cell
                progress(
                    f"{w.name} / {t.name}: {cell.status} "
                    f"{fmt_seconds(cell.seconds) if cell.seconds is not None else cell.msg}"
                )
    finally:
        worker.stop()

    out("Hand-written gradients against central finite differences (up to 40 components each):")
    out("\n".join(fd_lines))
    out()

    notes = Notes()
    names = [t.name for t in tools]
    header = ["workload"] + names + (["jit compile"] if "jax-jit" in names else [])
    rows = []
    for w in workloads:
        row = [w.name]
        for t in tools:
            row.append(cell_text(results[(w.name, t.name)], notes, f"{w.name} / {t.name}"))
        if "jax-jit" in names:
            c = results[(w.name, "jax-jit")]
            row.append(fmt_seconds(c.compile) if c.compile is not None else "-")
        rows.append(row)
    out("Seconds per gradient (primal: one call of the plain function; medians):")
    out(render_table(header, rows))
    out()

    def ratio_table(title: str, tools: list[str], base: str, time_of: Callable[[Any], Any]) -> None:
        """Each tool's time divided by the ``base`` column's, workload by workload."""
        rows = []
        for w in workloads:
            b = results[(w.name, base)]
            row = [w.name]
            for n in tools:
                c = results[(w.name, n)]
                ok = c.ok and b.ok and time_of(c) is not None and time_of(b)
                row.append(
                    fmt_ratio(time_of(c) / time_of(b))
                    if ok
                    else (_short_status(c) if base == "primal" else _short_status(c, b))
                )
            rows.append(row)
        out(title)
        out(render_table(["workload"] + tools, rows))
        out()

    if "primal" in names:
        ratio_tools = [n for n in names if n != "primal"]
        ratio_table(
            "Gradient time / primal time (same plain-Python primal for every tool; lower is better):",
            ratio_tools,
            "primal",
            lambda c: c.seconds,
        )
        # on a shared machine the medians carry other load, and it does not fall on every cell alike
        ratio_table(
            "The same ratios from the fastest repeat of each cell (least disturbed by other load):",
            ratio_tools,
            "primal",
            lambda c: c.best,
        )

    if "dplus" in names and any(results[(w.name, "dplus")].ok for w in workloads):
        others = [n for n in names if n not in ("primal", "hand", "dplus")]
        ratio_table(
            "Other tool's time / dplus time (> 1: dplus is faster):",
            others,
            "dplus",
            lambda c: c.seconds,
        )

    if notes.items:
        out("Notes:")
        for i, text in enumerate(notes.items, 1):
            lines = text.splitlines()
            out(f"  [{i}] {lines[0]}")
            for line in lines[1:]:
                out(f"      {line}")
        out()
    return results


def _short_status(c: Cell, d: Cell | None = None) -> str:
    if d is not None and not d.ok:
        return "-"
    return {"too_slow": "too slow", "wrong": "WRONG", "error": "error", "n/a": "n/a"}.get(
        c.status, "-"
    )


# --------------------------------------------------------------------------
# extras


def _dplus() -> Any:
    import dplus

    return dplus


def _tool(name: str) -> Tool:
    return next(t for t in TOOLS if t.name == name)


def run_scaling(cfg: Config, out: Report) -> None:
    out("Scaling: time at 4x the size / time at the size (about 4 when the cost is linear;")
    out("fastest repeat of each cell, the figure least disturbed by other load):")
    cases = [("dot", 1000), ("particles", 1000 if not cfg.quick else 250), ("recursive", 200)]
    rows = []
    notes = Notes()
    for name, n in cases:
        w = BY_NAME[name]
        for tname in ("primal", "hand", "dplus"):
            t = _tool(tname)
            cells = []
            for size in (n, 4 * n):
                progress(f"scaling {name} {tname} {size}")
                args = w.args(size)
                ref = w.hand_grad(*args)
                cells.append(run_cell(t, w, args, ref, cfg.budget, cfg.cap))
            a, b = cells
            ratio = fmt_ratio(b.best / a.best) if a.ok and b.ok else "-"
            for c in cells:
                if c.ok:
                    c.seconds = c.best
            rows.append(
                [
                    name,
                    f"{w.size_label} {n} -> {4 * n}",
                    tname,
                    cell_text(a, notes, f"scaling {name} {tname} at {n}"),
                    cell_text(b, notes, f"scaling {name} {tname} at {4 * n}"),
                    ratio,
                ]
            )
    out(
        render_table(
            ["workload", "size", "tool", "t(size)", "t(4 size)", "ratio"], rows, align_left=3
        )
    )
    for i, text in enumerate(notes.items, 1):
        out(f"  [{i}] {text.splitlines()[0]}")
    out()


def _failure_line(e: Exception) -> str:
    """A section's line for a measurement that did not finish: too slow, or what raised."""
    if isinstance(e, TooSlow):
        return f"  too slow: {e}"
    return f"  error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _kb(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def run_memory(cfg: Config, out: Report) -> None:
    out("Memory (tracemalloc; dplus gradient of the particle simulation):")
    w = BY_NAME["particles"]
    try:
        dplus = _dplus()
        g = dplus.grad(w.primal)
        steps = w.default_size if not cfg.quick else 250
        args = w.args(steps)
        g(*args)  # transform outside the measurement
        peaks = {}
        for label, fn, size in [
            ("primal", w.primal, steps),
            ("dplus", g, steps),
            ("dplus", g, 4 * steps),
        ]:
            a = w.args(size)
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                with time_limit(60.0):
                    r = fn(*a)
                peak = tracemalloc.get_traced_memory()[1] - base
                del r
            finally:
                tracemalloc.stop()
            peaks[(label, size)] = peak
            ops = size * 4
            out(
                f"  {label:6} {w.size_label}={size:5}: peak {_kb(peak):>14}  ({peak / ops:,.0f} bytes per particle-step)"
            )
        r = peaks[("dplus", 4 * steps)] / max(peaks[("dplus", steps)], 1)
        out(
            f"  dplus peak at {4 * steps} / at {steps} steps: {r:.2f} (about 4: the record is proportional to the work)"
        )

        n_small, n_big = 10, 50
        rep_steps = 100 if not cfg.quick else 20
        a = w.args(rep_steps)
        gc.collect()
        tracemalloc.start()
        try:
            cur = {}
            with time_limit(120.0):
                for i in range(1, n_big + 1):
                    g(*a)
                    if i in (n_small, n_big):
                        gc.collect()
                        cur[i] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        growth = cur[n_big] - cur[n_small]
        per_call = growth / (n_big - n_small)
        verdict = "no significant growth" if per_call < 1024 else "GROWS"
        out(
            f"  {n_big} repeated gradients ({rep_steps} steps): traced memory after {n_small} calls {_kb(cur[n_small])}, "
            f"after {n_big} calls {_kb(cur[n_big])}: {growth / 1024:+,.1f} KiB, {per_call:+,.0f} bytes per call "
            f"({verdict}; one gradient's record is ~{peaks[('dplus', steps)] * rep_steps / steps / 1024:,.0f} KiB)"
        )
    except Exception as e:
        out(_failure_line(e))
    out()
    run_record_by_style(cfg, out)


def run_record_by_style(cfg: Config, out: Report) -> None:
    """The forward record of a reduction of n floats, per element, in each style
    (``benchmarks/workloads/reductions.py``): after the forward pass, at the peak of
    forward and backward, and what is still held once the result is dropped (the gradient)."""
    from .workloads.reductions import STYLES

    n = 100_000 if cfg.quick else 1_000_000
    out(f"Forward record of a reduction of {n:,} floats, bytes per element (tracemalloc):")
    xs = [float(i % 7) / 7 for i in range(n)]
    ys = [float(i % 5) / 5 for i in range(n)]
    try:
        dplus = _dplus()
        for name, f, arity in STYLES:
            args = (xs, ys)[:arity]
            dplus.grad(f)(*[a[:8] for a in args])  # transform outside the measurement
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                with time_limit(120.0):
                    r = dplus.dplus(f)(*args)
                    after_forward = tracemalloc.get_traced_memory()[0] - base
                    gradient = r.backprop(1.0)
                peak = tracemalloc.get_traced_memory()[1] - base
                del r
                gc.collect()
                held = tracemalloc.get_traced_memory()[0] - base
                del gradient
            finally:
                tracemalloc.stop()
            out(
                f"  {name:26} record {after_forward / n:6.0f}   peak {peak / n:6.0f}   "
                f"held after {held / n:4.0f} (the gradient's lists: {32 * arity})"
            )
    except Exception as e:
        out(_failure_line(e))
    out()


def run_nested(cfg: Config, out: Report) -> None:
    out("Nested derivatives with dplus (order k = grad1 applied k times). 'first call' includes")
    out("transforming the code of order k-1; 'time' is a later call; 'code' is the bytecode of")
    out("the plus-functions generated for order k (all of them: the function, the rules it")
    out(
        "differentiates again, the tower of grad/grad1 wrappers), and '/prev' its growth per order:"
    )
    try:
        dplus = _dplus()
        from dplus.transform import transformer
    except Exception as e:
        out(f"  error: import dplus: {type(e).__name__}: {e}")
        out()
        return
    rows = []
    max_order = 3 if cfg.quick else 4
    for label, f, deriv, x in funcs.NESTED:
        tp = autorange(lambda f=f, x=x: f(x), cfg.budget, repeats=cfg.repeats)
        rows.append([label, "0", "", fmt_seconds(tp.seconds), "1.00x", "", "", "", "ok"])
        fn, prev, prev_code = f, tp.seconds, None
        for k in range(1, max_order + 1):
            progress(f"nested {label} order {k}")
            try:
                logged = len(transformer.COMPILE_LOG)
                fn = dplus.grad1(fn)
                t1, v = call_once(
                    lambda fn=fn, x=x: fn(x), 60.0 if cfg.quick else 300.0
                )  # includes the transform
                code = sum(size for _, _, size in transformer.COMPILE_LOG[logged:])
                ref = deriv(x, k)
                err = abs(v - ref) / max(abs(ref), 1e-300)
                check = "ok" if err <= 1e-8 else f"WRONG ({v!r} vs {ref!r})"
                t = autorange(
                    lambda fn=fn, x=x: fn(x), cfg.budget, first=t1, repeats=cfg.repeats, cap=cfg.cap
                )
                rows.append(
                    [
                        label,
                        str(k),
                        fmt_seconds(t1),
                        fmt_seconds(t.seconds),
                        fmt_ratio(t.seconds / tp.seconds),
                        fmt_ratio(t.seconds / prev),
                        f"{code:,} B",
                        fmt_ratio(code / prev_code) if prev_code else "",
                        check,
                    ]
                )
                prev, prev_code = t.seconds, code
            except TooSlow as e:
                rows.append([label, str(k), "too slow", "-", "-", "-", "-", "-", str(e)])
                break
            except Exception as e:
                msg = _failure_line(e).strip()
                rows.append(
                    [
                        label,
                        str(k),
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        msg if len(msg) <= 80 else msg[:77] + "...",
                    ]
                )
                break
    out(
        render_table(
            [
                "function",
                "order",
                "first call",
                "time",
                "/primal",
                "/prev",
                "code",
                "/prev",
                "value",
            ],
            rows,
            align_left=1,
        )
    )
    out()


def run_transform(cfg: Config, out: Report) -> None:
    import inspect

    f = funcs.long_function
    try:
        nlines = len(inspect.getsource(f).splitlines())
    except Exception:
        nlines = "?"
    out(f"Transformation time ({f.__name__}, {nlines} lines):")
    try:
        dplus = _dplus()
        x, y = 0.7, 1.3
        t_first, _ = call_once(lambda: dplus.grad(f)(x, y), 60.0)
        t_second, _ = call_once(lambda: dplus.grad(f)(x, y), 60.0)
        # the same source under a new code object: transformed again, with the rules'
        # inline templates (parsed once per process, on first use) already warm
        import types as _types

        # (five twins, the median: one transformation on a busy machine varies by a fifth)
        twins = []
        for _ in range(5):
            twin = _types.FunctionType(f.__code__.replace(), f.__globals__, f.__name__)
            twins.append(call_once(lambda twin=twin: dplus.grad(twin)(x, y), 60.0)[0])
        t_twin = sorted(twins)[2]
        g = dplus.grad(f)
        t = autorange(lambda: g(x, y), cfg.budget, repeats=cfg.repeats)
        tp = autorange(lambda: f(x, y), cfg.budget, repeats=cfg.repeats)
        out(f"  first  dplus.grad(f)(x, y): {fmt_seconds(t_first):>10}   (transforms the source)")
        out(
            f"  second dplus.grad(f)(x, y): {fmt_seconds(t_second):>10}   (new grad object, cached transform)"
        )
        out(
            f"  steady g(x, y):             {fmt_seconds(t.seconds):>10}   (primal {fmt_seconds(tp.seconds)}, "
            f"ratio {fmt_ratio(t.seconds / tp.seconds)})"
        )
        out(
            f"  transformation cost ~ {fmt_seconds(max(t_first - t.seconds, 0.0))} the first time in a process "
            f"(rule templates parsed), ~ {fmt_seconds(max(t_twin - t.seconds, 0.0))} for each function after "
            f"(median of 5)"
        )
    except Exception as e:
        out(f"  error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    out()


# --------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fast smoke run (short time budgets)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these workloads and/or sections (comma-separated or repeated); "
        f"workloads: {', '.join(BY_NAME)}; sections: {', '.join(SECTIONS)}",
    )
    p.add_argument(
        "--tools",
        default=",".join(t.name for t in TOOLS),
        help="comma-separated tool columns (default: all)",
    )
    p.add_argument("--out", default=None, help="output file (default: benchmarks/results.txt)")
    p.add_argument("--list", action="store_true", help="list workloads and sections, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.list:
        for w in ALL:
            print(f"{w.name:12} {w.title}")
        for w in STYLE_BY_NAME.values():
            print(f"{w.name:12} {w.title} (styles)")
        print("sections:", ", ".join(SECTIONS))
        return 0
    only = [s.strip() for item in opts.only for s in item.split(",") if s.strip()]
    unknown = [s for s in only if s not in BY_NAME and s not in SECTIONS and s not in STYLE_BY_NAME]
    if unknown:
        print(
            f"unknown --only names: {', '.join(unknown)}; workloads: {', '.join(BY_NAME)}; "
            f"sections: {', '.join(SECTIONS)}",
            file=sys.stderr,
        )
        return 2
    tools = [s.strip() for s in opts.tools.split(",") if s.strip()]
    bad = [s for s in tools if s not in {t.name for t in TOOLS}]
    if bad:
        print(f"unknown tools: {', '.join(bad)}", file=sys.stderr)
        return 2
    for must in ("primal",):
        if must not in tools:
            tools.insert(0, must)
    cfg = Config.make(opts.quick, tools)
    workloads = [w for w in ALL if w.name in only] if only else list(ALL)
    if only and not any(s in BY_NAME for s in only):
        workloads = []
    sections = (
        [s for s in SECTIONS if s in only]
        if any(s in SECTIONS for s in only)
        else (["table"] if only else [s for s in SECTIONS if s not in OPT_IN])
    )
    if workloads and "table" not in sections:
        sections.insert(0, "table")
    styles = [STYLE_BY_NAME[s] for s in only if s in STYLE_BY_NAME]
    if styles and "styles" not in sections:
        sections.append("styles")

    out = Report()
    start = time.perf_counter()
    out(
        f"dplus benchmarks, {datetime.datetime.now().isoformat(timespec='seconds')}, "
        f"{'quick' if cfg.quick else 'full'} run (about {cfg.budget:g} s per cell, "
        f"a single call capped at {cfg.cap:g} s, jax-jit compile capped at {cfg.jit_compile_cap:g} s)"
    )
    for line in machine_lines():
        out(line)
    out("tools:    " + "; ".join(f"{k} {v}" for k, v in tool_versions()))
    out("status:   " + dplus_status())
    if dplus_setup_error():
        out("          registering workload helpers: " + dplus_setup_error())
    out(
        f"checks:   every gradient is compared with the hand-written one (max relative error "
        f"{REL_TOL:g}) before it is timed"
    )
    out()
    # The dplus-only sections run first, before jax and torch are imported: a process
    # holding their million objects makes every full garbage collection slower, which
    # distorts dplus's scaling ratios (the table runs all tools in one process alike).
    runners = {
        "scaling": run_scaling,
        "memory": run_memory,
        "nested": run_nested,
        "transform": run_transform,
        "bigfn": run_bigfn,
        "checkpoint": run_checkpointing,
        "parallel": run_parallel,
    }
    parts: dict[str, Report] = {}
    for name in sections:
        if name in runners:
            parts[name] = Report(echo=False)
            runners[name](cfg, parts[name])
    if "table" in sections and workloads:
        run_table(cfg, workloads, out)
    if "styles" in sections:
        run_styles(cfg, out, styles or None)
    if "arrays" in sections:
        run_arrays(cfg, out)
    for name in sections:
        if name in parts:
            out("\n".join(parts[name].lines).rstrip("\n"))
            out()
    out(f"total time {time.perf_counter() - start:.0f} s")

    path = opts.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.txt")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(out.text())
    print(f"(written to {path})", file=sys.stderr)
    return 0
