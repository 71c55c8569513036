"""What kind of value a value is, for the rules and the runtime: a number (``int``, ``float``,
``complex``, NumPy scalars; not ``bool``), a NumPy array, or an atom that never carries
sensitivity (``None``, strings, types, modules, ...). NumPy is looked up, never imported.
"""

from __future__ import annotations

import enum
import numbers
import operator
import sys
import types
from typing import Any

_NUMBER_TYPES = (float, int, complex)


def _numpy() -> Any:
    return sys.modules.get("numpy")


def is_number(x: Any) -> bool:
    """True for int, float, complex and NumPy scalars; False for bool."""
    t = type(x)
    if t is float or t is int or t is complex:
        return True
    known = _NUMBER_BY_TYPE.get(t)
    if known is None:
        known = _NUMBER_BY_TYPE[t] = _is_number_type(t)
    return known


# (the answer depends on the type alone: kept per type, since the ABC check of
# ``numbers.Number`` costs about a microsecond for an array, which most rules ask about)
_NUMBER_BY_TYPE: dict[type, bool] = {}


def _is_number_type(t: type) -> bool:
    if t is bool:
        return False
    np = _numpy()
    if np is not None and issubclass(t, np.bool_):
        return False
    if issubclass(t, enum.Enum):  # IntEnum / IntFlag members are ints, but names, not quantities
        return False
    return issubclass(t, numbers.Number)


def is_ndarray(x: Any) -> bool:
    np = _numpy()
    return np is not None and isinstance(x, np.ndarray)


_ATOM_TYPES = (
    type(None),
    str,
    bytes,
    bool,
    range,
    type,
    types.ModuleType,
    slice,
    type(Ellipsis),
    enum.Enum,
)


def is_atom(x: Any) -> bool:
    """Values that never carry sensitivity: None, str, bool, range, types, modules, ..."""
    if isinstance(x, _ATOM_TYPES):
        return True
    np = _numpy()
    # (np.finfo / np.iinfo describe a dtype: their attributes are constants)
    return np is not None and isinstance(x, (np.bool_, np.dtype, np.finfo, np.iinfo))


def sequence_index(idx: Any) -> Any:
    """A list or tuple subscript as Python reads it: an int as it is, an object with
    ``__index__`` converted once with ``operator.index`` (later code, which compares the
    position with 0, must not run the user's ``__lt__``), anything else (a slice, a wrong key)
    as it is, for the subscript itself to take or reject."""
    if type(idx) is int or type(idx) is slice:
        return idx
    return operator.index(idx) if hasattr(type(idx), "__index__") else idx
