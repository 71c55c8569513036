"""Transformation time of big generated functions (issue #27), per source line: straight-line,
loop-heavy and branchy functions of 10^2 to 10^4 lines, and long single expressions.

Opt-in (long): ``python -m benchmarks --only bigfn`` (``--quick``: up to 10^3 lines;
``BIGFN_SIZES=100,100000`` and ``BIGFN_FAMILIES=straight-line,numpy`` choose others).
Families: straight-line float arithmetic, NumPy calls on arrays, list and dict writes, the
code SymPy's ``lambdify`` writes for a ``cse``'d expression, loops, branches, one long
expression. Beside the first call: the transformation's peak memory, the first call with
dplus's persistent cache cold and warm, and the other tools' first gradient of the same
source when installed (JAX's ``jit(grad)`` compile time, autograd's and PyTorch's first call).
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMS = [
    "a{j} * a{k} * 0.5",
    "math.sin(a{j}) * a{k}",
    "math.tanh(a{j} + a{k})",
    "a{j} - 0.3 * a{k}",
    "math.cos(a{j}) + a{k} * 0.1",
]


def straight_line(n: int, name: str, seed: int = 0) -> str:
    """``n`` assignments over two floats, each reading two earlier ones at random."""
    rnd = random.Random(seed)
    lines = ["import math", f"def {name}(x, y):", "    a0 = x", "    a1 = y"]
    for i in range(2, n + 2):
        j, k = rnd.randrange(i), rnd.randrange(i)
        lines.append(f"    a{i} = " + rnd.choice(FORMS).format(j=j, k=k))
    lines.append(f"    return a{n + 1}")
    return "\n".join(lines) + "\n"


def loop_heavy(n: int, name: str, seed: int = 0) -> str:
    """Loops of five lines (a header and four updates of four variables), ``n`` lines in all."""
    rnd = random.Random(seed)
    lines = [
        "import math",
        f"def {name}(x, y):",
        "    a0 = x",
        "    a1 = y",
        "    a2 = x * y",
        "    a3 = x - y",
    ]
    for _ in range(max(1, n // 5)):
        lines.append(f"    for i in range({rnd.randrange(2, 5)}):")
        for t in range(4):
            j, k = rnd.randrange(4), rnd.randrange(4)
            lines.append(
                f"        a{t} = 0.5 * a{t} + 0.1 * ({rnd.choice(FORMS).format(j=j, k=k)})"
            )
    lines.append("    return a0 + a1 + a2 + a3")
    return "\n".join(lines) + "\n"


def branchy(n: int, name: str, seed: int = 0) -> str:
    """``if``/``else`` blocks of four lines, each assigning one new variable both ways."""
    rnd = random.Random(seed)
    lines = ["import math", f"def {name}(x, y):", "    a0 = x", "    a1 = y"]
    for i in range(2, max(3, n // 4) + 2):
        j, k = rnd.randrange(i), rnd.randrange(i)
        lines += [
            f"    if a{j} > a{k}:",
            f"        a{i} = " + rnd.choice(FORMS).format(j=j, k=k),
            "    else:",
            f"        a{i} = " + rnd.choice(FORMS).format(j=k, k=j),
        ]
    lines.append(f"    return a{i}")
    return "\n".join(lines) + "\n"


def long_expression(n: int, name: str, seed: int = 0) -> str:
    """``return`` of a sum of ``n`` terms such as ``math.sin(x * 0.001) * y ** 2``."""
    terms = [
        f"math.sin(x * {0.001 * (i + 1):.4f}) * y ** 2"
        if i % 2
        else f"{0.5 + (i % 7) * 0.1} * x * y"
        for i in range(n)
    ]
    return f"import math\ndef {name}(x, y):\n    return " + " + ".join(terms) + "\n"


NUMPY_FORMS = [
    "a{j} * a{k} * 0.5",
    "np.sin(a{j}) * a{k}",
    "np.tanh(a{j} + a{k})",
    "a{j} - 0.3 * a{k}",
    "np.cos(a{j}) + np.sum(a{k}) * 0.1",
]


def numpy_calls(n: int, name: str, seed: int = 0) -> str:
    """``n`` assignments of NumPy calls on arrays of three elements (each call ends a float
    fast segment: about one segment per line)."""
    rnd = random.Random(seed)
    lines = [
        "import numpy as np",
        f"def {name}(x, y):",
        "    a0 = x * np.ones(3)",
        "    a1 = y * np.ones(3)",
    ]
    for i in range(2, n + 2):
        j, k = rnd.randrange(i), rnd.randrange(i)
        lines.append(f"    a{i} = " + rnd.choice(NUMPY_FORMS).format(j=j, k=k))
    lines.append(f"    return np.sum(a{n + 1})")
    return "\n".join(lines) + "\n"


def container_writes(n: int, name: str, seed: int = 0) -> str:
    """About ``n`` lines: float assignments mixed with writes into a list of 64 numbers and
    a dict of 50 keys (each write a segment of its own)."""
    rnd = random.Random(seed)
    lines = [
        "import math",
        f"def {name}(x, y):",
        "    out = [0.0] * 64",
        "    d = {'x': x, 'y': y}",
        "    a0 = x",
        "    a1 = y",
    ]
    i = 2
    while len(lines) < n + 2:
        j, k = rnd.randrange(i), rnd.randrange(i)
        r = rnd.random()
        if r < 0.3:
            lines.append(f"    out[{i % 64}] = out[{j % 64}] * 0.5 + a{k}")
            lines.append(f"    a{i} = a{j}")
        elif r < 0.6:
            lines.append(f"    d['k{i % 50}'] = a{j} * d['x'] + 0.1")
            lines.append(f"    a{i} = a{k}")
        else:
            lines.append(f"    a{i} = " + rnd.choice(FORMS).format(j=j, k=k))
        i += 1
    lines.append(f"    return a{i - 1} + sum(out) + sum(d.values())")
    return "\n".join(lines) + "\n"


GENERATED_FORMS = [
    "{a}**2*{b} + 3*{a}",
    "sin({a})*cos({b})",
    "exp(-{a}**2)*{b}",
    "sqrt({a}**2 + {b}**2 + 1)",
    "-{a} + 2*{b}*{a}",
    "tanh({a})/(1 + {b}**2)",
]


def generated_cse(n: int, name: str, seed: int = 0) -> str:
    """What SymPy's ``lambdify`` of a ``cse``'d expression writes: ``from math import ...``,
    ``n`` temporaries ``x17 = sin(x3)*cos(p1)``, and a sum of some of them returned."""
    rnd = random.Random(seed)
    lines = [
        "from math import cos, exp, sin, sqrt, tanh",
        f"def {name}(p0, p1):",
    ]
    outs = []
    for i in range(n):
        a, b = (
            f"p{t}" if t < 2 else f"x{t - 2}" for t in (rnd.randrange(i + 2), rnd.randrange(i + 2))
        )
        lines.append(f"    x{i} = " + rnd.choice(GENERATED_FORMS).format(a=a, b=b))
        if rnd.random() < 0.05 or i == n - 1:
            outs.append(f"x{i}")
    lines.append("    return sum([" + ", ".join(outs) + "])")
    return "\n".join(lines) + "\n"


FAMILIES: list[tuple[str, Callable[[int, str], str]]] = [
    ("straight-line", straight_line),
    ("numpy (calls on arrays)", numpy_calls),
    ("containers (list/dict writes)", container_writes),
    ("generated (lambdify/cse)", generated_cse),
    ("loop-heavy", loop_heavy),
    ("branchy", branchy),
    ("one expression (terms)", long_expression),
]


# the names a family's source calls its math library by (``import math``, ``import numpy as
# np``, ``from math import sin, ...``): rebound to another tool's library to run it there
_LIBRARY_NAMES = ("math", "np")
_FUNCTION_NAMES = ("sin", "cos", "tanh", "exp", "sqrt")


def load(directory: Path, name: str, source: str, library: Any = None) -> Callable:
    """The function ``name`` of ``source``, from a file (dplus reads the source), in a module
    loaded afresh; its math library rebound to ``library`` when given (jax.numpy for JAX)."""
    path = directory / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if library is not None:
        for attr in _LIBRARY_NAMES:
            if hasattr(module, attr):
                setattr(module, attr, library)
        for attr in _FUNCTION_NAMES:
            if hasattr(module, attr):
                setattr(module, attr, getattr(library, attr))
    return getattr(module, name)


def _sizes(cfg: Any) -> list[int]:
    """10^2..10^3 (``--quick``) or 10^2..10^4; ``BIGFN_SIZES=100,100000`` chooses others."""
    chosen = os.environ.get("BIGFN_SIZES")
    if chosen:
        return [int(s) for s in chosen.split(",") if s.strip()]
    return [100, 1000] if cfg.quick else [100, 1000, 10000]


def _families() -> list[tuple[str, Callable[[int, str], str]]]:
    """All families, or those named in ``BIGFN_FAMILIES`` (``straight-line,branchy``)."""
    chosen = os.environ.get("BIGFN_FAMILIES")
    if not chosen:
        return FAMILIES
    names = {s.strip() for s in chosen.split(",")}
    return [(label, make) for label, make in FAMILIES if label.split(" ")[0] in names]


def _timed(thunk: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    thunk()
    return time.perf_counter() - t0


def _timed_cpu(thunk: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of ``thunk()`` (CPU time is what a loaded machine inflates least)."""
    t0, c0 = time.perf_counter(), time.process_time()
    thunk()
    return time.perf_counter() - t0, time.process_time() - c0


