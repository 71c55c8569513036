"""Whether a sensitivity fits its primal (``conforms``), and the error naming where it does not
(``check_conforms``): checked where a user's sensitivity enters dplus.
"""

from __future__ import annotations

from typing import Any

from ..errors import SensitivityError
from .kinds import is_atom, is_ndarray, is_number
from .linear import OneHot, TupleAccumulator, _as_tuple, _describe, _extra_conformance, gen_zero
from .result import ProcResult


def conforms(sens: Any, primal: Any) -> bool:
    """True when ``sens`` conforms to ``primal`` (SPEC section 4)."""
    try:
        check_conforms(sens, primal)
    except SensitivityError:
        return False
    return True


def check_conforms(sens: Any, primal: Any, what: str = "the sensitivity", path: str = "") -> None:
    """Raise :class:`SensitivityError` naming where ``sens`` fails to conform to ``primal``."""
    if sens is gen_zero:
        return
    if type(sens) is OneHot or type(sens) is TupleAccumulator:
        sens = _as_tuple(sens)
    reason = _nonconformance(sens, primal, what, path)
    if reason is not None:
        where = f" at {path}" if path else ""
        raise SensitivityError(
            f"{what} does not conform to the result{where}: {_describe(sens)} given where the result is "
            f"{_describe(primal)}; {reason}"
        )


def _nonconformance(sens: Any, primal: Any, what: str, path: str) -> str | None:
    """Why ``sens`` does not conform to ``primal`` (None: it does). The parts of a container
    are checked by :func:`check_conforms`, which raises naming the part."""
    if type(primal) is bool or is_atom(primal):
        return None if sens is None else "a non-differentiable value takes the sensitivity None"
    if sens is None:
        return "None is the sensitivity of non-differentiable values only"
    if is_number(primal):
        return None if is_number(sens) else "a number's sensitivity is a number"
    if is_ndarray(primal):
        if is_ndarray(sens):
            if sens.shape != primal.shape:
                return f"shape {sens.shape} given where the result has shape {primal.shape}"
            return None
        return None if is_number(sens) else "an array's sensitivity is an array of the same shape"
    if isinstance(primal, (tuple, list)):
        return _sequence_nonconformance(sens, primal, what, path)
    if isinstance(primal, dict):
        return _dict_nonconformance(sens, primal, what, path)
    if isinstance(primal, ProcResult):
        if not isinstance(sens, ProcResult):
            return "a ProcResult's sensitivity is a ProcResult"
        check_conforms(sens.primal, primal.primal, what, f"{path}.primal")
        return None
    checker = _extra_conformance.get(type(primal))
    if checker is not None and not checker(sens, primal):
        return f"not a sensitivity for {type(primal).__name__}"
    return None


def _sequence_nonconformance(sens: Any, primal: Any, what: str, path: str) -> str | None:
    kind = "tuple" if isinstance(primal, tuple) else "list"
    if not isinstance(sens, tuple if kind == "tuple" else list):
        return f"{type(sens).__name__} given where the result is a {kind} of {len(primal)}"
    if len(sens) != len(primal):
        return f"length {len(sens)} given where the result has length {len(primal)}"
    for i, (s, p) in enumerate(zip(sens, primal)):
        check_conforms(s, p, what, f"{path}[{i}]")
    return None


def _dict_nonconformance(sens: Any, primal: dict[Any, Any], what: str, path: str) -> str | None:
    if not isinstance(sens, dict):
        return f"{type(sens).__name__} given where the result is a dict"
    extra = set(sens) - set(primal)
    if extra:
        return f"keys {sorted(map(repr, extra))} are not keys of the result"
    for k, s in sens.items():
        check_conforms(s, primal[k], what, f"{path}[{k!r}]")
    return None
