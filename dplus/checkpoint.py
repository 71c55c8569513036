"""Checkpointing: recompute in the reverse pass instead of recording in the forward pass.

``checkpoint(f)`` and ``checkpoint_loop(step, state, n)`` mean exactly what their plain
definitions below say; their rules (``dplus.primitives.checkpointing``) change only what a
gradient keeps in memory. Under a gradient, a checkpointed call records nothing but its
arguments; the reverse pass runs the call again, this time through its transform, and
backpropagates through that fresh record. A checkpointed loop keeps a few of its states
(every k-th for ``schedule="sqrt"``, O(log n) of them for ``schedule="bisection"``, k of
them where the binomial schedule puts them for ``schedule="revolve", snapshots=k``) and
recomputes the rest in the reverse pass.

Recomputing must give the same numbers: the rules compare the recomputed result with the
one the forward pass returned and raise a :class:`~dplus.NonDifferentiableError` when they
differ (a checkpointed function that draws random numbers or reads state that changed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from .errors import ArgumentError
from .markers import mark_derived
from .runtime.portable import remember_source

F = TypeVar("F", bound=Callable[..., Any])

SCHEDULES = ("sqrt", "bisection", "revolve", "none")


def checkpoint(f: F) -> F:
    """``f`` itself, except that a gradient recomputes its record instead of keeping it.

    Its arguments and its result must be values: numbers, tuples of them, NumPy arrays
    (copied when the call is made). Keyword arguments are passed through and are not
    differentiated.
    """
    if not callable(f):
        raise ArgumentError(f"dplus.checkpoint expects a function, got {type(f).__name__} {f!r}")

    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        return run_checkpointed(f, args, kwargs)

    return cast(F, labelled(checkpointed, f))  # (a function of the same signature as f)


def labelled(checkpointed: Any, f: Any) -> Any:
    """``checkpointed`` named after ``f`` and marked to be differentiated from its source.

    (A function of its own, with an identity rule: inside differentiated code, writing
    attributes of a function would be differentiated as writes into an object.)
    """
    checkpointed.__name__ = getattr(f, "__name__", "checkpointed")
    checkpointed.__qualname__ = getattr(f, "__qualname__", "checkpointed")
    checkpointed.__doc__ = getattr(f, "__doc__", None)
    mark_derived(checkpointed, "helper")
    checkpointed.__dplus_checkpointed__ = f
    remember_source(f)
    return checkpointed


def run_checkpointed(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    """``f(*args, **kwargs)``; under a gradient, its rule recomputes the record in the reverse pass."""
    from .runtime.core import (
        as_plain_callable,  # f may be a function made inside differentiated code
    )

    return as_plain_callable(f)(*args, **kwargs)


def checkpoint_loop(
    step: Callable[[Any], Any],
    state: Any,
    n: int,
    *,
    schedule: str = "sqrt",
    snapshots: int | None = None,
) -> Any:
    """``for _ in range(n): state = step(state)``, then ``state``.

    Under a gradient the forward pass keeps only some of the states:

    - ``"sqrt"`` (default): every k-th state, k = ceil(sqrt(n)); the reverse pass recomputes
      one segment of k steps at a time with its record. Memory O(sqrt n) states and records,
      time about two forward passes.
    - ``"bisection"``: the reverse pass halves the remaining range recursively, keeping
      O(log n) states at once; time about (1 + log2 n / 2) forward passes.
    - ``"revolve"``: the binomial schedule of Griewank and Walther with ``snapshots=k``
      states kept at once (the initial one included): the fewest step evaluations any
      schedule with k states needs, ``r*n - C(k+r, r-1)`` plain ones (the forward pass
      included) plus the n recorded ones, where r is the least integer with
      ``C(k+r, k) >= n`` (each step runs at most r times plainly). k = 1 recomputes every
      step from the start (quadratic); k >= n keeps every state.
    - ``"none"``: no checkpointing, the plain loop's record (for comparisons).

    ``step`` takes the state and returns the next one; parameters it closes over are
    differentiated. The state must be a value: a number, a tuple of values, a NumPy array.
    """
    check_loop_arguments(step, n, schedule, snapshots)
    for _ in range(n):
        state = step(state)
    return state


def check_loop_arguments(step: Any, n: Any, schedule: Any, snapshots: Any = None) -> None:
    if not callable(step):
        raise ArgumentError(
            f"dplus.checkpoint_loop expects a step function, got {type(step).__name__} {step!r}"
        )
    if type(n) is not int and not (hasattr(n, "__index__") and not isinstance(n, float)):
        raise ArgumentError(
            f"dplus.checkpoint_loop expects an integer number of steps, got {type(n).__name__} {n!r}"
        )
    if n < 0:
        raise ArgumentError(f"dplus.checkpoint_loop expects a number of steps >= 0, got {n}")
    if schedule not in SCHEDULES:
        raise ArgumentError(
            f"dplus.checkpoint_loop: schedule must be one of {', '.join(map(repr, SCHEDULES))}, got {schedule!r}"
        )
    if schedule == "revolve":
        if type(snapshots) is not int or snapshots < 1:
            raise ArgumentError(
                "dplus.checkpoint_loop: schedule='revolve' needs snapshots=k, a positive integer: how many "
                f"states it may keep at once (the initial one included), got {snapshots!r}"
            )
    elif snapshots is not None:
        raise ArgumentError(
            f"dplus.checkpoint_loop: snapshots= is for schedule='revolve', not {schedule!r}"
        )


mark_derived(checkpoint, "helper")