def _peak_mb(thunk: Callable[[], Any]) -> float:
    """Peak memory allocated by Python objects while ``thunk`` runs (tracemalloc), in MB."""
    tracemalloc.start()
    try:
        thunk()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


_MEMORY_UP_TO = 20_000  # (tracemalloc slows a transformation down; larger sizes are skipped)


def _dplus_cells(dplus: Any, directory: Path, name: str, source: str, unit: int) -> list[str]:
    """First call without the cache; peak memory of that transformation; first call with an
    empty cache (transformation and writing) and with the entry written (reading it). Each
    measurement loads the module afresh (new code objects: nothing cached in the process)."""
    point = (0.3, 0.7)
    f = load(directory, name, source)
    first, cpu = _timed_cpu(lambda: dplus.grad(f)(*point))
    cells = [f"{first:.2f} s", f"{1000 * first / unit:.3f}", f"{1000 * cpu / unit:.3f}"]
    if unit <= _MEMORY_UP_TO:
        f = load(directory, name, source)
        cells.append(f"{_peak_mb(lambda: dplus.grad(f)(*point)):.0f}")
    else:
        cells.append("")
    with tempfile.TemporaryDirectory() as cache:
        dplus.enable_cache(cache)
        try:
            f = load(directory, name, source)
            cold = _timed(lambda: dplus.grad(f)(*point))
            f = load(directory, name, source)
            warm = _timed(lambda: dplus.grad(f)(*point))
        finally:
            dplus.disable_cache()
    return cells + [f"{cold:.2f} s", f"{warm:.3f} s"]


