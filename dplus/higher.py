"""Derivatives of derivatives: the transform of a plus-function.

A plus-function ``P`` is itself a Python function, so it has a transform of its own:

- a rule written by hand (``defvjp``'s transforms, ``register_backprop``) is transformed
  from its source like any function;
- a plus-function that dplus generated is rebuilt in a *differentiable-again* form (no
  float fast paths, records read back through ``list.pop``) whose text is registered with
  ``linecache``, and that function is transformed. Its closure cells are the ones ``P``
  has, so nested closures keep their values.

Generated code calls a few operations of :mod:`dplus.runtime.ops`; their rules here make
the tower work: the transform of "call ``f``'s transform" is "call the transform of
``f``'s transform".
"""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable
from typing import Any

from . import api as _api
from .api import (
    D,
    _D_inside,
    _dplus_inside,
    _grad1_inside,
    _grad_inside,
    _gradient_outermost,
    _gradient_steps,
    _lift,
    _make_gradient,
    _make_gradient1,
    boundary,
    default_sensitivity,
    grad,
    grad1,
    prepare_sensitivity,
)
from .boxes_again import (
    added_to_element,
    cell_stash,
    folded_with_transpose,
    handed_over,
    holds_mutables,
    router_stash,
    stash_add,
    stash_dual,
    stash_take,
)
from .errors import NonDifferentiableError, describe_callable
from .markers import mark_derived
from .primitives import _iterables
from .primitives import containers as _containers
from .primitives import sets as _sets
from .primitives.containers import gather_slice, register_attribute, scatter_slice
from .rules import defnondiff
from .runtime import ops as runtime_ops
from .runtime.boxes import BoxSensitivities
from .runtime.closures import CodeMap, PlusInfo, is_plus_function, plus_info, register_plus_code
from .runtime.core import (
    CellKey,
    KeywordDict,
    apply_transform,
    changed_since,
    fold,
    handover,
    is_tracked_mutable,
    lift,
    snapshot,
    watch_call,
)
from .runtime.hooks import hooks
from .runtime.linear import (
    OneHot,
    add,
    coerce_zero,
    dot,
    gen_zero,
    is_ndarray,
    is_zero_sensitivity,
    scale,
    tuple_items,
    tuple_part,
    zero,
)
from .runtime.registry import is_registered_transform, next_order_form, register_primitive
from .runtime.result import ProcResult, call_plus, run_backprop
from .runtime.result import backprop as result_backprop
from .runtime.result import primal as result_primal

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero

_TOWER: weakref.WeakKeyDictionary[Any, Callable[..., ProcResult]] = weakref.WeakKeyDictionary()
_NEST = CodeMap()


def transform_of_plus(P: Any) -> Callable[..., ProcResult]:
    """The plus-function of the plus-function ``P``."""
    try:
        cached = _TOWER.get(P)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    result = _transform_of_plus(P)
    try:
        _TOWER[P] = result
    except TypeError:
        pass
    return result


def _transform_of_plus(P: Any) -> Callable[..., ProcResult]:
    from .transform.transformer import plus_function_for

    form = next_order_form(P)
    if form is not None:
        return plus_function_for(form)
    info = plus_info(P)
    source = P.__dict__.get("__dplus_source__") if isinstance(P, types.FunctionType) else None
    if info is None and isinstance(source, types.FunctionType):
        # a copy unpickled in another process (the code registry is per process): derive it again here
        from .runtime.portable import remember_source

        remember_source(source)
        P = plus_function_for(source)
        info = plus_info(P)
    if info is not None and info.origin is not None and isinstance(P, types.FunctionType):
        return plus_function_for(_differentiable_again(P, info.origin))
    if getattr(P, "__dplus_lazy__", False):
        # define_dplus's lazy wrapper: differentiate the derived plus-function again
        return transform_of_plus(plus_function_for(P.__dplus_source__))
    if isinstance(P, types.FunctionType):
        return plus_function_for(P)
    refusal = getattr(type(P), "__dplus_again_refusal__", None)
    if refusal is not None:  # a plus-function object of dplus's own (functools.cache's)
        raise NonDifferentiableError(refusal)
    raise NonDifferentiableError(
        f"dplus cannot differentiate {describe_callable(P)} again: it is not a Python function. "
        "Register a rule for its transform with dplus.register_primitive"
    )


