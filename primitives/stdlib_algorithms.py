"""Rules for the standard library's algorithms on lists: ``heapq`` and ``bisect``.

Both modules are written in Python and then replaced by C accelerators (``_heapq``,
``_bisect``) that dplus cannot read. Their Python text is loaded a second time here, without
the accelerators, and each C function is given the derived transform of its Python twin:
the values move exactly as Python moves them (list reads, writes, appends and pops), so
their sensitivities follow, and comparisons and indexes carry none.
"""

from __future__ import annotations

import bisect
import heapq
import importlib.util
import sys
import types
from typing import Any

from dplus.runtime.registry import register_primitive


def python_twin(module: types.ModuleType, accelerator: str) -> types.ModuleType:
    """``module`` loaded again from its file under another name, with its C ``accelerator``
    hidden, so that its functions are the Python ones (whose source dplus reads)."""
    spec = importlib.util.spec_from_file_location(
        f"dplus._python_{module.__name__}", module.__file__
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"dplus needs the Python source file of {module.__name__}")
    twin = importlib.util.module_from_spec(spec)
    hidden = sys.modules.get(accelerator)
    # (``from _heapq import *`` then raises ImportError, which the module expects; typeshed's
    # sys.modules does not admit None, the import system's documented way to block a module)
    sys.modules[accelerator] = None  # type: ignore[assignment]
    try:
        spec.loader.exec_module(twin)
    finally:
        if hidden is None:
            del sys.modules[accelerator]
        else:
            sys.modules[accelerator] = hidden
    return twin


def register_twins(
    module: types.ModuleType, twin: types.ModuleType, names: tuple[str, ...]
) -> None:
    from dplus.transform.plus_functions import lazy_transform

    for name, fn in vars(twin).items():
        if isinstance(fn, types.FunctionType) and fn.__module__ == twin.__name__:
            register_primitive(
                fn,
                lazy_transform(fn),
                note="derived from the Python source of the standard library",
            )
    for name in names:
        register_primitive(
            getattr(module, name),
            lazy_transform(getattr(twin, name)),
            note=f"derived from the Python source of {module.__name__}.{name}",
        )


_HEAPQ = python_twin(heapq, "_heapq")
register_twins(heapq, _HEAPQ, ("heappush", "heappop", "heapify", "heapreplace", "heappushpop"))
_BISECT = python_twin(bisect, "_bisect")
register_twins(bisect, _BISECT, ("bisect_left", "bisect_right", "insort_left", "insort_right"))


# nsmallest, nlargest and merge consume their iterables through iterators of their own; they
# are written here as Python documents them (and, inside differentiated code, return lists,
# as map and zip do). Ties go to the earlier element (of merge: the earlier iterable), as in
# heapq.


def nsmallest(n: int, iterable: Any, key: Any = None) -> list:
    """heapq.nsmallest: ``sorted(iterable, key=key)[:n]``."""
    return sorted(iterable, key=key)[:n]


def nlargest(n: int, iterable: Any, key: Any = None) -> list:
    """heapq.nlargest: ``sorted(iterable, key=key, reverse=True)[:n]``."""
    return sorted(iterable, key=key, reverse=True)[:n]


def merge(*iterables: Any, key: Any = None, reverse: bool = False) -> list:
    """heapq.merge, to a list: the smallest (largest, with ``reverse``) of the iterables'
    next elements, repeatedly; of equal ones, the earlier iterable's."""
    lists = [list(it) for it in iterables]
    positions = [0] * len(lists)
    out: list[Any] = []
    while True:
        best = -1
        best_key = None
        for i in range(len(lists)):
            if positions[i] < len(lists[i]):
                candidate = lists[i][positions[i]]
                k = candidate if key is None else key(candidate)
                if best < 0 or (k > best_key if reverse else k < best_key):
                    best = i
                    best_key = k
        if best < 0:
            return out
        out.append(lists[best][positions[best]])
        positions[best] += 1


def _register_documented_forms() -> None:
    from dplus.transform.plus_functions import lazy_transform

    for fn, documented in (
        (heapq.nsmallest, nsmallest),
        (heapq.nlargest, nlargest),
        (heapq.merge, merge),
    ):
        # (no note when docstrings are stripped, under ``python -OO``)
        note = documented.__doc__.splitlines()[0] if documented.__doc__ else ""
        register_primitive(fn, lazy_transform(documented), note=note)


_register_documented_forms()