def run_bigfn(cfg: Any, out: Any) -> None:
    sizes = _sizes(cfg)
    other_sizes = [s for s in sizes if s <= (100 if cfg.quick else 10000)]
    try:
        import dplus
    except Exception as e:  # the harness works whatever state the engine is in
        out(f"Transformation of big functions: error: {type(e).__name__}: {e}")
        return
    tools = [
        (label, cell)
        for label, cell in _other_tools()
        if not cfg.tools or any(t.split("-")[0] == label.split(" ")[0] for t in cfg.tools)
    ]
    out(
        "Transformation of big functions: the first dplus.grad(f)(x, y), transformation "
        "included, ms per source line (per term for one expression; wall and CPU time); peak "
        "memory of the transformation (tracemalloc); first call with the persistent cache on, "
        "empty (cold: transformation and writing) and holding the entry (warm: reading it); "
        "beside it the other tools' first gradient of the same source (JAX: jit(grad) compile "
        "time; autograd and PyTorch: the first call, they have no transformation to make):"
    )
    header = [
        "family",
        "lines",
        "dplus first call",
        "ms / line",
        "CPU ms / line",
        "peak MB",
        "cold cache",
        "warm cache",
    ] + [label for label, _ in tools]
    rows = []
    old_limit = sys.getrecursionlimit()
    # CPython compiles a 10^4-term expression only so
    sys.setrecursionlimit(max(old_limit, 100_000))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            for label, make in _families():
                for size in sizes:
                    name = f"big_{make.__name__}_{size}"
                    source = make(size, name)
                    lines = len(source.splitlines())
                    unit = size if make is long_expression else lines  # a term of a long expression
                    row = [label, str(unit)]
                    try:
                        row += _dplus_cells(dplus, directory, name, source, unit)
                    except Exception as e:
                        row += [f"error: {type(e).__name__}", "", "", "", "", ""]
                    for tool, cell in tools:
                        row.append(cell(directory, name, source) if size in other_sizes else "")
                    rows.append(row)
                    print(f"[bigfn] {label} {size}: {row[2:]}", file=sys.stderr)
    finally:
        sys.setrecursionlimit(old_limit)
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        out(
            "  "
            + "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
            )
        )
    out()


