"""Calling conventions at the next order: binding arguments to parameters and mapping the
parameters' sensitivities back are linear maps transposed to each other; keyword arguments'
sensitivities travel by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import NonDifferentiableError
from ..primitives.container_reads import gather_slice, register_attribute, scatter_slice
from ..runtime import arguments as runtime_arguments
from ..runtime import core as runtime_core
from ..runtime import list_writes as runtime_list_writes
from ..runtime import result as runtime_result
from ..runtime.boxes import BoxSensitivities
from ..runtime.core import KeywordDict, apply_transform
from ..runtime.handover import handover, is_tracked_mutable
from ..runtime.linear import (
    OneHot,
    add,
    gen_zero,
    is_zero_sensitivity,
    tuple_items,
    tuple_part,
)
from ..runtime.registry import register_primitive
from ..runtime.result import ProcResult
from .call_rules import _call_plus_tower
from .sensitivity_rules import (
    _onehot_rule,
    _tuple_items_rule,
    _tuple_part_rule,
    _unpack_sensitivity_rule,
)

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


# Calling conventions: binding arguments to parameters, and mapping parameter
# sensitivities back, are linear maps transposed to each other.
def _parameter_sensitivities(
    sig: Any, args: tuple[Any, ...], kwargs: dict[Any, Any], S: Any
) -> tuple[Any, ...]:
    """The transpose of unbind_sensitivities: per-parameter sensitivities from per-argument ones."""
    n_out = 1 + len(args) + (1 if kwargs else 0)
    items = tuple_items(S, n_out)
    pos = items[1 : 1 + len(args)]
    kw = items[-1] if kwargs else Z
    by_name: dict[Any, Any] = {}
    i = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and i < len(args):
            by_name[p.name] = pos[i]
            i += 1
        elif p.kind is p.VAR_POSITIONAL:
            extra = pos[i:]
            i = len(args)
            by_name[p.name] = Z if all(is_zero_sensitivity(e) for e in extra) else tuple(extra)
        elif p.kind is p.VAR_KEYWORD:
            rest = {
                k: v
                for k, v in (kw.items() if isinstance(kw, dict) else ())
                if not runtime_arguments.bound_by_keyword(sig, k)
            }
            by_name[p.name] = KeywordDict(rest) if rest else Z
        elif isinstance(kw, dict) and p.name in kw and p.kind is not p.POSITIONAL_ONLY:
            by_name[p.name] = kw[p.name]
    return tuple(by_name.get(p.name, Z) for p in sig.parameters.values())


def _bind_arguments_rule(
    sig: Any, args: tuple[Any, ...], kwargs: dict[Any, Any], *given_defaults: Any
) -> ProcResult:
    # ``defaults`` may be passed (None included, as rule code differentiated again passes it)
    # or left out: the backprop answers for exactly the arguments given
    defaults = given_defaults[0] if given_defaults else None
    values = runtime_arguments.bind_arguments(sig, args, kwargs, defaults)
    # the ``**`` parameter is a dict made here: the sensitivities of its entries are in Abox,
    # under that dict, not in A
    star_star = [k for k, p in enumerate(sig.parameters.values()) if p.kind is p.VAR_KEYWORD]

    def bind_arguments_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        sens = tuple_items(A, len(values))
        for k in star_star:
            entry = Abox.pop(values[k], Z)
            if entry is not Z and entry:
                sens = sens[:k] + (add(sens[k], KeywordDict(entry)),) + sens[k + 1 :]
        out = runtime_arguments.unbind_sensitivities(sig, args, kwargs, Z, sens, Abox)
        kw_sens = out[-1] if kwargs else Z
        if isinstance(kw_sens, dict):
            # ``kwargs`` is the plus-function's ``**`` dict: its sensitivity lives in Abox
            handover(Abox, kwargs, {k: v for k, v in kw_sens.items() if not is_zero_sensitivity(v)})
        args_sens = tuple(out[1 : 1 + len(args)])
        if not given_defaults:
            return (), None, args_sens, Z
        if defaults is None:
            return (), None, args_sens, Z, Z
        sens = tuple_items(A, len(values))
        return (
            (),
            None,
            args_sens,
            Z,
            runtime_arguments.default_sensitivities(sig, args, kwargs, sens),
        )

    return ProcResult(values, bind_arguments_backprop)


def _unbind_sensitivities_rule(
    sig: Any,
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    closure: Any,
    sens: tuple[Any, ...],
    Abox: Any,
) -> ProcResult:
    out = runtime_arguments.unbind_sensitivities(sig, args, kwargs, closure, sens, Abox)

    def unbind_sensitivities_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        if kwargs and isinstance(out[-1], dict) and out[-1] in Abox2:
            raise NonDifferentiableError(
                "derivatives of order three and more through keyword arguments are not supported yet; "
                "pass the arguments by position"
            )
        return (
            (),
            None,
            Z,
            Z,
            tuple_items(A, len(out))[0],
            _parameter_sensitivities(sig, args, kwargs, A),
            None,
        )

    return ProcResult(out, unbind_sensitivities_backprop)


def _parameter_sensitivities_rule(
    sig: Any, args: tuple[Any, ...], kwargs: dict[Any, Any], S: Any
) -> ProcResult:
    # linear in S; its transpose maps parameter sensitivities back to the call's arguments
    out = _parameter_sensitivities(sig, args, kwargs, S)

    def parameter_sensitivities_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is Z:
            return (), None, Z, Z, Z
        back = runtime_arguments.unbind_sensitivities(
            sig, args, kwargs, Z, tuple_items(A, len(out)), Abox
        )
        return (), None, Z, Z, back

    return ProcResult(out, parameter_sensitivities_backprop)


def _default_sensitivities_rule(
    sig: Any, args: tuple[Any, ...], kwargs: dict[Any, Any], sens: tuple[Any, ...]
) -> ProcResult:
    out = runtime_arguments.default_sensitivities(sig, args, kwargs, sens)
    found = runtime_arguments.defaults_used(sig, args, kwargs)
    slots = tuple(j for j, (k, used) in enumerate(found) if used)  # among the defaults
    positions = tuple(k for k, used in found if used)  # among the parameters
    n = len(sens)
    nd = len(out)

    def default_sensitivities_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        # the transpose: each default's part back at its parameter's position (through
        # scatter_slice and gather_slice, which differentiate again at any order)
        if A is Z or A is None:
            return (), None, Z, Z, Z
        return (), None, Z, Z, scatter_slice(gather_slice(A, slots, nd), positions, n)

    return ProcResult(out, default_sensitivities_backprop)


register_primitive(runtime_arguments.bind_arguments, _bind_arguments_rule)
register_primitive(runtime_arguments.default_sensitivities, _default_sensitivities_rule)
register_primitive(_parameter_sensitivities, _parameter_sensitivities_rule)
register_primitive(runtime_arguments.unbind_sensitivities, _unbind_sensitivities_rule)


def _keyword_dict_rule(*items: Any) -> ProcResult:
    # a copy of a dict into a value carried like a tuple (rule code builds them from dicts it
    # made): the copy's sensitivity goes back to the dict's entries
    if len(items) > 1 or (items and not isinstance(items[0], dict)):
        raise NonDifferentiableError(
            "dplus builds a KeywordDict from one dict only; this is a gap in dplus, please report it"
        )
    out = KeywordDict(*items)

    def keyword_dict_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if not items or not isinstance(A, dict) or not A:
            return ((),) + (Z,) * len(items)
        source = items[0]
        back = {k: v for k, v in A.items() if k in source and not is_zero_sensitivity(v)}
        if not back:
            return (), Z
        return (), back if is_tracked_mutable(source) else KeywordDict(back)

    return ProcResult(out, keyword_dict_backprop)


register_primitive(KeywordDict, _keyword_dict_rule)


def _keyword_sensitivities_rule(g: tuple[Any, ...], pos: int) -> ProcResult:
    # a selection from the backprop's result: its transpose puts the dict back at ``pos``
    out = runtime_arguments.keyword_sensitivities(g, pos)
    n = len(g)
    found = n > pos and isinstance(g[pos], dict)

    def keyword_sensitivities_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if is_tracked_mutable(out) and out in Abox:
            A = Abox.pop(out)  # a plain dict keeps its sensitivity in Abox
        if not found or A is Z or A is None or not A:
            return (), Z, None
        S = dict(A) if is_tracked_mutable(out) else KeywordDict(A)
        return (), OneHot(pos, S, n), None

    return ProcResult(out, keyword_sensitivities_backprop)


register_primitive(runtime_arguments.keyword_sensitivities, _keyword_sensitivities_rule)


def _keyword_sensitivity_rule(g: tuple[Any, ...], pos: int, name: str) -> ProcResult:
    n = len(g)

    def keyword_sensitivity_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is Z or A is None:
            return (), Z, None, None
        return (), OneHot(pos, KeywordDict({name: A}), n), None, None

    return ProcResult(runtime_core.keyword_sensitivity(g, pos, name), keyword_sensitivity_backprop)


def _keywords_by_name_rule(
    out: tuple[Any, ...], names: tuple[Any, ...], npos: int, keywords: tuple[Any, ...]
) -> ProcResult:
    n = len(out)

    def keywords_by_name_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if S is Z or S is None:
            return (), Z, None, None, None
        parts = tuple_items(S, 2 + npos)
        kw = parts[-1]
        by_name = dict(kw) if isinstance(kw, dict) else {}
        back = parts[: 1 + npos] + tuple(by_name.get(k, Z) for k in names[npos : n - 1])
        return (), back, None, None, None

    return ProcResult(
        runtime_result.keywords_by_name(out, names, npos, keywords), keywords_by_name_backprop
    )


def _keywords_at_rule(g: tuple[Any, ...], pos: int, names: tuple[Any, ...]) -> ProcResult:
    n = len(g)

    def keywords_at_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if not isinstance(S, dict) or all(is_zero_sensitivity(S.get(k, Z)) for k in names):
            return (), Z, None, None
        return (), OneHot(pos, KeywordDict({k: S.get(k, Z) for k in names}), n), None, None

    return ProcResult(runtime_core.keywords_at(g, pos, names), keywords_at_backprop)


def _merged_keywords_rule(bound: dict[Any, Any], kwargs: dict[Any, Any]) -> ProcResult:
    out = runtime_arguments.merged_keywords(bound, kwargs)

    def merged_keywords_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if S is Z or S is None:
            return (), Z, Z
        by_name = dict(zip(out[0], tuple_items(tuple_items(S, 2)[1], len(out[0]))))
        # ``kwargs`` is a ``**`` dict: its sensitivity lives in Abox
        handover(
            Abox, kwargs, {k: by_name[k] for k in kwargs if not is_zero_sensitivity(by_name[k])}
        )
        return (), KeywordDict({k: by_name[k] for k in bound if k not in kwargs}), Z

    return ProcResult(out, merged_keywords_backprop)


def _call_plus_keywords_rule(
    P: Any, args: tuple[Any, ...], names: tuple[Any, ...], values: tuple[Any, ...]
) -> ProcResult:
    r = apply_transform(_call_plus_tower, P, *args, **dict(zip(names, values)))
    n = len(args)

    def call_plus_keywords_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        out = r.backprop(S, Abox)  # ((), P's, *args', {keyword: ...})
        kw = out[2 + n] if len(out) > 2 + n and isinstance(out[2 + n], dict) else {}
        return (), out[1], tuple(out[2 : 2 + n]), None, tuple(kw.get(k, Z) for k in names)

    return ProcResult(r.primal, call_plus_keywords_backprop)


register_primitive(runtime_core.keyword_sensitivity, _keyword_sensitivity_rule)
register_primitive(runtime_arguments.merged_keywords, _merged_keywords_rule)
register_primitive(runtime_arguments.call_plus_keywords, _call_plus_keywords_rule)
register_primitive(runtime_core.keywords_at, _keywords_at_rule)
register_primitive(runtime_result.keywords_by_name, _keywords_by_name_rule)


def _double_star_sensitivity_rule(kw: dict[Any, Any], keys: tuple[Any, ...]) -> ProcResult:
    # a selection of ``kw``'s entries by key: its transpose gives each key's part back to ``kw``
    out = runtime_arguments.double_star_sensitivity(kw, keys)

    def double_star_sensitivity_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if not isinstance(A, dict):
            return (), Z, None
        back = {k: A[k] for k in keys if k in kw and k in A and not is_zero_sensitivity(A[k])}
        if not back:
            return (), Z, None
        return (), back if is_tracked_mutable(kw) else KeywordDict(back), None

    return ProcResult(out, double_star_sensitivity_backprop)


register_primitive(runtime_arguments.double_star_sensitivity, _double_star_sensitivity_rule)


def _onehot_value_rule(S: OneHot) -> ProcResult:
    return ProcResult(
        S.value, lambda A, Abox: ((), OneHot(S.index, A, S.length) if A is not Z else Z)
    )


def _onehot_int_rule(name: str) -> Callable[[OneHot], ProcResult]:
    return lambda S: ProcResult(getattr(S, name), lambda A, Abox: ((), Z))


register_attribute(OneHot, "value", _onehot_value_rule)
register_attribute(OneHot, "index", _onehot_int_rule("index"))
register_attribute(OneHot, "length", _onehot_int_rule("length"))
register_primitive(OneHot, _onehot_rule)
register_primitive(tuple_items, _tuple_items_rule)
register_primitive(tuple_part, _tuple_part_rule)
register_primitive(runtime_list_writes.unpack_sensitivity, _unpack_sensitivity_rule)
