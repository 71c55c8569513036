"""Calls interrupted by an exception that a ``try`` of the caller catches.

A differentiated callee that raises never returns its backprop: what it did before the raise
has no reverse. That is right for what it computed only in its own variables (lost with its
frame), wrong for what it wrote where the caller can see it (a list, a dict or an object it
was given, a global, a closure's variable): the caller's ``try`` would go on reading those
writes with no sensitivity, silently. The transformer records here the plus-functions whose
code may write such places (``transform.outside_writes``); a handler of differentiated code
runs :func:`refuse_interrupted_writers` first, which refuses when the exception it caught
passed through one of them.
"""

from __future__ import annotations

import sys
import types

from ..errors import NonDifferentiableError

__all__ = ["WRITERS", "refuse_interrupted_writers"]

# the codes of plus-functions whose function may write where its caller sees it
WRITERS: set[types.CodeType] = set()


def refuse_interrupted_writers() -> None:
    """Called first in an ``except`` clause of differentiated code."""
    exc = sys.exc_info()[1]
    tb = exc.__traceback__ if exc is not None else None
    if tb is None or str(tb.tb_frame.f_globals.get("__name__", "")).startswith("dplus."):
        return  # (dplus's own rules differentiated again catch as the rule does at first order)
    tb = tb.tb_next  # (the first frame is the catching one)
    while tb is not None:
        code = tb.tb_frame.f_code
        if code in WRITERS:
            name = code.co_name.removesuffix("__plus")
            raise NonDifferentiableError(
                f"{type(exc).__name__} raised inside {name} (line {tb.tb_lineno} of its generated "
                f"code) was caught by a try of its caller, and {name} may have changed a list, "
                "dict, object or variable its caller sees before it raised: dplus cannot "
                "differentiate a call that stopped half way. Catch the exception inside "
                f"{name}, or raise it before {name} changes anything"
            )
        tb = tb.tb_next
