"""The binomial checkpointing schedule ("revolve") of Griewank and Walther, as arithmetic.

Reversing a loop of ``l`` steps with ``s`` snapshots (states kept at once, the initial one
included) costs at least ``r*l - C(s+r, r-1)`` *advances* (plain evaluations of a step) on
top of the ``l`` recorded ones, where ``r`` is the least integer with ``C(s+r, s) >= l``
(Griewank, "Achieving logarithmic growth of temporal and spatial complexity in reverse
automatic differentiation", 1992; Griewank and Walther, "Algorithm 799: revolve", 2000).
The count includes the forward sweep, whose last step is recorded at once (the "youturn").

The schedule is recursive: advance ``j`` steps from the first state and snapshot the state
there, reverse the ``l - j`` steps after it with the ``s - 1`` other snapshots, then free that
snapshot and reverse the first ``j`` steps with all ``s``. :func:`split` is a ``j`` that
attains the bound (the optimal ones form a range; ``tests/test_checkpoint.py`` checks this
one against an exhaustive search). With one snapshot, each step is reached by advancing
from the first state again.
"""

from __future__ import annotations

from math import comb

__all__ = ["binomial", "repetitions", "minimal_advances", "split", "first_descent"]


def binomial(s: int, r: int) -> int:
    """How many steps ``s`` snapshots can reverse when no step is advanced more than ``r``
    times: ``C(s + r, s)`` (0 for ``r < 0``)."""
    return comb(s + r, s) if r >= 0 else 0


def repetitions(l: int, s: int) -> int:
    """The least ``r`` with ``binomial(s, r) >= l``: how many times the busiest step runs."""
    r = 0
    while binomial(s, r) < l:
        r += 1
    return r


def minimal_advances(l: int, s: int) -> int:
    """The fewest plain step evaluations that reverse ``l`` steps with ``s`` snapshots."""
    if l <= 1:
        return 0
    r = repetitions(l, s)
    return r * l - binomial(s + 1, r - 1)


def split(l: int, s: int) -> int:
    """Where to put the next snapshot (steps after the current one) when reversing ``l >= 2``
    steps with ``s >= 2`` snapshots, so that the total stays :func:`minimal_advances`."""
    r = repetitions(l, s)
    return min(l - 1, max(1, l - binomial(s - 1, r), binomial(s, r - 2)))


def first_descent(n: int, s: int) -> list[int]:
    """The positions of the snapshots the schedule takes on its way to the last step (the
    forward sweep), after the initial state's."""
    lo, out = 0, []
    while n - lo > 1 and s > 1:
        lo += split(n - lo, s)
        s -= 1
        out.append(lo)
    return out
