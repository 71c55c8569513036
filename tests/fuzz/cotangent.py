"""The check of a backward pass in the sensitivity it is given (the cotangent ``v`` of
``dplus.dplus(g)(*args).backprop(v)``).

A backward pass is linear in ``v``. ``grad`` always gives ``1.0``, so the checker's other
checks see neither a backward pass that is not linear in ``v`` nor, at second order, a
derivative in ``v`` that is lost (V1 in FINDINGS.md: the hand-over of ``v`` into an array
whose memory was written in place was a constant one order up, so the derivative in ``v``
through it was zero). The generated function returns a number, so the check differentiates
a *probe*: the generated function called as a decorated helper, its result ``r`` put into a
result of one of several forms (a float, an array written by item, slice, ``*=``,
``np.putmask`` or through a view, a tuple holding such an array, a list, a dict). The probe's
result ``R`` pairs with a sensitivity ``v`` of its structure as ``c(v) = sum(C * v)`` (``C``
the coefficients of ``r`` in ``R``), so

1. ``backprop(v) == c(v) * grad(f)(*args)``: ``v`` is a power of two times a unit of the
   form's structure with small integer coefficients (``sum(C * unit) == 1``), so both sides
   are exact, in float32 programs too;
2. (float and float64-array arguments, at second order) the derivative in ``v``, by
   ``dplus.grad``, of ``S(v) = sum(w * backprop(v))`` for fixed random weights ``w`` is
   ``C * S(1)``, with ``S(1) = sum(w * grad(f)(*args))``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CotangentForm:
    name: str
    body: str  # statements making the probe's result from ``r`` (``_np`` is NumPy)
    coefficients: Any  # C: the structure of the result, r's coefficient in each entry
    unit: Any  # a sensitivity of that structure with sum(C * unit) == 1


def _a(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float64)


FORMS = (
    CotangentForm("float", "return r", 1.0, 1.0),
    CotangentForm(
        "array item",
        "out = _np.zeros(3)\nout[1] = r\nreturn out",
        _a(0, 1, 0),
        _a(-2, 1, 4),
    ),
    CotangentForm(
        "array slice",
        "out = _np.zeros(3)\nout[1:] = r * _np.array([2.0, -1.0])\nreturn out",
        _a(0, 2, -1),
        _a(4, 1, 1),
    ),
    CotangentForm(
        "array *=", "out = _np.arange(3.0)\nout *= r\nreturn out", _a(0, 1, 2), _a(2, -1, 1)
    ),
    CotangentForm(
        "np.putmask",
        "out = _np.zeros(3)\n_np.putmask(out, _np.array([True, False, True]), r)\nreturn out",
        _a(1, 0, 1),
        _a(0.5, -4, 0.5),
    ),
    CotangentForm(
        "a view written",
        "out = _np.ones(4)\nview = out[1:3]\nview *= r\nreturn out",
        _a(0, 1, 1, 0),
        _a(2, 0.5, 0.5, -2),
    ),
    CotangentForm(
        "tuple holding an array",
        "out = _np.zeros(2)\nout[0] = r\nreturn (out, 3.0 * r)",
        (_a(1, 0), 3.0),
        (_a(-2, 0.5), 1.0),
    ),
    CotangentForm("list", "return [r, 2.0 * r]", [1.0, 2.0], [-1.0, 1.0]),
    CotangentForm("dict", "return {'a': r, 'b': -r}", {"a": 1.0, "b": -1.0}, {"a": 0.5, "b": -0.5}),
)

SCALES = (0.25, 0.5, 2.0, 4.0, -0.25, -0.5, -2.0, -4.0)  # c(v): exact multipliers

PROBE = """

import types as _dplus_probe_types
import numpy as _np
import dplus as _dplus_probe_api


def _dplus_probe_copy(fn):
    copy = _dplus_probe_types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


# the cotangent check (tests/fuzz/cotangent.py), form: {form}
_dplus_probe_entry = _dplus_probe_api.define_dplus(_dplus_probe_copy({entry}))


def _dplus_probe(*args):
    r = _dplus_probe_entry(*args)
{body}


def _dplus_probe_weighted(v, args, weights):
    back = _dplus_probe_api.dplus(_dplus_probe)(*args).backprop(v)
    total = 0.0
    for w, b in zip(weights, back):
        total = total + _np.sum(w * b)
    return total
"""


def form_of(seed: int) -> tuple[CotangentForm, float]:
    """The form and the scale ``c`` of the program of ``seed`` (kept while shrinking)."""
    rng = random.Random(seed * 7919 + 17)
    return FORMS[seed % len(FORMS)], rng.choice(SCALES)


def probe_source(entry: str, form: CotangentForm) -> str:
    body = "\n".join("    " + line for line in form.body.split("\n"))
    return PROBE.format(entry=entry, form=form.name, body=body)


def leafwise(fn, *trees):
    """``fn`` applied to the numbers (floats, ints, arrays) of trees of one structure."""
    first = trees[0]
    if isinstance(first, (list, tuple)):
        return type(first)(leafwise(fn, *parts) for parts in zip(*trees))
    if isinstance(first, dict):
        return {k: leafwise(fn, *(t[k] for t in trees)) for k in first}
    if first is None:
        return None
    return fn(*trees)


def scaled(tree, c: float):
    def scale(x):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.number, np.ndarray)):
            return x
        return x * c

    return leafwise(scale, tree)


def numbers(tree):
    """The numbers of ``tree``, flattened (a gradient: floats, arrays, lists, tuples, dicts)."""
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from numbers(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            yield from numbers(t)
    elif isinstance(tree, np.ndarray):
        yield from (float(x) for x in tree.ravel())
    elif isinstance(tree, (int, float, np.number)) and not isinstance(tree, bool):
        yield float(tree)


def weights_for(args, seed: int) -> tuple:
    """Fixed random weights, one per float of each (float or array) argument."""
    rng = np.random.default_rng(seed)
    return tuple(
        rng.uniform(-1.0, 1.0, np.shape(a))
        if isinstance(a, np.ndarray)
        else float(rng.uniform(-1.0, 1.0))
        for a in args
    )


def weighted_sum(weights, gradient) -> tuple[float, float]:
    """``sum(w * g)`` and ``sum(|w * g|)`` (the scale of its rounding)."""
    total = 0.0
    size = 0.0
    for w, g in zip(weights, gradient):
        product = np.asarray(w, float) * np.asarray(g, float)
        total += float(np.sum(product))
        size += float(np.sum(np.abs(product)))
    return total, size


def as_source(value) -> str:
    """``repr`` with arrays written as ``np.array([...])`` (for reproductions)."""
    if isinstance(value, np.ndarray):
        return f"np.array({value.tolist()!r})"
    if isinstance(value, tuple):
        return "(" + "".join(as_source(v) + ", " for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(as_source(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {as_source(v)}" for k, v in value.items()) + "}"
    return repr(value)
