"""``dplus.parallel.map``: a map whose forward and reverse passes run on a Dask or Ray cluster.

``map(f, xs, client=None, chunks=None)`` is ``[f(x) for x in xs]``. With a Dask
``distributed.Client``, or a :class:`RayWorkers` (Ray actors, one per worker process), the
items are cut into chunks and each chunk runs as a task on a worker. Under a gradient each
task keeps the backpropagators of its items *on its worker*; the reverse pass sends each
worker the sensitivities of its items, runs the backpropagators there, in parallel, and
brings back only the items' sensitivities and the summed sensitivity of the parameters ``f``
closes over. Without a client it runs in this process, so the same code runs on a laptop.

The rule is in ``dplus.primitives.parallel`` (with the task of a chunk's forward pass); the
tasks below run on the workers (they are module-level functions, so workers import them
rather than receive them). Both engines are reached through one small interface, the
*workers* (:func:`workers_of`): run tasks spread over the workers, run tasks on given
workers, send a task without waiting.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .errors import ArgumentError, DplusError

__all__ = ["map", "RayWorkers"]


def map(
    f: Callable[[Any], Any], xs: Any, *, client: Any = None, chunks: int | None = None
) -> list[Any]:
    """``[f(x) for x in xs]``; with a ``client``, computed in chunks on its workers.

    ``client``: a Dask ``distributed.Client`` or a :class:`RayWorkers`. ``chunks``: how many
    tasks (default: twice the number of workers, at most one per item). Items and results
    must be values (numbers, tuples, NumPy arrays) under a gradient.
    """
    check_arguments(f, client, chunks)
    items = list(xs)
    if client is None:
        return [f(x) for x in items]
    workers = workers_of(client)
    parts = split(items, chunk_count(workers, chunks, len(items)))
    answers = workers.spread(run_plain_chunk, [(f, part) for part in parts])
    return list(itertools.chain.from_iterable(value for value, _ in answers))


def check_arguments(f: Any, client: Any, chunks: Any) -> None:
    if not callable(f):
        raise ArgumentError(f"dplus.parallel.map expects a function, got {type(f).__name__} {f!r}")
    if client is not None and not (
        isinstance(client, RayWorkers) or (hasattr(client, "submit") and hasattr(client, "gather"))
    ):
        raise ArgumentError(
            "dplus.parallel.map: client= must be a dask.distributed Client or a dplus.parallel.RayWorkers, "
            f"got {type(client).__name__}"
        )
    if chunks is not None and (type(chunks) is not int or chunks < 1):
        raise ArgumentError(
            f"dplus.parallel.map: chunks= must be a positive integer, got {chunks!r}"
        )


def chunk_count(workers: Any, chunks: int | None, n: int) -> int:
    if chunks is None:
        chunks = 2 * max(1, workers.count())
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
# the workers of a cluster, whatever its engine


def workers_of(client: Any) -> Any:
    """The workers of ``client``: itself for a :class:`RayWorkers`, a :class:`DaskWorkers` for
    a Dask client."""
    return client if isinstance(client, RayWorkers) else DaskWorkers(client)


class DaskWorkers:
    """The workers of a Dask ``distributed.Client``; a place is a worker's address."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def count(self) -> int:
        try:
            return len(self.client.scheduler_info()["workers"])
        except Exception:  # a client that cannot tell
            return 4

    def spread(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``fn(*args)`` for each ``args`` of ``tasks``, wherever the scheduler puts them: the
        ``(value, place)`` of each."""
        futures = [self.client.submit(run_located, fn, *args, pure=False) for args in tasks]
        return list(self.client.gather(futures))

    def at(
        self, places: Sequence[Any], fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]
    ) -> list[Any]:
        """``fn(*args)`` for each ``args`` of ``tasks``, on the worker at the same position of
        ``places``: their values."""
        futures = [
            self.client.submit(fn, *args, pure=False, **self.placement(place))
            for place, args in zip(places, tasks)
        ]
        return list(self.client.gather(futures))

    def send(self, place: Any, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` on the worker at ``place``, not waited for."""
        import distributed

        fire_and_forget: Any = distributed.fire_and_forget  # (untyped)
        fire_and_forget(self.client.submit(fn, *args, pure=False, **self.placement(place)))

    @staticmethod
    def placement(place: Any) -> dict[str, Any]:
        return {"workers": [place], "allow_other_workers": False} if place else {}


class RayWorkers:
    """Ray actors for :func:`map`, one per worker process: ``client=RayWorkers(...)``.

    Each actor is a process that runs chunks of a map and keeps their records until their
    reverse pass; a place is an actor's index. ``RayWorkers(n)`` starts ``n`` actors (default:
    as many as the Ray cluster has CPUs) in the Ray session this process joined with
    ``ray.init``; ``actor_options`` go to ``ActorClass.options`` (``num_cpus=1`` unless
    given). ``close()`` (or leaving a ``with`` block) ends them, and the records they held.
    """

    def __init__(self, n: int | None = None, **actor_options: Any) -> None:
        try:
            import ray as ray_module
        except ImportError:
            raise ArgumentError(
                "dplus.parallel.RayWorkers needs Ray: pip install 'dplus[ray]'"
            ) from None
        ray: Any = ray_module  # (typed in part: used as the untyped library it mostly is)
        if not ray.is_initialized():
            raise ArgumentError(
                "dplus.parallel.RayWorkers: start or join a Ray session first (ray.init(...))"
            )
        if n is None:
            n = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if type(n) is not int or n < 1:
            raise ArgumentError(
                f"dplus.parallel.RayWorkers: n must be a positive integer, got {n!r}"
            )
        self._ray = ray
        options = {"num_cpus": 1, **actor_options}
        actor_class = ray.remote(ChunkWorker).options(**options)
        self.actors: list[Any] = [actor_class.remote() for _ in range(n)]

    def count(self) -> int:
        return len(self.actors)

    def spread(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        # (arguments shared by every task, such as the mapped function, travel once)
        shared: dict[int, Any] = {}

        def once(a: Any) -> Any:
            if callable(a):
                if id(a) not in shared:
                    shared[id(a)] = self._ray.put(a)
                return shared[id(a)]
            return a

        n = len(self.actors)
        refs = [
            self.actors[i % n].run.remote(fn, *(once(a) for a in args))
            for i, args in enumerate(tasks)
        ]
        return [(value, i % n) for i, value in enumerate(self._ray.get(refs))]

    def at(
        self, places: Sequence[Any], fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]
    ) -> list[Any]:
        refs = [self.actors[place].run.remote(fn, *args) for place, args in zip(places, tasks)]
        return list(self._ray.get(refs))

    def send(self, place: Any, fn: Callable[..., Any], *args: Any) -> None:
        self.actors[place].run.remote(fn, *args)

    def close(self) -> None:
        """End the actors (the records they keep go with them)."""
        for actor in self.actors:
            try:
                self._ray.kill(actor)
            except Exception:  # the session is gone already: so are the actors
                pass
        self.actors = []

    def __enter__(self) -> RayWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayWorkers({len(self.actors)} actors)"


class ChunkWorker:
    """The body of a Ray actor of :class:`RayWorkers`: a process that runs the tasks sent to
    it, one at a time (the records they keep live in this module of its process)."""

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


# ---------------------------------------------------------------------------
# tasks run on the workers


def run_located(fn: Callable[..., Any], *args: Any) -> tuple[Any, Any]:
    """``fn(*args)`` on a Dask worker, and the address of that worker."""
    return fn(*args), worker_address()


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

        address: str = get_worker().address
        return address
    except Exception:
        return None
