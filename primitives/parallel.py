"""The rule of ``dplus.parallel.map``: forward and reverse passes on the cluster's workers.

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
    """The forward pass of one chunk on a worker: the results, and where the record stays."""
    results, bps = record_items(f, part)
    return results, parallel.keep_records(bps, token_prefix), parallel.worker_address()


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
    parts = parallel.split(items, parallel.chunk_count(client, chunks, len(items)))
    if stands_for_itself(f):
        remember_generated(
            f
        )  # a function made in differentiated code: its code's records go with it
    prefix = uuid.uuid4().hex
    futures = [client.submit(run_recorded_chunk, f, part, prefix, pure=False) for part in parts]
    answers = client.gather(futures)
    results = [r for chunk_results, _, _ in answers for r in chunk_results]
    records = [(token, address, len(part)) for (_, token, address), part in zip(answers, parts)]

    def parallel_map_backprop(A: Any, Abox: Any) -> tuple:
        Abox = ensure_abox(Abox)
        sens = list_sensitivity(results, A, Abox)
        pending, start = [], 0
        for token, address, n in records:
            chunk = sens[start : start + n]
            start += n
            placement = {"workers": [address], "allow_other_workers": False} if address else {}
            pending.append(
                client.submit(parallel.run_backprops, token, chunk, pure=False, **placement)
            )
        closure: Any = gen_zero
        item_sens: list = []
        for fs, chunk_sens in client.gather(pending):
            closure = add_closure(closure, fs)
            item_sens.extend(chunk_sens)
        return ((), closure, s.sens(item_sens, Abox)) + _keyword_zeros(kwargs)

    def drop_unused_records(client: Any = client, records: list = records) -> None:
        by_worker: dict = {}
        for token, address, _ in records:
            by_worker.setdefault(address, []).append(token)
        try:
            from distributed import fire_and_forget

            for address, tokens in by_worker.items():
                placement = {"workers": [address], "allow_other_workers": False} if address else {}
                fire_and_forget(
                    client.submit(parallel.drop_records, tokens, pure=False, **placement)
                )
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
    note="dplus.parallel.map: chunks on Dask workers; each worker keeps its chunks' backprops and runs them in the reverse pass",
)
register_next_order_form(parallel_map_plus, parallel_map_recorded)
