"""Rules that make the movement of sensitivities differentiable again: accumulating into
mutable values, the boundary of a differentiated call, the linear interface and sparse
tuple sensitivities (``OneHot``). (Loop routers: :mod:`.loop_rules`.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import policies as _policies
from ..api import (
    boundary,
    default_sensitivity,
    prepare_sensitivity,
)
from ..errors import NonDifferentiableError
from ..markers import mark_derived
from ..rules import defnondiff
from ..runtime import arguments as runtime_arguments
from ..runtime import calls as runtime_calls
from ..runtime import handover as runtime_handover
from ..runtime import linear as runtime_linear
from ..runtime import list_writes as runtime_list_writes
from ..runtime import live_again
from ..runtime import routers as runtime_routers
from ..runtime.boxes import BoxSensitivities
from ..runtime.closures import is_plus_function
from ..runtime.conformance import check_conforms
from ..runtime.core import CellKey, apply_transform, lift
from ..runtime.fold import (
    changed_since,
    fold,
    fold_arguments,
    has_own_entry,
    snapshot,
    watch_call,
)
from ..runtime.handover import handover, is_tracked_mutable
from ..runtime.interrupted import refuse_interrupted_writers
from ..runtime.kinds import is_ndarray, is_number
from ..runtime.linear import (
    OneHot,
    add,
    coerce_zero,
    dot,
    gen_zero,
    is_zero_sensitivity,
    scale,
    tuple_items,
    tuple_part,
    zero,
)
from ..runtime.memory import is_taking_backprop
from ..runtime.registry import is_registered_transform, register_primitive
from ..runtime.result import ProcResult, call_plus, plain_result, run_backprop
from ..runtime.result import backprop as result_backprop
from ..runtime.result import primal as result_primal
from .box_map import (
    folded_with_transpose,
    handed_over,
    held_sensitivities,
    holds_mutables,
)
from .call_rules import (
    _binop_tower,
    _call_on_constants_tower,
    _call_plus_tower,
    _call_positionally_tower,
    _call_tower,
    _call_transform,
    _closure_layouts,
    _kept_iteration_again_tower,
    _keyword_backprop_plus,
    _live_iteration_again_tower,
    _no_callee_sensitivity,
    _operator_result,
    _relayout_rule,
    _run_backprop_tower,
    _shift_callee,
    _shift_callee_relayout,
    _transform_of_plus_rule,
    relayout_closure,
)
from .stashes import cell_stash, router_stash, stash_dual, stash_take
from .transform_of_plus import transform_of_plus

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


def _sensitivity_reaches_mutable(v: Any, s: Any) -> bool:
    """Some list, dict, box or object in ``v`` (or in the tuple ``v``) gets a part of ``s`` that is
    not structurally zero (a computed 0.0 may still have a derivative at the next order)."""
    if s is Z or s is None:
        return False
    if is_tracked_mutable(v):
        return True
    if type(v) is not tuple:
        return False
    n = len(v)
    return any(
        is_tracked_mutable(e) and tuple_part(s, i, n) is not Z and tuple_part(s, i, n) is not None
        for i, e in enumerate(v)
    )


def _sensitivity_reaches_set(v: Any, s: Any) -> bool:
    """A set or frozenset in ``v`` (or in the tuple ``v``) gets a part of ``s`` not structurally zero."""
    if s is Z or s is None:
        return False
    if isinstance(v, frozenset):
        return True
    if type(v) is not tuple:
        return False
    n = len(v)
    return any(
        isinstance(e, frozenset)
        and tuple_part(s, i, n) is not Z
        and tuple_part(s, i, n) is not None
        for i, e in enumerate(v)
    )


def _accumulate_tower(adj: Any, v: Any, s: Any, Abox: BoxSensitivities) -> ProcResult:
    if _sensitivity_reaches_set(v, s):
        raise NonDifferentiableError(
            "derivatives of derivatives through the elements of sets are not supported yet; "
            "keep such values in tuples inside functions differentiated more than once"
        )
    if not _sensitivity_reaches_mutable(v, s):
        r = runtime_handover.accumulate(adj, v, s, Abox)
        if s is Z:  # (nothing was added: a structural zero has no derivative)
            return ProcResult(r, lambda A, Abox2: ((), A, None, Z, None))
        return ProcResult(r, lambda A, Abox2: ((), A, None, A, None))
    if is_tracked_mutable(v):  # its sensitivity goes into its entries in Abox
        transpose = handed_over(Abox, v, s)
        return ProcResult(adj, lambda A, Abox2: ((), A, None, transpose(Abox2), None))
    # a tuple holding mutable values: theirs go into their entries, the rest into the adjoint
    n = len(v)
    parts = tuple(tuple_part(s, i, n) for i in range(n))
    transposes = {
        i: handed_over(Abox, v[i], parts[i]) for i in range(n) if is_tracked_mutable(v[i])
    }
    r = add(adj, tuple(Z if i in transposes else parts[i] for i in range(n)))

    def accumulate_tuple_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        back = tuple(
            transposes[i](Abox2) if i in transposes else tuple_part(A, i, n) for i in range(n)
        )
        return (), A, None, back, None

    return ProcResult(r, accumulate_tuple_backprop)


def _add_tower(u: Any, v: Any) -> ProcResult:
    from ..runtime.linear import add

    return ProcResult(add(u, v), lambda A, Abox: ((), A, A))


def _procresult_tower(p: Any, b: Any) -> ProcResult:
    return _result_tower(ProcResult(p, b), b)


def _plain_result_tower(p: Any, b: Any) -> ProcResult:
    return _result_tower(plain_result(p, b), b)


def _result_tower(made: ProcResult, b: Any) -> ProcResult:
    # an array result's backprop may be ``b`` wrapped to take the entry of the array's memory
    # (runtime.memory.taking_backprop): ``b``'s sensitivity is its part of the wrapper's
    wrapped = is_taking_backprop(made.backprop)

    def procresult_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is Z or A is None:
            return (), Z, Z
        if isinstance(A, ProcResult):
            if wrapped:
                return (), A.primal, tuple_part(A.backprop, 0, 2)
            return (), A.primal, A.backprop
        raise NonDifferentiableError(
            f"a {type(A).__name__} was given as the sensitivity of a ProcResult"
        )

    return ProcResult(made, procresult_backprop)


def _closure_parts_tower(A: Any, n: int) -> ProcResult:
    parts = runtime_calls.closure_parts(A, n)
    return ProcResult(parts, lambda S, Abox: ((), S, None))


def _unsupported_again(
    fn: Any, what: str | Callable[..., str], fix: str = ""
) -> Callable[..., ProcResult]:
    """The transform of ``fn`` (rule code) at the next order: ``fn`` runs, and its backprop
    raises, naming ``what`` user code did (a string, or a function of ``fn``'s arguments),
    when the result receives sensitivity."""

    def again(*args: Any, **kwargs: Any) -> ProcResult:
        result = fn(*args, **kwargs)

        def again_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
            if is_tracked_mutable(result) and result in Abox:
                A = Abox.pop(result)  # a list or dict result keeps its sensitivity in Abox
            # (so do the lists, dicts and objects inside it: a tuple holding a list, found
            # dropped by orders8, a wrong second derivative without an error)
            if not is_zero_sensitivity(A) or held_sensitivities(result, Abox):
                name = what if isinstance(what, str) else what(*args, **kwargs)
                raise NonDifferentiableError(
                    f"derivatives of derivatives through {name} are not supported yet{fix}"
                )
            return ((),) + (Z,) * len(args)

        return ProcResult(result, again_backprop)

    return again


def _is_array_in_place(v: Any) -> bool:
    return is_ndarray(v) and is_tracked_mutable(v)


def _prepare_sensitivity_tower(result: Any, Aw: Any, Abox: BoxSensitivities) -> ProcResult:
    if _is_array_in_place(result) or (
        type(result) is tuple and any(map(_is_array_in_place, result))
    ):
        return _prepare_arrays_again(result, Aw, Abox)
    out = prepare_sensitivity(result, Aw, Abox)
    if not is_tracked_mutable(result):
        return ProcResult(out, lambda A, Abox2: ((), Z, A, None))
    # a list or dict result: Aw went into its entry in Abox, which the backprop reads; at this
    # order the entry's sensitivity is Aw's (both mutable: it goes into Abox2, under Aw)
    entry = Abox.get(result, None)

    def prepare_mutable_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        parts = [
            Abox2.pop(entry, Z) if is_tracked_mutable(entry) else Z,
            stash_take(cell_stash(Abox, result), Abox2),
        ]
        for S in parts:
            if is_zero_sensitivity(S):
                continue
            if any(is_tracked_mutable(e) for e in _members(result)):
                raise NonDifferentiableError(
                    "derivatives of derivatives with respect to the sensitivity of a result holding lists, "
                    "dicts or objects are not supported yet; return a tuple"
                )
            handover(Abox2, Aw, S)
        return (), Z, Z, None

    return ProcResult(out, prepare_mutable_backprop)


def _prepare_arrays_again(result: Any, Aw: Any, Abox: BoxSensitivities) -> ProcResult:
    """``prepare_sensitivity`` of a result that is (or a tuple holding) arrays whose memory
    was written in place: ``Aw`` goes into the memory's entry, made as an addition the next
    order records, whose transpose gives ``Aw`` its sensitivity (without it, the derivative
    with respect to the sensitivity given, ``D(f)(x)(v)`` differentiated in ``v``, lost
    every path through the memory: zero, silently)."""
    check_conforms(Aw, result, "the sensitivity given")
    if type(result) is not tuple:
        back = handed_over(Abox, result, Aw)
        return ProcResult(Z, lambda A, Abox2: ((), Z, back(Abox2), None))
    n = len(result)
    parts = tuple_items(Aw, n)
    if any(is_tracked_mutable(e) and not _is_array_in_place(e) for e in result):
        raise NonDifferentiableError(
            "derivatives of derivatives with respect to the sensitivity of a result holding lists, "
            "dicts or objects are not supported yet; return a tuple"
        )
    backs = [
        handed_over(Abox, e, p) if _is_array_in_place(e) else None for e, p in zip(result, parts)
    ]
    out = tuple(Z if b is not None else p for b, p in zip(backs, parts))

    def prepare_arrays_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        items = tuple_items(A, n)
        return (
            (),
            Z,
            tuple(b(Abox2) if b is not None else a for b, a in zip(backs, items)),
            None,
        )

    return ProcResult(out, prepare_arrays_backprop)


def _boundary_tower(
    args: tuple[Any, ...], out: tuple[Any, ...], Abox: BoxSensitivities
) -> ProcResult:
    n = len(args)
    if not holds_mutables(args):
        result = boundary(args, out, Abox)
        return ProcResult(
            result,
            lambda A, Abox2: (
                (),
                Z,
                (Z,) + tuple(fold(result, A, Abox2)) + (Z,) * (len(out) - 1 - n),
                None,
            ),
        )
    claimed: dict[Any, Any] = {}
    folds = [folded_with_transpose(a, s, Abox, True, claimed) for a, s in zip(args, out[1 : 1 + n])]
    _refuse_shared_memory_again(claimed)
    result = tuple(
        folded for folded, _ in folds
    )  # (boundary's values: the transposes know these lists)

    def boundary_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        # the gradients are new values; mutable ones (lists, dicts) keep their sensitivity in Abox2
        S = tuple(transpose(tuple_part(A, i, n), Abox2) for i, (_, transpose) in enumerate(folds))
        return (), Z, (Z,) + S + (Z,) * (len(out) - 1 - n), None

    return ProcResult(result, boundary_backprop)


for _fn in (
    _shift_callee,
    _shift_callee_relayout,
    _no_callee_sensitivity,
    _operator_result,
    _call_tower,
    _call_transform,
    _call_on_constants_tower,
    _live_iteration_again_tower,
    _kept_iteration_again_tower,
    _call_plus_tower,
    _call_positionally_tower,
    _keyword_backprop_plus,
    _binop_tower,
    _run_backprop_tower,
    _result_tower,
):
    mark_derived(_fn, "tower")
register_primitive(transform_of_plus, _transform_of_plus_rule)
register_primitive(relayout_closure, _relayout_rule)
defnondiff(_closure_layouts)
defnondiff(lift)  # the plus-function of f: made from f's code, it carries no sensitivity back
defnondiff(runtime_arguments.present_as_users)  # (names a nested function: no value)
defnondiff(is_plus_function)
defnondiff(is_registered_transform)
defnondiff(is_tracked_mutable)
defnondiff(has_own_entry)
defnondiff(is_number)  # (kinds: a rule's test of a value, a constant at every order)
defnondiff(is_ndarray)
defnondiff(is_zero_sensitivity)
defnondiff(runtime_calls.select_binop)
register_primitive(
    runtime_calls.call,
    _call_tower,
    note="calling a callee from generated code (derivatives of derivatives)",
)
register_primitive(
    live_again.live_iteration_again,
    _live_iteration_again_tower,
    note="a lazy builtin's iterator in code differentiated again (derivatives of derivatives)",
)
register_primitive(
    live_again.kept_iteration_again,
    _kept_iteration_again_tower,
    note="a lazy builtin's iterator kept in a variable, in code differentiated again",
)
register_primitive(
    runtime_calls.call_on_constants,
    _call_on_constants_tower,
    note="calling a callee on constants from generated code (derivatives of derivatives)",
)
register_primitive(run_backprop, _run_backprop_tower)
register_primitive(
    call_plus,
    _call_plus_tower,
    note="calling a plus-function from outside (derivatives of derivatives)",
)
register_primitive(
    apply_transform,
    _call_plus_tower,
    note="calling a rule's transform (derivatives of derivatives)",
)
register_primitive(runtime_calls.binop_plus, _binop_tower)
register_primitive(runtime_handover.accumulate, _accumulate_tower)
register_primitive(runtime_linear.add, _add_tower)
register_primitive(ProcResult, _procresult_tower, note="ProcResult(primal, backprop)")
register_primitive(plain_result, _plain_result_tower, note="ProcResult(primal, backprop)")
register_primitive(runtime_calls.closure_parts, _closure_parts_tower)
defnondiff(stash_dual)
defnondiff(router_stash)
register_primitive(prepare_sensitivity, _prepare_sensitivity_tower)
register_primitive(boundary, _boundary_tower)


def _default_sensitivity_rule(result: Any, sensitivity: Any) -> ProcResult:
    out = default_sensitivity(result, sensitivity)
    # the sensitivity given (grad(f, sensitivity)) is passed on: its own sensitivity is A's
    given = out is sensitivity
    return ProcResult(out, lambda A, Abox: ((), Z, A if given else Z))


register_primitive(default_sensitivity, _default_sensitivity_rule)
defnondiff(snapshot)
defnondiff(watch_call)
for _check in (
    _policies._refuse_reshaped_arrays,
    _policies._shows_memory_of,
    _policies._is_array,
    _policies._handed_back,
    _policies._stand_for_given,
    _policies._carry_attributes,
    _policies._refuse_held_functions,
    _policies._refuse_changed_then_raised,
):
    defnondiff(_check)
defnondiff(changed_since)
defnondiff(refuse_interrupted_writers)
defnondiff(BoxSensitivities)
defnondiff(CellKey)
defnondiff(runtime_routers.iteration_router)
for _watch in (  # (the watch of the items a loop takes, made at once: constants)
    runtime_routers.laziness_visible,
    live_again.watch_items,
    live_again.refuse_reversed_iterator,
    live_again.live_item_taken,
    live_again.live_iteration_done,
    live_again.note_list_write,
):
    defnondiff(_watch)


# The linear interface as differentiable primitives, so derivative code can be differentiated.
def _dot_rule(u: Any, v: Any) -> ProcResult:
    return ProcResult(
        dot(u, v),
        lambda A, Abox: ((), real_where_real(scale(v, A), u), real_where_real(scale(u, A), v)),
    )


def _scale_rule(v: Any, a: Any) -> ProcResult:
    return ProcResult(
        scale(v, a),
        lambda A, Abox: ((), real_where_real(scale(A, a), v), real_where_real(dot(A, v), a)),
    )


def real_where_real(s: Any, like: Any) -> Any:
    """The sensitivity ``s`` of ``like``, with the real part where ``like`` is real: a
    sensitivity ``c`` pairs with a change ``dx`` as ``Re(c dx)``, so a real number's is
    ``Re(c)``. (The tangents of ``jvp`` are real where the arguments are, and paired with
    complex backprops their sensitivities came back complex.)"""
    if s is Z or s is None:
        return s
    if isinstance(like, (tuple, list)) and isinstance(s, (tuple, list)) and len(s) == len(like):
        parts = tuple(real_where_real(s[i], like[i]) for i in range(len(s)))
        return parts if isinstance(s, tuple) else list(parts)
    if isinstance(like, dict) and isinstance(s, dict):
        return {k: real_where_real(e, like[k]) if k in like else e for k, e in s.items()}
    if _is_real(like) and _is_complex(s):
        return s.real
    return s


def _is_real(x: Any) -> bool:
    if type(x) is float or type(x) is int:
        return True
    dtype = getattr(x, "dtype", None)
    return (is_ndarray(x) or is_number(x)) and dtype is not None and dtype.kind in "fiu"


def _is_complex(x: Any) -> bool:
    if isinstance(x, complex):
        return True
    dtype = getattr(x, "dtype", None)
    return (is_ndarray(x) or is_number(x)) and dtype is not None and dtype.kind == "c"


mark_derived(real_where_real, "tower")  # (linear in s: differentiated from its source)
defnondiff(_is_real)
defnondiff(_is_complex)


def _coerce_zero_rule(u: Any, v: Any) -> ProcResult:
    return ProcResult(coerce_zero(u, v), lambda A, Abox: ((), A, Z))


def _primal_rule(r: ProcResult) -> ProcResult:
    return ProcResult(r.primal, lambda A, Abox: ((), ProcResult(A, Z) if A is not Z else Z))


def _backprop_rule(r: ProcResult) -> ProcResult:
    return ProcResult(r.backprop, lambda A, Abox: ((), ProcResult(Z, A) if A is not Z else Z))


register_primitive(dot, _dot_rule, note="the bilinear pairing of sensitivities")
register_primitive(scale, _scale_rule)
register_primitive(coerce_zero, _coerce_zero_rule, note="linear in its first argument")
register_primitive(result_primal, _primal_rule)
register_primitive(result_backprop, _backprop_rule)
defnondiff(zero)


def _accumulate_cell_rule(Abox: BoxSensitivities, key: Any, value: Any, s: Any) -> ProcResult:
    if value is not None and is_tracked_mutable(value) and not is_zero_sensitivity(s):
        raise NonDifferentiableError(
            "derivatives of derivatives through a list, dict or object held in a rebound captured "
            "variable are not supported yet"
        )
    runtime_calls.accumulate_cell(Abox, key, value, s)

    def accumulate_cell_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        return (), None, None, Z, stash_take(cell_stash(Abox, key), Abox2)

    return ProcResult(None, accumulate_cell_backprop)


def _members(v: Any) -> Any:
    if isinstance(v, dict):
        return v.values()
    if isinstance(v, list):
        return v
    return ()


def _fold_rule(v: Any, s: Any, Abox: Any) -> ProcResult:
    if not holds_mutables(v):  # numbers, tuples of them, arrays: fold is s, or zeros
        return ProcResult(fold(v, s, Abox), lambda A, Abox2: ((), Z, A, None))
    out, transpose = folded_with_transpose(v, s, Abox)
    return ProcResult(out, lambda A, Abox2: ((), Z, transpose(A, Abox2), None))


defnondiff(_sensitivity_reaches_mutable)
defnondiff(holds_mutables)
defnondiff(_sensitivity_reaches_set)
register_primitive(runtime_calls.accumulate_cell, _accumulate_cell_rule)
register_primitive(fold, _fold_rule)


def _refuse_shared_memory_again(claimed: dict[Any, Any]) -> None:
    # (the transpose of the boundary's reading of an entry hands back all of it: with a place
    # of memory given to one argument only, the next order would count it twice)
    if claimed.get("twice"):
        raise NonDifferentiableError(
            "derivatives of derivatives of a function whose arguments share memory that it "
            "changes in place (the same array passed twice, an array and a view of it, or an "
            "array held twice in a list) are not supported: pass copies, e.g. f(x, x.copy())"
        )


def _fold_arguments_rule(v: Any, s: Any, Abox: Any, claimed: Any = None) -> ProcResult:
    # (an array reads its entry: its transpose hands the next order's sensitivity back there)
    claimed = {} if claimed is None else claimed
    out, transpose = folded_with_transpose(v, s, Abox, True, claimed)
    _refuse_shared_memory_again(claimed)
    return ProcResult(out, lambda A, Abox2: ((), Z, transpose(A, Abox2), None, None))


register_primitive(fold_arguments, _fold_arguments_rule)


# Sparse tuple sensitivities at the next order: OneHot and taking one part are adjoint.
def _onehot_rule(i: int, A: Any, n: int) -> ProcResult:
    return ProcResult(OneHot(i, A, n), lambda S, Abox: ((), None, tuple_part(S, i, n), None))


def _tuple_part_rule(S: Any, i: int, n: int) -> ProcResult:
    return ProcResult(
        tuple_part(S, i, n), lambda A, Abox: ((), OneHot(i, A, n) if A is not Z else Z, None, None)
    )


def _unpack_sensitivity_rule(v: Any, parts: tuple[Any, ...]) -> ProcResult:
    if is_ndarray(v):
        # linear in the rows' sensitivities: its transpose hands each row its part
        n = len(parts)
        return ProcResult(
            runtime_list_writes.unpack_sensitivity(v, parts),
            lambda A, Abox: ((), Z, Z if A is Z or A is None else tuple(A[i] for i in range(n))),
        )
    if type(v) is list:
        # a new list of the parts: its sensitivity, kept in Abox2, is theirs
        r = runtime_list_writes.unpack_sensitivity(v, parts)
        n = len(parts)

        def unpack_list_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            S = add(Abox2.pop(r, Z), A)
            return (), Z, Z if S is Z or S is None else tuple(S[i] for i in range(n))

        return ProcResult(r, unpack_list_backprop)
    # (a tuple subclass, as NumPy's SVDResult, gets a plain tuple of the parts, as a tuple does)
    if not isinstance(v, tuple) and not is_zero_sensitivity(parts):
        raise NonDifferentiableError(
            f"derivatives of derivatives through unpacking a {type(v).__name__} are not supported yet; unpack a tuple"
        )
    return ProcResult(runtime_list_writes.unpack_sensitivity(v, parts), lambda A, Abox: ((), Z, A))


def _tuple_items_rule(S: Any, n: int) -> ProcResult:
    # the identity on tuple sensitivities, from any representation to a dense tuple
    return ProcResult(tuple_items(S, n), lambda A, Abox: ((), A, None))