def _differentiable_again(P: types.FunctionType, f: types.FunctionType) -> types.FunctionType:
    """``P`` rebuilt from ``f`` without fast paths, with source that can be transformed again."""
    from .transform.transformer import _compile_or_load

    nest = _NEST.get(f.__code__)
    if nest is None:
        nest = _NEST[f.__code__] = _compile_or_load(f, nestable=True)
    code = nest.codes.get(P.__code__.co_name)
    if code is None:
        raise NonDifferentiableError(f"dplus cannot differentiate {describe_callable(P)} again")
    cells = dict(zip(P.__code__.co_freevars, P.__closure__ or ()))
    closure = []
    for name in code.co_freevars:
        if name in cells:
            closure.append(cells[name])
        elif name in nest.helper_cells:
            closure.append(nest.helper_cells[name])
        else:
            raise NonDifferentiableError(
                f"dplus cannot differentiate {describe_callable(P)} again: the variable {name!r} is not available"
            )
    again = types.FunctionType(code, P.__globals__, code.co_name, P.__defaults__, tuple(closure))
    if P.__kwdefaults__:
        again.__kwdefaults__ = {
            k.replace(_prefix_of(P), nest.prefix, 1): v for k, v in P.__kwdefaults__.items()
        }
    return again


def _prefix_of(P: types.FunctionType) -> str:
    for k in P.__kwdefaults__ or {}:
        if k.endswith("sig"):
            return k[: -len("sig")]
    return "_dp_"


# ---------------------------------------------------------------------------
# rules that make the operations of generated code differentiable again


# These tower rules are themselves written in the language dplus differentiates (plain
# calls, closures, tuples), so that the next order transforms them from source too.


def _shift_callee(r: ProcResult) -> ProcResult:
    """A callee's plus-function's result as the result of ``call(f, *args)``: f's sensitivity is out[0]."""
    inner = r.backprop

    def call_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        out = inner(A, Abox)
        return ((), out[0]) + tuple(out[1:])

    return ProcResult(r.primal, call_backprop)


def _operator_result(r: ProcResult) -> ProcResult:
    inner = r.backprop

    def operator_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        out = inner(A, Abox)
        return ((), None, out[1], out[2])

    return ProcResult(r.primal, operator_backprop)


