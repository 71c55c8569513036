"""The arguments a gradient does not ask for: constants of its backward pass.

``grad(f, argnums=0)(W, X)`` discards the sensitivity of ``X``. A rule whose operand *is*
``X`` (the same object: ``X @ W``) may skip computing that operand's sensitivity, which
can be most of the backward pass (a data matrix's outer product in least squares). The
skip is exact when everything the sensitivity of that object could reach is discarded:

- the object is one of the arguments not asked for, and not reachable from an argument
  that is (``grad(f, 0)([W, X], X)``: the ``X`` inside the list is asked for);
- it is a NumPy array whose memory is not written in place (then its sensitivity goes
  through the memory's entry, to whatever was written into it).

An object identical to such an argument *is* that argument, so its sensitivity flows to
that argument's adjoint only. The set belongs to one backward pass (its
:class:`~dplus.runtime.boxes.BoxSensitivities`), so a pass run inside another (a nested
``grad``, a recomputed checkpoint) never sees it. Anything the walk cannot see into gives
no constants: the skip is an optimisation, never a change of what is computed.
"""

from __future__ import annotations

import sys
from typing import Any

from .memory import is_tracked_array

_NO_CONSTANTS: dict[int, Any] = {}
_WALK_LIMIT = 10_000  # objects looked at in the asked-for arguments before giving up
_ATOMS = frozenset((float, int, bool, complex, str, bytes, type(None)))


def constant_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], argnums: int | tuple[int, ...]
) -> dict[int, Any]:
    """The arrays among ``args`` (not at ``argnums``) and ``kwargs`` whose sensitivities the
    gradient discards, by id (the map keeps them alive: ids are not reused)."""
    np = sys.modules.get("numpy")
    if np is None:
        return _NO_CONSTANTS
    asked = {argnums % len(args)} if isinstance(argnums, int) else {i % len(args) for i in argnums}
    candidates = {
        id(a): a
        for a in (*(a for i, a in enumerate(args) if i not in asked), *kwargs.values())
        if type(a) is np.ndarray and a.dtype.kind in "fc"
    }
    if not candidates:
        return _NO_CONSTANTS
    reachable = _reachable_ids([args[i] for i in asked], np.ndarray)
    if reachable is None:
        return _NO_CONSTANTS
    return {k: a for k, a in candidates.items() if k not in reachable}


def _reachable_ids(roots: list[Any], ndarray: type) -> set[int] | None:
    """The ids of everything reachable from ``roots`` through containers and attributes,
    or None when something cannot be seen into (or there is too much to look at)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        v = stack.pop()
        t = type(v)
        if t in _ATOMS or id(v) in seen:
            continue
        seen.add(id(v))
        if len(seen) > _WALK_LIMIT:
            return None
        if t is ndarray:
            if v.dtype.kind == "O":
                return None
            continue
        if isinstance(v, (list, tuple, set, frozenset, dict)) and len(v) > _WALK_LIMIT:
            return None
        if isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif callable(v) or not (hasattr(v, "__dict__") or hasattr(t, "__slots__")):
            return None  # (a closure, a generator, an extension type: anything may hide there)
        if hasattr(v, "__dict__"):
            stack.extend(vars(v).values())
        for s in getattr(t, "__slots__", ()):
            if hasattr(v, s):
                stack.append(getattr(v, s))
    return seen


def is_constant(x: Any, Abox: Any) -> bool:
    """Whether the sensitivity of the operand ``x`` is discarded by the pass ``Abox``
    belongs to (see the module's docstring): a rule may return no sensitivity for it."""
    constants = getattr(Abox, "constants", _NO_CONSTANTS)
    return bool(constants) and id(x) in constants and not is_tracked_array(x)
