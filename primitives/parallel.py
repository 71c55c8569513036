"""The rule of ``dplus.parallel.map``: forward and reverse passes on the cluster's workers
(Dask or Ray, through ``dplus.parallel.workers_of``).

Forward: one task per chunk runs the items through ``f``'s transform and keeps the
backpropagators on its worker (``run_recorded_chunk``). Reverse: one task per
chunk, sent to the worker that holds its record, runs them (``run_backprops``); the driver
adds up the chunks' closure sensitivities and hands the items' sensitivities to ``xs``.
Without a client both passes run here, item by item. The records stay on the workers while the
backprop exists (it may be run again, as ``jacobian`` does) and are dropped when it is
garbage-collected.

At the next order (a derivative of a derivative) the recording form runs in this process.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any

from dplus import parallel
from dplus.runtime.closures import remember_generated
from dplus.runtime.linear import gen_zero
from dplus.runtime.registry import register_next_order_form, register_primitive
from dplus.runtime.result import ProcResult

from ._iterables import add_closure, ensure_abox, list_sens, out_sens, seq
from .checkpointing import backprop_steps, record_items, require_value, stands_for_itself


def run_recorded_chunk(f: Any, part: list, token_prefix: str) -> tuple:
    """The forward pass of one chunk on a worker: the results, and the token of the record
    it keeps there."""
    results, bps = record_items(f, part)
    return results, parallel.keep_records(bps, token_prefix)


def _sig(f: Any, xs: Any, *, client: Any = None, chunks: Any = None) -> tuple:
    return f, xs, client, chunks


def list_sensitivity(results: list, A: Any, Abox: Any) -> list:
    """The sensitivities of the result list's elements (it was made by the rule)."""
    es = out_sens(results, A, Abox)
    return [gen_zero] * len(results) if es is None else list_sens(es, len(results))


def _keyword_zeros(kwargs: dict) -> tuple:
    return ({k: None for k in kwargs},) if kwargs else ()


def parallel_map_plus(*args: Any, **kwargs: Any) -> ProcResult:
    f, xs, client, chunks = _sig(*args, **kwargs)
    parallel.check_arguments(f, client, chunks)
    s = seq(xs, "dplus.parallel.map", "xs")
    items = list(s.items)
    for x in items:
        require_value(x, f, "item")
    if client is None:
        return _in_process(f, s, items, args, kwargs)
    workers = parallel.workers_of(client)
    parts = parallel.split(items, parallel.chunk_count(workers, chunks, len(items)))
    if stands_for_itself(f):
        remember_generated(
            f
        )  # a function made in differentiated code: its code's records go with it
    prefix = uuid.uuid4().hex
    answers = workers.spread(run_recorded_chunk, [(f, part, prefix) for part in parts])
    results = [r for (chunk_results, _), _ in answers for r in chunk_results]
    # (token, place, items) of each chunk: its record, the worker that keeps it
    records = [(token, place, len(part)) for ((_, token), place), part in zip(answers, parts)]

    def parallel_map_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        sens = list_sensitivity(results, A, Abox)
        tasks, start = [], 0
        for token, _, n in records:
            tasks.append((token, sens[start : start + n]))
            start += n
        closure: Any = gen_zero
        item_sens: list = []
        places = [place for _, place, _ in records]
        for fs, chunk_sens in workers.at(places, parallel.run_backprops, tasks):
            closure = add_closure(closure, fs)
            item_sens.extend(chunk_sens)
        return ((), closure, s.sens(item_sens, Abox)) + _keyword_zeros(kwargs)

    def drop_unused_records(workers: Any = workers, records: list = records) -> None:
        by_place: dict = {}
        for token, place, _ in records:
            by_place.setdefault(place, []).append(token)
        try:
            for place, tokens in by_place.items():
                workers.send(place, parallel.drop_records, tokens)
        except Exception:  # the cluster is gone: so are the records
            pass

    weakref.finalize(parallel_map_backprop, drop_unused_records)
    return ProcResult(results, parallel_map_backprop)


def _in_process(f: Any, s: Any, items: list, args: tuple, kwargs: dict) -> ProcResult:
    results, bps = record_items(f, items)

    def parallel_map_in_process_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        sens = list_sensitivity(results, A, Abox)
        closure: Any = gen_zero
        item_sens = []
        for bp, a in zip(bps, sens):
            x_sens, closure = backprop_steps([bp], a, closure, Abox)
            item_sens.append(x_sens)
        return ((), closure, s.sens(item_sens, Abox)) + _keyword_zeros(kwargs)

    return ProcResult(results, parallel_map_in_process_backprop)


def parallel_map_recorded(*args: Any, **kwargs: Any) -> ProcResult:
    f, xs, client, chunks = _sig(*args, **kwargs)
    s = seq(xs, "dplus.parallel.map", "xs")
    return _in_process(f, s, list(s.items), args, kwargs)


register_primitive(
    parallel.map,
    parallel_map_plus,
    note="dplus.parallel.map: chunks on Dask or Ray workers; each worker keeps its chunks' backprops and runs them in the reverse pass",
)
register_next_order_form(parallel_map_plus, parallel_map_recorded)