def _call_tower(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """The transform of ``runtime_ops.call``: call the transform of ``f``'s transform.

    With keyword arguments, the backprop's last element is the dict of their
    sensitivities, as for any call with keywords (``runtime_ops.call`` binds them)."""
    stands_for_itself = is_plus_function(f) and not is_registered_transform(f)
    if type(f) is functools.partial and _stands_for_itself(f.func):
        return _call_partial_tower(f, args, kwargs)
    if kwargs:
        names = runtime_ops.plain_parameters(
            f if stands_for_itself else _resolved(lift(f)), args, kwargs
        )
        if names is not None:
            return _call_positionally_tower(_call_tower, f, names, args, kwargs)
    if stands_for_itself:
        # a plus-function made inside transformed code stands for itself
        return _shift_callee(runtime_ops.call(f, *args, **kwargs) if kwargs else f(*args))
    first = lift(f)
    T = transform_of_plus(first)
    return _shift_callee_relayout(_call_transform(T, args, kwargs), first, T)


def _live_iteration_again_tower(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """The transform of ``runtime_ops.live_iteration_again``: the transform of the ordinary call
    where the iterator's laziness cannot show (``zip`` of tuples), else the same refusal."""
    if runtime_ops.laziness_visible(fn, args, kwargs):
        runtime_ops.refuse_live_iteration_again(fn)
    return apply_transform(_call_tower, fn, *args, **kwargs)


def _stands_for_itself(f: Any) -> bool:
    """A plus-function made inside transformed code: at the next order it stands for itself."""
    return is_plus_function(f) and not is_registered_transform(f)


def _call_partial_tower(
    p: functools.partial[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> ProcResult:
    """The transform of calling a partial whose function was made inside transformed code (so
    it stands for itself here): the function called with the bound arguments, through the
    transform of ``call``; the backprops answer as the partial's first-order plus-function's
    do, the partial's sensitivity laid out as its rule's (function, bound arguments, bound
    keywords)."""
    layout = _PartialLayout(len(p.args), len(args), tuple(p.keywords), tuple(kwargs))
    keywords = dict(p.keywords)
    keywords.update(kwargs)
    r = apply_transform(_call_tower, p.func, *(p.args + args), **keywords)
    first = r.primal  # ProcResult(value, the function's backprop)
    primal = ProcResult(first.primal, _partial_backprop_plus(first.backprop, layout))

    def call_partial_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if isinstance(S, ProcResult) and S.backprop is not Z and S.backprop is not None:
            # the partial backprop's closure sensitivity is a 1-tuple of the inner backprop's
            S = ProcResult(S.primal, runtime_ops.closure_parts(S.backprop, 1)[0])
        out = r.backprop(S, Abox)  # ((), function's, *positional, [keywords by name])
        return ((),) + layout.as_partials(out[1:])

    return ProcResult(primal, call_partial_backprop)


class _PartialLayout:
    """How the sensitivities of a call of ``partial(g, *bound, **bound_kw)(*args, **kwargs)``
    are laid out: ``g``'s backprop answers ``(closure, *bound, *args, {keywords})``; the
    partial's ``((closure, bound's, {bound keywords}), *args, [{keywords}])``."""

    __slots__ = ("nb", "na", "bound_names", "names")

    def __init__(
        self, nb: int, na: int, bound_names: tuple[Any, ...], names: tuple[Any, ...]
    ) -> None:
        self.nb, self.na, self.bound_names, self.names = nb, na, bound_names, names

    def kept(self) -> tuple[Any, ...]:
        return tuple([k for k in self.bound_names if k not in self.names])

    def as_partials(self, out: tuple[Any, ...]) -> tuple[Any, ...]:
        nb, npos = self.nb, self.nb + self.na
        pos = tuple(out[1 : 1 + npos])
        own = (out[0], pos[:nb], runtime_ops.keywords_at(out, 1 + npos, self.kept()))
        res = (own,) + pos[nb:]
        if self.names:
            res = res + (runtime_ops.keywords_at(out, 1 + npos, self.names),)
        return res

    def as_function(self, S: Any) -> tuple[Any, ...]:
        """The transpose of ``as_partials``: a sensitivity of its result as one of ``out``."""
        nb, na = self.nb, self.na
        parts = tuple_items(S, 1 + na + (1 if self.names else 0))
        own = parts[0]
        s_fn, s_bound, s_kw = (Z, Z, Z) if own is Z or own is None else tuple_items(own, 3)
        bound = (Z,) * nb if s_bound is Z or s_bound is None else tuple_items(s_bound, nb)
        res = (s_fn,) + tuple(bound) + tuple(parts[1 : 1 + na])
        if self.bound_names or self.names:
            given = parts[-1] if self.names else {}
            by_name = {k: s_kw.get(k, Z) if isinstance(s_kw, dict) else Z for k in self.kept()}
            for k in self.names:
                by_name[k] = given.get(k, Z) if isinstance(given, dict) else Z
            res = res + (KeywordDict(by_name),)
        return res


defnondiff(_PartialLayout)


def _partial_backprop_plus(inner: Any, layout: _PartialLayout) -> Any:
    """The plus-function of a partial's backprop around ``inner`` (its function's backprop, a
    plus-function at this order): it answers as the partial's; its closure is ``(inner,)``."""

    def partial_backprop_plus(A: Any, Abox: BoxSensitivities) -> ProcResult:
        r = apply_transform(_call_tower, inner, A, Abox)

        def partial_backprop_plus_backprop(S: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            if S is Z or S is None:
                return (Z,), Z, Z
            g = r.backprop(layout.as_function(S), Abox2)  # ((), inner's, A's, Abox's)
            return (g[1],), g[2], g[3]

        return ProcResult(layout.as_partials(r.primal), partial_backprop_plus_backprop)

    return partial_backprop_plus


register_plus_code(
    _partial_backprop_plus(None, _PartialLayout(0, 0, (), ())).__code__,
    PlusInfo(None, ("inner",), None),
)


def _resolved(P: Any) -> Any:
    """The plus-function that ``P`` calls: define_dplus's lazy wrapper stands for the
    plus-function derived from its source."""
    if getattr(P, "__dplus_lazy__", False):
        from .transform.transformer import plus_function_for

        return plus_function_for(P.__dplus_source__)
    return P


def _call_positionally_tower(
    tower: Any, f: Any, names: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> ProcResult:
    """The transform of ``runtime_ops._call_positionally``: keywords to a plus-function with
    plain parameters. The call is made positionally at this order too (through ``tower``,
    the transform of ``call`` or of ``call_plus``), and the backprop it returns is made to
    answer by name again, as the first-order call's does."""
    npos = len(args)
    keywords = tuple(kwargs)
    r = apply_transform(tower, f, *(args + tuple(kwargs[n] for n in names[npos:])))
    first = r.primal  # ProcResult(value, backprop answering by position)
    primal = ProcResult(first.primal, _keyword_backprop_plus(first.backprop, names, npos, keywords))

    def call_positionally_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if isinstance(S, ProcResult) and S.backprop is not Z and S.backprop is not None:
            # the keyword backprop's closure sensitivity is a 1-tuple of the inner backprop's
            S = ProcResult(S.primal, runtime_ops.closure_parts(S.backprop, 1)[0])
        out = r.backprop(S, Abox)  # ((), f's, *per-parameter)
        return ((),) + runtime_ops.keywords_by_name(out[1:], names, npos, keywords)

    return ProcResult(primal, call_positionally_backprop)


def _keyword_backprop_plus(
    inner: Any, names: tuple[Any, ...], npos: int, keywords: tuple[Any, ...]
) -> Any:
    """The plus-function of ``_call_positionally``'s keyword backprop around ``inner`` (itself
    a plus-function at this order): it answers by name; its closure is ``(inner,)``."""

    def keyword_backprop_plus(A: Any, Abox: BoxSensitivities) -> ProcResult:
        r = apply_transform(_call_tower, inner, A, Abox)
        n = 2 + npos

        def keyword_backprop_plus_backprop(S: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            if S is Z or S is None:
                return (Z,), Z, Z
            parts = tuple_items(S, n)
            kw = parts[-1]
            by_position = parts[: 1 + npos] + tuple(
                kw.get(k, Z) if isinstance(kw, dict) else Z for k in names[npos:]
            )
            g = r.backprop(by_position, Abox2)  # ((), inner's, A's, Abox's)
            return (g[1],), g[2], g[3]

        return ProcResult(
            runtime_ops.keywords_by_name(r.primal, names, npos, keywords),
            keyword_backprop_plus_backprop,
        )

    return keyword_backprop_plus


register_plus_code(
    _keyword_backprop_plus(None, (), 0, ()).__code__, PlusInfo(None, ("inner",), None)
)


def _call_transform(T: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> ProcResult:
    """``T(*args, **kwargs)``, keywords' sensitivities returned by name."""
    if kwargs:
        return runtime_ops.call(T, *args, **kwargs)
    return call_plus(T, *args)


def _call_on_constants_tower(f: Any, *args: Any) -> ProcResult:
    """The transform of ``runtime_ops.call_on_constants``: a constant at every order when
    its callee is unknown, else the transform of ``call``."""
    P = runtime_ops.constant_callee(f, args, {})
    if P is None:
        return apply_transform(_call_tower, f, *args)
    r = runtime_ops.call_on_constants(f, *args)
    zeros = ((), None) + (Z,) * len(args)
    return ProcResult(r, lambda A, Abox: zeros)


def _shift_callee_relayout(r: ProcResult, P: Any, T: Any) -> ProcResult:
    """``_shift_callee`` for ``T``, the transform of the generated plus-function ``P``: T's
    closure sensitivity is laid out as P's closure (its variables and helpers), and P's
    sensitivity is laid out as the closure of the user's function it was made from."""
    names = _closure_layouts(P, T)
    if names is None:
        return _shift_callee(r)
    inner = r.backprop
    names_from, names_to = names

    def call_relayout_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        out = inner(A, Abox)
        return ((), relayout_closure(out[0], names_from, names_to)) + tuple(out[1:])

    return ProcResult(r.primal, call_relayout_backprop)


def _closure_layouts(P: Any, T: Any) -> tuple[Any, ...] | None:
    info_p, info_t = plus_info(P), plus_info(T)
    if (
        info_p is None
        or info_t is None
        or tuple(info_p.by_value_freevars) == tuple(info_t.by_value_freevars)
    ):
        return None
    return tuple(info_t.by_value_freevars), tuple(info_p.by_value_freevars)


def relayout_closure(S: Any, names_from: tuple[Any, ...], names_to: tuple[Any, ...]) -> Any:
    """A closure sensitivity laid out by ``names_from``, as one laid out by ``names_to``
    (names missing from ``names_from`` get zero)."""
    if S is Z or S is None:
        return Z
    parts = dict(zip(names_from, runtime_ops.closure_parts(S, len(names_from))))
    return tuple(parts.get(n, Z) for n in names_to)


def _relayout_rule(S: Any, names_from: tuple[Any, ...], names_to: tuple[Any, ...]) -> ProcResult:
    # a selection by name: its transpose is the selection the other way
    return ProcResult(
        relayout_closure(S, names_from, names_to),
        lambda A, Abox: ((), relayout_closure(A, names_to, names_from), None, None),
    )


def _run_backprop_tower(bp: Any, A: Any, Abox: Any) -> ProcResult:
    """``run_backprop`` in transformed code: ``bp`` was made there, so it stands for itself."""
    if not is_plus_function(bp):
        raise NonDifferentiableError(
            "dplus cannot differentiate a backpropagator made outside the code being differentiated "
            "(back = D(f)(x) made before grad(lambda v: back(v)...)); call D(f)(x) or dplus.dplus(f)(x) "
            "inside the function you differentiate"
        )
    return _shift_callee(bp(A, Abox))


def _call_plus_tower(P: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """The transform of ``api.call_plus``: ``P`` came from outside, so differentiate it again."""
    if kwargs:
        names = runtime_ops.plain_parameters(_resolved(P), args, kwargs)
        if names is not None:
            return _call_positionally_tower(_call_plus_tower, P, names, args, kwargs)
    T = transform_of_plus(P)
    return _shift_callee_relayout(_call_transform(T, args, kwargs), P, T)


def _binop_tower(fn: Any, a: Any, b: Any) -> ProcResult:
    return _operator_result(call_plus(transform_of_plus(runtime_ops.select_binop(fn, a, b)), a, b))


def _transform_of_plus_rule(P: Any) -> ProcResult:
    """``transform_of_plus`` inside transformed code: its result is used through call_plus."""
    T = transform_of_plus(P)

    def transform_of_plus_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if is_registered_transform(P):
            return (), Z  # a rule's transform closes over constants: its gradient functions, zeros
        if not is_zero_sensitivity(A):
            raise NonDifferentiableError(
                "at this order of differentiation, sensitivity reached the variables a differentiated closure "
                "captures; pass them as arguments instead"
            )
        return (), Z

    return ProcResult(T, transform_of_plus_backprop)


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
    if isinstance(v, (set, frozenset)):
        return True
    if type(v) is not tuple:
        return False
    n = len(v)
    return any(
        isinstance(e, (set, frozenset))
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
        r = runtime_ops.accumulate(adj, v, s, Abox)
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
    from .runtime.linear import add

    return ProcResult(add(u, v), lambda A, Abox: ((), A, A))


def _procresult_tower(p: Any, b: Any) -> ProcResult:
    def procresult_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is Z or A is None:
            return (), Z, Z
        if isinstance(A, ProcResult):
            return (), A.primal, A.backprop
        raise NonDifferentiableError(
            f"a {type(A).__name__} was given as the sensitivity of a ProcResult"
        )

    return ProcResult(ProcResult(p, b), procresult_backprop)


def _closure_parts_tower(A: Any, n: int) -> ProcResult:
    parts = runtime_ops.closure_parts(A, n)
    return ProcResult(parts, lambda S, Abox: ((), S, None))


def _route_result_tower(route: Any) -> ProcResult:
    r = runtime_ops.route_result(route)
    if type(route) is not runtime_ops._TupleRouter and type(route) is not runtime_ops._ArrayRouter:
        return ProcResult(r, lambda S, Abox2: ((), None))
    h = router_stash(route)

    def route_result_backprop(S: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        stash_add(h, S, Abox2)
        return (), None

    return ProcResult(r, route_result_backprop)


def _route_back_tower(route: Any, i: int, A: Any, Abox: BoxSensitivities) -> ProcResult:
    if type(route) is runtime_ops._TupleRouter:
        runtime_ops.route_back(route, i, A, Abox)
        h = router_stash(route)
        n = len(route.items)

        def route_back_backprop(S2: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            # the result's sensitivity was stashed first: this reverse runs after it
            return (), None, None, tuple_part(stash_take(h, Abox2), i, n), None

        return ProcResult(None, route_back_backprop)
    if type(route) is runtime_ops._ArrayRouter:
        # the array's sensitivity is the result, stashed first; row i's is its row
        runtime_ops.route_back(route, i, A, Abox)
        h = router_stash(route)

        def array_route_back_backprop(S2: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            S = stash_take(h, Abox2)
            return (), None, None, Z if S is Z or S is None else S[i], None

        return ProcResult(None, array_route_back_backprop)
    if type(route) is runtime_ops._ListRouter and not is_zero_sensitivity(A):
        transpose = added_to_element(Abox, route, i, A)
        return ProcResult(None, lambda S2, Abox2: ((), None, None, transpose(Abox2), None))
    if not isinstance(route, runtime_ops._NullRouter) and not is_zero_sensitivity(A):
        raise NonDifferentiableError(
            "derivatives of derivatives of loops over lists, sets or arrays are not supported yet; "
            "loop over a tuple, or over range(len(xs)) and index"
        )
    runtime_ops.route_back(route, i, A, Abox)
    return ProcResult(None, lambda S, Abox2: ((), None, None, Z, None))


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
            if not is_zero_sensitivity(A):
                name = what if isinstance(what, str) else what(*args, **kwargs)
                raise NonDifferentiableError(
                    f"derivatives of derivatives through {name} are not supported yet{fix}"
                )
            return ((),) + (Z,) * len(args)

        return ProcResult(result, again_backprop)

    return again


def _prepare_sensitivity_tower(result: Any, Aw: Any, Abox: BoxSensitivities) -> ProcResult:
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
    folds = [folded_with_transpose(a, s, Abox) for a, s in zip(args, out[1 : 1 + n])]
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
    _operator_result,
    _call_tower,
    _call_transform,
    _call_on_constants_tower,
    _live_iteration_again_tower,
    _call_plus_tower,
    _call_positionally_tower,
    _keyword_backprop_plus,
    _binop_tower,
    _run_backprop_tower,
):
    mark_derived(_fn, "tower")
register_primitive(transform_of_plus, _transform_of_plus_rule)
register_primitive(relayout_closure, _relayout_rule)
defnondiff(_closure_layouts)
defnondiff(lift)  # the plus-function of f: made from f's code, it carries no sensitivity back
defnondiff(is_plus_function)
defnondiff(is_registered_transform)
defnondiff(is_tracked_mutable)
defnondiff(is_zero_sensitivity)
defnondiff(runtime_ops.select_binop)
register_primitive(
    runtime_ops.call,
    _call_tower,
    note="calling a callee from generated code (derivatives of derivatives)",
)
register_primitive(
    runtime_ops.live_iteration_again,
    _live_iteration_again_tower,
    note="a lazy builtin's iterator in code differentiated again (derivatives of derivatives)",
)
register_primitive(
    runtime_ops.call_on_constants,
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
register_primitive(runtime_ops.binop_plus, _binop_tower)
register_primitive(runtime_ops.accumulate, _accumulate_tower)
register_primitive(runtime_ops.add, _add_tower)
register_primitive(ProcResult, _procresult_tower, note="ProcResult(primal, backprop)")
register_primitive(runtime_ops.closure_parts, _closure_parts_tower)
register_primitive(runtime_ops.route_back, _route_back_tower)
register_primitive(runtime_ops.route_result, _route_result_tower)
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
defnondiff(changed_since)
defnondiff(BoxSensitivities)
defnondiff(CellKey)
defnondiff(runtime_ops.iteration_router)


# The linear interface as differentiable primitives, so derivative code can be differentiated.
def _dot_rule(u: Any, v: Any) -> ProcResult:
    return ProcResult(dot(u, v), lambda A, Abox: ((), scale(v, A), scale(u, A)))


def _scale_rule(v: Any, a: Any) -> ProcResult:
    return ProcResult(scale(v, a), lambda A, Abox: ((), scale(A, a), dot(A, v)))


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
    runtime_ops.accumulate_cell(Abox, key, value, s)

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
register_primitive(runtime_ops.accumulate_cell, _accumulate_cell_rule)
register_primitive(fold, _fold_rule)


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
            runtime_ops.unpack_sensitivity(v, parts),
            lambda A, Abox: ((), Z, Z if A is Z or A is None else tuple(A[i] for i in range(n))),
        )
    if type(v) is list:
        # a new list of the parts: its sensitivity, kept in Abox2, is theirs
        r = runtime_ops.unpack_sensitivity(v, parts)
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
    return ProcResult(runtime_ops.unpack_sensitivity(v, parts), lambda A, Abox: ((), Z, A))


def _tuple_items_rule(S: Any, n: int) -> ProcResult:
    # the identity on tuple sensitivities, from any representation to a dense tuple
    return ProcResult(tuple_items(S, n), lambda A, Abox: ((), A, None))


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
                if k not in sig.parameters
            }
            by_name[p.name] = rest if rest else Z
        elif isinstance(kw, dict) and p.name in kw:
            by_name[p.name] = kw[p.name]
    return tuple(by_name.get(p.name, Z) for p in sig.parameters.values())


def _bind_arguments_rule(
    sig: Any, args: tuple[Any, ...], kwargs: dict[Any, Any], *given_defaults: Any
) -> ProcResult:
    # ``defaults`` may be passed (None included, as rule code differentiated again passes it)
    # or left out: the backprop answers for exactly the arguments given
    defaults = given_defaults[0] if given_defaults else None
    values = runtime_ops.bind_arguments(sig, args, kwargs, defaults)
    # the ``**`` parameter is a dict made here: the sensitivities of its entries are in Abox,
    # under that dict, not in A
    star_star = [k for k, p in enumerate(sig.parameters.values()) if p.kind is p.VAR_KEYWORD]

    def bind_arguments_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        sens = tuple_items(A, len(values))
        for k in star_star:
            entry = Abox.pop(values[k], Z)
            if entry is not Z and entry:
                sens = sens[:k] + (add(sens[k], dict(entry)),) + sens[k + 1 :]
        out = runtime_ops.unbind_sensitivities(sig, args, kwargs, Z, sens, Abox)
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
        return (), None, args_sens, Z, runtime_ops.default_sensitivities(sig, args, kwargs, sens)

    return ProcResult(values, bind_arguments_backprop)


def _unbind_sensitivities_rule(
    sig: Any,
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    closure: Any,
    sens: tuple[Any, ...],
    Abox: Any,
) -> ProcResult:
    out = runtime_ops.unbind_sensitivities(sig, args, kwargs, closure, sens, Abox)

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
        back = runtime_ops.unbind_sensitivities(
            sig, args, kwargs, Z, tuple_items(A, len(out)), Abox
        )
        return (), None, Z, Z, back

    return ProcResult(out, parameter_sensitivities_backprop)


def _default_sensitivities_rule(
    sig: Any, args: tuple[Any, ...], kwargs: dict[Any, Any], sens: tuple[Any, ...]
) -> ProcResult:
    out = runtime_ops.default_sensitivities(sig, args, kwargs, sens)
    found = runtime_ops.defaults_used(sig, args, kwargs)
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


register_primitive(runtime_ops.bind_arguments, _bind_arguments_rule)
register_primitive(runtime_ops.default_sensitivities, _default_sensitivities_rule)
register_primitive(_parameter_sensitivities, _parameter_sensitivities_rule)
register_primitive(runtime_ops.unbind_sensitivities, _unbind_sensitivities_rule)
register_primitive(
    runtime_ops.keyword_sensitivities,
    _unsupported_again(runtime_ops.keyword_sensitivities, "keyword arguments"),
)


def _keyword_sensitivity_rule(g: tuple[Any, ...], pos: int, name: str) -> ProcResult:
    n = len(g)

    def keyword_sensitivity_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if A is Z or A is None:
            return (), Z, None, None
        return (), OneHot(pos, KeywordDict({name: A}), n), None, None

    return ProcResult(runtime_ops.keyword_sensitivity(g, pos, name), keyword_sensitivity_backprop)


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
        runtime_ops.keywords_by_name(out, names, npos, keywords), keywords_by_name_backprop
    )


def _keywords_at_rule(g: tuple[Any, ...], pos: int, names: tuple[Any, ...]) -> ProcResult:
    n = len(g)

    def keywords_at_backprop(S: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if not isinstance(S, dict) or all(is_zero_sensitivity(S.get(k, Z)) for k in names):
            return (), Z, None, None
        return (), OneHot(pos, KeywordDict({k: S.get(k, Z) for k in names}), n), None, None

    return ProcResult(runtime_ops.keywords_at(g, pos, names), keywords_at_backprop)


def _merged_keywords_rule(bound: dict[Any, Any], kwargs: dict[Any, Any]) -> ProcResult:
    out = runtime_ops.merged_keywords(bound, kwargs)

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


register_primitive(runtime_ops.keyword_sensitivity, _keyword_sensitivity_rule)
register_primitive(runtime_ops.merged_keywords, _merged_keywords_rule)
register_primitive(runtime_ops.call_plus_keywords, _call_plus_keywords_rule)
register_primitive(runtime_ops.keywords_at, _keywords_at_rule)
register_primitive(runtime_ops.keywords_by_name, _keywords_by_name_rule)
register_primitive(
    runtime_ops.double_star_sensitivity,
    _unsupported_again(runtime_ops.double_star_sensitivity, "keyword arguments"),
)


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
register_primitive(runtime_ops.unpack_sensitivity, _unpack_sensitivity_rule)


# grad/grad1 called inside code that is differentiated again: the rules above run
# _lift and the gradient-function makers, whose transforms are these (a made gradient
# function is a closure: the sensitivity of what it closes over goes back to fplus / g)
def _closure_part(G: Any, A: Any, name: str) -> Any:
    part = relayout_closure(A, G.__code__.co_freevars, (name,))
    return Z if part is Z else part[0]


def _closure_part_at(G: Any, A: Any, path: tuple[str, ...]) -> Any:
    """The part of ``G``'s closure sensitivity ``A`` that belongs to the variable reached by
    following ``path`` through the closures (``("fd", "fplus")``: ``G``'s ``fd``, whose ``fplus``)."""
    for k, name in enumerate(path):
        if A is Z or A is None:
            return Z
        A = _closure_part(G, A, name)
        if k + 1 < len(path):
            G = G.__closure__[G.__code__.co_freevars.index(name)].cell_contents
    return A


def derived_maker_rule(
    make: Callable[..., Any], name: str, path: tuple[str, ...] = ("fplus",)
) -> Callable[..., ProcResult]:
    """The transform of ``_make_gradient`` (``_make_D``, ``_make_dplus``, and the JAX forms'
    makers): the function made closes over ``fplus`` (through ``path``), whose sensitivity is
    its closure's part."""

    def maker_rule(fplus: Any, f: Any, *rest: Any) -> ProcResult:
        if fplus is f and is_plus_function(f) and not is_registered_transform(f):
            raise NonDifferentiableError(
                f"{name} of a function defined inside the function being differentiated works for a first "
                "derivative, not yet for higher ones; define the function it differentiates outside "
                "(pass what it needs as arguments)"
            )
        G = make(fplus, f, *rest)
        return ProcResult(
            G, lambda A, Abox: ((), _closure_part_at(G, A, path), Z) + (Z,) * len(rest)
        )

    return maker_rule


_make_gradient_rule = derived_maker_rule(_make_gradient, "grad")


def _gradient_outermost_tower(
    fplus: Any, sensitivity: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> ProcResult:
    """The transform of ``api._gradient_outermost``: ``_gradient_steps`` differentiated from its source."""
    return call_plus(lift(_gradient_steps), fplus, sensitivity, args, kwargs)


mark_derived(_gradient_outermost_tower, "tower")


def _make_gradient1_rule(g: Any, f: Any) -> ProcResult:
    G1 = _make_gradient1(g, f)
    return ProcResult(G1, lambda A, Abox: ((), _closure_part(G1, A, "g"), Z))


defnondiff(_lift)
register_primitive(_make_gradient, _make_gradient_rule)
register_primitive(_api._make_D, derived_maker_rule(_api._make_D, "D"))
register_primitive(_api._make_dplus, derived_maker_rule(_api._make_dplus, "dplus"))
register_primitive(_make_gradient1, _make_gradient1_rule)
register_primitive(_gradient_outermost, _gradient_outermost_tower)
defnondiff(_closure_part)
defnondiff(_closure_part_at)
register_primitive(grad, _grad_inside, note="grad called inside differentiated code")
register_primitive(grad1, _grad1_inside, note="grad1 called inside differentiated code")
register_primitive(D, _D_inside, note="D called inside differentiated code")
register_primitive(_api.dplus, _dplus_inside, note="dplus called inside differentiated code")


# Rule code that keeps sensitivities of the elements of iterables is not differentiable
# again yet: refused naming what the user's code did, never these internals.
def _iterated(seq: Any, *rest: Any) -> str:
    """What the user's code iterated, for a refusal: ``sum() over a NumPy array``."""
    kinds = {
        _iterables.LIST: "a list",
        _iterables.ARRAY: "a NumPy array",
        _iterables.REPEAT: "itertools.repeat",
    }
    return f"{seq.fn}() over {kinds.get(seq.kind, 'an iterable')}"


def _seq_sens_rule(sq: Any, s: Any, Abox: Any = None) -> ProcResult:
    """``Seq.sens``: the sensitivity of a rule's iterable argument from its elements' ``s``.
    Linear in ``s``; for a list, a tuple or an array, the transpose gives each element its
    part back (iterators, sets and repeats keep the refusal)."""
    if (
        sq.kind not in (_iterables.LIST, _iterables.TUPLE, _iterables.ARRAY, _iterables.CONST)
        or s is None
    ):
        return _refused_seq_sens(sq, s, Abox)
    r = sq.sens(s, Abox)

    def seq_sens_backprop(A: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        if r is Z or sq.kind == _iterables.CONST or (r is s and is_tracked_mutable(r)):
            return (), Z, Z, None  # zero, or the list itself (its sensitivity is its own, in Abox2)
        S = Abox2.pop(r, Z) if is_tracked_mutable(r) else Z
        S = add(S, A)
        if S is Z or S is None:
            return (), Z, Z, None
        n = len(s)
        parts = [
            tuple_part(S, i, len(sq.items)) if sq.kind == _iterables.TUPLE else S[i]
            for i in range(n)
        ]
        return (), Z, parts if type(s) is list else tuple(parts), None

    return ProcResult(r, seq_sens_backprop)


# A Seq in rule code differentiated again is a record of its argument: reading its value or
# items (a tuple argument's own elements) sends the sensitivity back to where they came from.
def _seq_rule(value: Any, items: Any, kind: int, fn: str, arg: str) -> ProcResult:
    def seq_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        if not isinstance(A, dict):
            return (), Z, Z, None, None, None
        return (), A.get("value", Z), A.get("items", Z), None, None, None

    return ProcResult(_iterables.Seq(value, items, kind, fn, arg), seq_backprop)


def _seq_attribute_rule(name: str) -> Callable[[Any], ProcResult]:
    def seq_attribute_rule(sq: Any) -> ProcResult:
        return ProcResult(
            getattr(sq, name), lambda A, Abox: ((), Z if A is Z or A is None else {name: A})
        )

    return seq_attribute_rule


register_primitive(
    _iterables.Seq, _seq_rule, note="internal: a rule's iterable argument, at the next order"
)
register_attribute(_iterables.Seq, "items", _seq_attribute_rule("items"))
register_attribute(_iterables.Seq, "value", _seq_attribute_rule("value"))


def _seq_source_rule(sq: Any) -> ProcResult:
    """``sq.source()``: the materialized items, or the value itself when there are none."""
    return apply_transform(_seq_attribute_rule("value" if sq.items is None else "items"), sq)


register_primitive(
    _iterables.Seq.source,
    _seq_source_rule,
    note="internal: what a rule iterates, at the next order",
)

_refused_seq_sens = _unsupported_again(
    _iterables.Seq.sens,
    _iterated,
    "; on arrays use the NumPy function (np.sum, np.max, np.prod, ...), which is differentiable "
    "again, and pass lists, tuples or arrays rather than iterators",
)
register_primitive(
    _iterables.Seq.sens, _seq_sens_rule, note="internal: a rule's iterable argument's sensitivity"
)

# A set's sensitivity is a dict keyed by its elements, made and read by these helpers of the
# set rules: refused at the next order, naming sets.
_SETS_AGAIN = "the elements of sets"
_SETS_FIX = "; keep such values in tuples inside functions differentiated more than once"
for _helper_module, _helper_name in (
    (_containers, "set_sensitivity"),
    (_containers, "set_entry"),
    (_containers, "set_items_sensitivities"),
    (_iterables, "set_sens"),
    (_sets, "_route"),
):
    _helper = getattr(_helper_module, _helper_name)
    register_primitive(
        _helper,
        _unsupported_again(_helper, _SETS_AGAIN, _SETS_FIX),
        note="internal: refused at the next order",
    )


hooks.install(transform_of_plus=transform_of_plus)