def _other_tools() -> list[tuple[str, Callable[[Path, str, str], str]]]:
    """(column, cell) of each comparison tool installed."""
    found: list[tuple[str, Callable[[Path, str, str], str]]] = []
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        found.append(
            ("jax jit(grad) compile", lambda d, name, source: _jax_cell(jax, jnp, d, name, source))
        )
    except Exception:
        pass
    try:
        import autograd
        import autograd.numpy as anp

        found.append(
            (
                "autograd first grad",
                lambda d, name, source: _autograd_cell(autograd, anp, d, name, source),
            )
        )
    except Exception:
        pass
    try:
        import torch

        found.append(
            ("torch first grad", lambda d, name, source: _torch_cell(torch, d, name, source))
        )
    except Exception:
        pass
    return found


def _renamed(source: str, name: str, tool: str) -> tuple[str, str]:
    """The source with its function renamed for ``tool`` (a module of its own)."""
    return source.replace(f"def {name}(", f"def {name}_{tool}("), f"{name}_{tool}"


def _jax_cell(jax: Any, jnp: Any, directory: Path, name: str, source: str) -> str:
    """jit(grad) compile time (first call minus a later one) of the same source, its math
    library as jax.numpy. Branches on traced values cannot be jitted: shown as n/a."""
    try:
        text, renamed = _renamed(source, name, "jax")
        f = load(directory, renamed, text, jnp)
        g = jax.jit(jax.grad(f, argnums=(0, 1)))
        x, y = jnp.float64(0.3), jnp.float64(0.7)
        t0 = time.perf_counter()
        jax.block_until_ready(g(x, y))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        jax.block_until_ready(g(x, y))
        return f"{first - (time.perf_counter() - t0):.2f} s"
    except Exception as e:
        return f"n/a ({type(e).__name__})"


def _autograd_cell(autograd: Any, anp: Any, directory: Path, name: str, source: str) -> str:
    """autograd's first gradient of the same source (its math library as autograd.numpy)."""
    try:
        text, renamed = _renamed(source, name, "autograd")
        f = load(directory, renamed, text, anp)
        g = autograd.grad(f, (0, 1))
        return f"{_timed(lambda: g(0.3, 0.7)):.2f} s"
    except Exception as e:
        return f"n/a ({type(e).__name__})"


def _torch_cell(torch: Any, directory: Path, name: str, source: str) -> str:
    """PyTorch's first gradient (forward and backward) of the same source, its math library
    as torch, on float64 scalar tensors."""
    try:
        text, renamed = _renamed(source, name, "torch")
        f = load(directory, renamed, text, torch)

        def first() -> None:
            x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
            y = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
            torch.autograd.grad(f(x, y), (x, y))

        return f"{_timed(first):.2f} s"
    except Exception as e:
        return f"n/a ({type(e).__name__})"
