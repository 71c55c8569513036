"""``dplus.parallel.map``: a map whose forward and reverse passes run on a Dask cluster.

``map(f, xs, client=None, chunks=None)`` is ``[f(x) for x in xs]``. With a Dask
``distributed.Client``, the items are cut into chunks and each chunk runs as a task on a
worker. Under a gradient each task keeps the backpropagators of its items *on its worker*;
the reverse pass sends each worker the sensitivities of its items, runs the backpropagators
there, in parallel, and brings back only the items' sensitivities and the summed sensitivity
of the parameters ``f`` closes over. Without a client it runs in this process, so the same
code runs on a laptop.

The rule is in ``dplus.primitives.parallel`` (with the task of a chunk's forward pass); the tasks below run on the workers (they are
module-level functions, so workers import them rather than receive them).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from .errors import ArgumentError, DplusError

__all__ = ["map"]


def map(
    f: Callable[[Any], Any], xs: Any, *, client: Any = None, chunks: int | None = None
) -> list[Any]:
    """``[f(x) for x in xs]``; with a Dask ``client``, computed in chunks on its workers.

    ``chunks``: how many tasks (default: twice the number of workers, at most one per item).
    Items and results must be values (numbers, tuples, NumPy arrays) under a gradient.
    """
    check_arguments(f, client, chunks)
    items = list(xs)
    if client is None:
        return [f(x) for x in items]
    futures = [
        client.submit(run_plain_chunk, f, part, pure=False)
        for part in split(items, chunk_count(client, chunks, len(items)))
    ]
    return list(itertools.chain.from_iterable(client.gather(futures)))


def check_arguments(f: Any, client: Any, chunks: Any) -> None:
    if not callable(f):
        raise ArgumentError(f"dplus.parallel.map expects a function, got {type(f).__name__} {f!r}")
    if client is not None and not (hasattr(client, "submit") and hasattr(client, "gather")):
        raise ArgumentError(
            f"dplus.parallel.map: client= must be a dask.distributed Client, got {type(client).__name__}"
        )
    if chunks is not None and (type(chunks) is not int or chunks < 1):
        raise ArgumentError(
            f"dplus.parallel.map: chunks= must be a positive integer, got {chunks!r}"
        )


def chunk_count(client: Any, chunks: int | None, n: int) -> int:
    if chunks is None:
        try:
            workers = len(client.scheduler_info()["workers"])
        except Exception:  # a client that cannot tell: one chunk per item up to 8
            workers = 4
        chunks = 2 * max(1, workers)
    return max(1, min(chunks, n))


def split(items: list[Any], k: int) -> list[list[Any]]:
    """``items`` in ``k`` consecutive parts of nearly equal length (no part empty if k <= n)."""
    n = len(items)
    if n == 0:
        return []
    size, extra = divmod(n, k)
    parts, start = [], 0
    for i in range(k):
        end = start + size + (1 if i < extra else 0)
        parts.append(items[start:end])
        start = end
    return parts


# ---------------------------------------------------------------------------
# tasks run on the workers


def run_plain_chunk(f: Callable[[Any], Any], part: list[Any]) -> list[Any]:
    return [f(x) for x in part]


_KEPT: dict[str, Any] = {}  # a worker's backpropagators waiting for their reverse pass, by token
_KEPT_LOCK = threading.Lock()
_TOKENS = itertools.count()


def keep_records(bps: list[Any], token_prefix: str) -> str:
    """Keep a chunk's backpropagators on this worker until its reverse pass: their token."""
    token = f"{token_prefix}-{next(_TOKENS)}"
    with _KEPT_LOCK:
        _KEPT[token] = bps
    return token


def run_backprops(token: str, sensitivities: list[Any]) -> tuple[Any, ...]:
    """The reverse pass of one chunk on the worker that ran its forward pass."""
    from .runtime.boxes import BoxSensitivities
    from .runtime.linear import add_closure, gen_zero

    with _KEPT_LOCK:
        bps = _KEPT.get(
            token
        )  # (kept until the driver's backprop is garbage-collected: it may run again)
    if bps is None:
        raise DplusError(
            "dplus.parallel.map: the record of a chunk is gone from its worker (the worker restarted or was "
            "replaced); compute the gradient again"
        )
    closure: Any = gen_zero
    items = []
    for bp, s in zip(bps, sensitivities):
        if s is gen_zero or s is None:
            items.append(gen_zero)
            continue
        Abox = BoxSensitivities()
        rs = bp(s, Abox)
        if len(Abox):
            raise DplusError(
                "dplus.parallel.map: on a worker, sensitivity reached a list, dict or object that the mapped "
                "function closes over or was given; it cannot travel back. Pass such parameters as tuples or "
                "NumPy arrays"
            )
        closure = add_closure(closure, rs[0])
        items.append(rs[1])
    return closure, items


def drop_records(tokens: list[Any]) -> None:
    with _KEPT_LOCK:
        for t in tokens:
            _KEPT.pop(t, None)


def kept_records() -> int:
    """How many chunks' records wait on this worker (for tests and monitoring)."""
    with _KEPT_LOCK:
        return len(_KEPT)


def worker_address() -> str | None:
    try:
        from distributed import get_worker

        return get_worker().address
    except Exception:
        return None
