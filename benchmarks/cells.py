"""One table cell: check one tool's gradient on one workload, then time it.

Cells of ``jax-jit`` run in a worker subprocess (``python -m benchmarks.cells``)
because an XLA compile of a large unrolled program cannot be interrupted from
Python: the parent kills the worker when a cell overruns its time and starts a
new one for the next cell.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass

from .timing import TooSlow, autorange, call_once
from .tools import TOOLS, Tool
from .workloads import BY_NAME, Workload, max_rel_error
from .workloads.styles import STYLE_BY_NAME

__all__ = ["Cell", "run_cell", "JitWorker", "REL_TOL"]

REL_TOL = 1e-8


@dataclass
class Cell:
    status: str  # "ok", "error", "wrong", "too_slow", "n/a"
    seconds: float | None = None  # median seconds per call
    best: float | None = None  # fastest repeat
    compile: float | None = None  # first call minus steady state (jax-jit)
    first: float | None = None  # the checked first call
    err: float | None = None  # max relative error against the hand-written gradient
    msg: str = ""
    detail: str = ""  # timing description / long message for the notes

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _short_error(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def _error_detail(e: BaseException) -> str:
    """The error and where it was raised (innermost frame), on one line."""
    tb = traceback.extract_tb(e.__traceback__)
    where = (
        f" (raised at {os.path.relpath(tb[-1].filename)}:{tb[-1].lineno} in {tb[-1].name})"
        if tb
        else ""
    )
    return _short_error(e) + where


def run_cell(
    tool: Tool, w: Workload, args: tuple, ref: tuple | None, budget: float, cap: float
) -> Cell:
    """Check ``tool``'s gradient of ``w`` at ``args`` against ``ref`` (the hand-written
    gradient; ``None`` for the primal) then time it within about ``budget`` seconds."""
    if not tool.available():
        return Cell("n/a", msg=tool.unavailable_reason or "not installed")
    gc.collect()
    try:
        prepared = tool.prepare(w, args)
        first, raw = call_once(prepared.run, cap)
    except TooSlow as e:
        return Cell(
            "too_slow",
            msg=f"too slow (>{e.cap:g}s)",
            detail=f"the first call did not finish in {e.cap:g} s",
        )
    except RecursionError as e:
        return Cell("error", msg=_short_error(e), detail=_short_error(e))
    except Exception as e:
        return Cell("error", msg=_short_error(e), detail=_error_detail(e))
    err = None
    if tool.is_ad and ref is not None:
        try:
            got = prepared.to_wrt(raw)
            err = max_rel_error(got, ref)
        except Exception as e:
            return Cell(
                "wrong", msg="WRONG", detail=f"gradient has the wrong shape: {_short_error(e)}"
            )
        if not err <= REL_TOL:
            return Cell(
                "wrong",
                msg="WRONG",
                err=err,
                detail=f"max relative error {err:.3g} against the hand-written gradient",
            )
    del raw
    try:
        if prepared.compile is not None:
            # `first` included the compile; time the steady state from scratch
            t = autorange(prepared.run, budget, first=None, cap=cap)
            compile_s = max(first - t.seconds, 0.0)
        else:
            t = autorange(prepared.run, budget, first=first, cap=cap)
            compile_s = None
    except TooSlow as e:
        return Cell(
            "too_slow",
            msg=f"too slow (>{e.cap:g}s)",
            first=first,
            err=err,
            detail=f"first call {first:.3g} s, a later one exceeded {e.cap:g} s",
        )
    except Exception as e:
        return Cell("error", msg=_short_error(e), detail=_error_detail(e))
    return Cell(
        "ok",
        seconds=t.seconds,
        best=t.best,
        compile=compile_s,
        first=first,
        err=err,
        detail=t.describe(),
    )


# --------------------------------------------------------------------------
# the subprocess worker


_MARK = "@@CELL "


def _worker_main() -> None:
    """Read JSON requests on stdin, answer one ``@@CELL {json}`` line each."""
    tools = {t.name: t for t in TOOLS}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        try:
            w = BY_NAME.get(req["workload"]) or STYLE_BY_NAME[req["workload"]]
            args = w.args(req.get("size"))
            ref = w.hand_grad(*args)
            cell = run_cell(tools[req["tool"]], w, args, ref, req["budget"], req["cap"])
        except Exception as e:  # pragma: no cover - defensive
            cell = Cell("error", msg=_short_error(e), detail=_error_detail(e))
        sys.stdout.write(_MARK + json.dumps(asdict(cell)) + "\n")
        sys.stdout.flush()


class JitWorker:
    """A subprocess running cells; killed and restarted when a cell overruns."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self._buf = b""

    def _start(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.cells"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=root,
        )
        self._buf = b""

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(
        self, tool: str, workload: str, size: int | None, budget: float, cap: float, timeout: float
    ) -> Cell:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert (
            self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        )
        req = {"tool": tool, "workload": workload, "size": size, "budget": budget, "cap": cap}
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while True:
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    text = line.decode(errors="replace")
                    if text.startswith(_MARK):
                        return Cell(**json.loads(text[len(_MARK) :]))
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stop()
                    return Cell(
                        "too_slow",
                        msg=f"too slow (>{timeout:.0f}s)",
                        detail=f"compile + check did not finish in {timeout:.0f} s (worker killed)",
                    )
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.stop()
                    return Cell(
                        "error", msg="worker died", detail="the jax-jit worker process exited"
                    )
                self._buf += chunk
        finally:
            sel.close()


if __name__ == "__main__":
    _worker_main()
