"""NumPy workloads (issues #21 and #22): array code as scientists write it, at the sizes
where per-operation overhead decides the cost. Each defines ``primal(*args)`` reading the
global ``np`` (rebound to ``autograd.numpy``, ``jax.numpy`` or a torch namespace for the
other tools), ``hand_grad(*args)`` giving the gradients of the arguments in ``wrt``, and
``make_args()``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import least_squares, stencil, tanh_network


@dataclass(frozen=True)
class ArrayWorkload:
    name: str
    title: str
    primal: Callable[..., Any]
    hand_grad: Callable[..., tuple]
    make_args: Callable[[], tuple]
    wrt: tuple[int, ...]
    in_place: bool  # writes into arrays (autograd and JAX refuse it)


ARRAY_WORKLOADS = [
    ArrayWorkload(m.NAME, m.TITLE, m.primal, m.hand_grad, m.make_args, m.WRT, m.IN_PLACE)
    for m in (tanh_network, least_squares, stencil)
]
