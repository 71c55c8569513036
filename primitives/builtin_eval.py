"""Rules for ``eval`` and ``exec`` of a string: the string's code cannot be differentiated, so a
result that needs a sensitivity the code computed from a differentiable value is an error.
See :mod:`primitives.builtins`.
"""

from __future__ import annotations

import builtins as _b
import sys
from typing import Any

from dplus.errors import NonDifferentiableError
from dplus.runtime.kinds import is_ndarray, is_number
from dplus.runtime.linear import gen_zero, is_zero_sensitivity
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

# ---------------------------------------------------------------------------
# eval / exec of a string: the string's code cannot be differentiated. Inside differentiated
# code, ``eval(s)`` and ``exec(s)`` run on the user's names (normalize passes them). Only a
# result (or a namespace entry ``exec`` wrote) that needs a sensitivity is an error: one that
# gets a sensitivity while the code read a differentiable value.


def _code_names(code: Any) -> set[str]:
    """The names the code (and code nested in it) reads."""
    import dis

    names = {
        ins.argval
        for ins in dis.get_instructions(code)
        if ins.opname.startswith("LOAD_")
        and isinstance(ins.argval, str)
        and ins.opname != "LOAD_CONST"
    }
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _code_names(c)
    return names


def _carries_sensitivity(v: Any) -> bool:
    from dplus.runtime.handover import is_tracked_mutable

    if type(v) is bool or v is None or callable(v) and not is_tracked_mutable(v):
        return False
    return (
        is_number(v) or is_ndarray(v) or isinstance(v, (tuple, list, dict)) or is_tracked_mutable(v)
    )


def _reads_differentiable(source: Any, namespaces: tuple) -> list[str]:
    """The names the code reads whose values carry sensitivity, in the namespaces it ran in."""
    code = source if hasattr(source, "co_names") else None
    if code is None:
        try:
            code = compile(source, "<string>", "exec")
        except (SyntaxError, TypeError, ValueError):
            return ["<unreadable code>"]
    found = []
    for n in sorted(_code_names(code)):
        for ns in namespaces:
            if isinstance(ns, dict) and n in ns:
                if _carries_sensitivity(ns[n]) and not _is_module_namespace(ns):
                    found.append(n)
                break
    return found


def _is_module_namespace(ns: dict) -> bool:
    """A module's globals: differentiated code gives the values read there no sensitivity."""
    name = ns.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is ns


def _string_code_error(what: str, names: list[str]) -> NonDifferentiableError:
    return NonDifferentiableError(
        f"{what} of a string cannot be differentiated, and its result needs a sensitivity: the code "
        f"reads {', '.join(names)}; write the expression in the function itself"
    )


def eval_plus(source: Any, globals_: Any = None, locals_: Any = None) -> ProcResult:
    if globals_ is None:
        raise NonDifferentiableError(
            "eval inside differentiated code needs its namespaces; pass globals() and locals()"
        )
    r = _b.eval(source, globals_, locals_)
    nargs = 1 + (globals_ is not None) + (locals_ is not None)

    def eval_backprop(A: Any, Abox: Any) -> tuple:
        if not is_zero_sensitivity(A):
            names = _reads_differentiable(source, (locals_, globals_))
            if names:
                raise _string_code_error("eval", names)
        return ((),) + (gen_zero,) * nargs

    return ProcResult(r, eval_backprop)


def exec_plus(source: Any, globals_: Any = None, locals_: Any = None, **kwargs: Any) -> ProcResult:
    if globals_ is None:
        raise NonDifferentiableError(
            "exec inside differentiated code needs its namespaces; pass globals() and locals()"
        )
    spaces = [ns for ns in (globals_, locals_) if isinstance(ns, dict)]
    before = [dict(ns) for ns in spaces]
    _b.exec(source, globals_, locals_, **kwargs)
    written = [
        [k for k, v in ns.items() if k not in old or old[k] is not v]
        for ns, old in zip(spaces, before)
    ]
    nargs = 1 + (globals_ is not None) + (locals_ is not None)

    def exec_backprop(A: Any, Abox: Any) -> tuple:
        # what the code wrote: its sensitivity ends here (raising if the code read a
        # differentiable value); what it left alone keeps its sensitivity in the entry
        needs = False
        for ns, keys in zip(spaces, written):
            entry = Abox.get(ns)
            if entry is gen_zero or not isinstance(entry, dict):
                continue
            for k in keys:
                if not is_zero_sensitivity(entry.pop(k, gen_zero)):
                    needs = True
        if needs:
            names = _reads_differentiable(source, (locals_, globals_))
            if names:
                raise _string_code_error("exec", names)
        return ((),) + (gen_zero,) * nargs + ((None,) if kwargs else ())

    return ProcResult(None, exec_backprop)


register_primitive(
    _b.eval,
    eval_plus,
    note="eval of a string: runs on the user's names; no derivative through the string's code",
)
register_primitive(
    _b.exec,
    exec_plus,
    note="exec of a string: runs on the user's names; no derivative through the string's code",
)
