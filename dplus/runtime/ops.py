"""The namespace of generated code: every operation it calls by name (bound into it as closure
cells), found by :func:`helper_named` in the runtime modules that define them.

Each general-path operation returns a ProcResult; the rest move sensitivities around.
"""

from __future__ import annotations

from typing import Any

from . import arguments, calls, classes, generator_ops, generators, list_writes, live_again, routers
from .calls import _PROVIDED

# generated code calls these through helper_named
from .core import (  # noqa: F401
    CellKey,
    KeywordDict,
    apply_transform,
    as_plain_callable,
    keyword_sensitivity,
    keywords_at,
    lift,
)
from .fold import ItemColumns, fold, keyword_dict_sensitivity, layouts  # noqa: F401
from .handover import accumulate, handover, is_tracked_mutable, only_floats  # noqa: F401
from .result import (  # noqa: F401  (plain_parameters, keywords_by_name: ops of generated code)
    ProcResult,
    _call_positionally,
    call_plus,
    keywords_by_name,
    plain_parameters,
)


def helper_named(name: str) -> Any:
    """The runtime operation, or the rule provided above, that generated code calls as ``name``."""
    provided = _PROVIDED.get(name)
    if provided is not None:
        return provided
    for module in _DEFINING_MODULES:
        found = vars(module).get(name)
        if found is not None:
            return found
    return globals()[name]


# where the operations are defined, one module per job
_DEFINING_MODULES = (
    calls,
    routers,
    live_again,
    list_writes,
    arguments,
    generators,
    generator_ops,
    classes,
)
