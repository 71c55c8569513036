"""Rules that make calls from generated code differentiable again (the tower): calling a
callee, a partial, a function with keywords, a plus-function, a binary operator; and
``grad``/``grad1`` called inside code that is differentiated again.

These tower rules are themselves written in the language dplus differentiates (plain
calls, closures, tuples), so that the next order transforms them from source too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import api as _api
from ..api import (
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
    grad,
    grad1,
)
from ..errors import NonDifferentiableError
from ..markers import mark_derived
from ..rules import defnondiff
from ..runtime import calls as runtime_calls
from ..runtime import core as runtime_core
from ..runtime import result as runtime_result
from ..runtime import routers as runtime_routers
from ..runtime.boxes import BoxSensitivities
from ..runtime.closures import PlusInfo, is_plus_function, plus_info, register_plus_code
from ..runtime.core import (
    KeywordDict,
    apply_transform,
    lift,
)
from ..runtime.linear import (
    gen_zero,
    is_zero_sensitivity,
    tuple_items,
)
from ..runtime.registry import is_registered_transform, register_primitive
from ..runtime.result import ProcResult, call_plus
from .transform_of_plus import transform_of_plus

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


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


def _no_callee_sensitivity(r: ProcResult) -> ProcResult:
    """``_shift_callee`` for a callee that receives no sensitivity."""
    inner = r.backprop

    def call_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        out = inner(A, Abox)
        return ((), Z) + tuple(out[1:])

    return ProcResult(r.primal, call_backprop)


def _operator_result(r: ProcResult) -> ProcResult:
    inner = r.backprop

    def operator_backprop(A: Any, Abox: BoxSensitivities) -> tuple[Any, ...]:
        out = inner(A, Abox)
        return ((), None, out[1], out[2])

    return ProcResult(r.primal, operator_backprop)


def _call_tower(f: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """The transform of ``runtime_calls.call``: call the transform of ``f``'s transform.

    With keyword arguments, the backprop's last element is the dict of their
    sensitivities, as for any call with keywords (``runtime_calls.call`` binds them)."""
    stands_for_itself = is_plus_function(f) and not is_registered_transform(f)
    if type(f) is functools.partial and _stands_for_itself(f.func):
        return _call_partial_tower(f, args, kwargs)
    if kwargs:
        names = runtime_result.plain_parameters(
            f if stands_for_itself else _resolved(lift(f)), args, kwargs
        )
        if names is not None:
            return _call_positionally_tower(_call_tower, f, names, args, kwargs)
    if stands_for_itself:
        # a plus-function made inside transformed code stands for itself
        return _shift_callee(runtime_calls.call(f, *args, **kwargs) if kwargs else f(*args))
    first = lift(f)
    T = transform_of_plus(first)
    if getattr(first, "dp_unknown", False):
        # a policy's plus-function closes over f itself (and its name): that closure's
        # sensitivity is not laid out as f's (a bound method's is (A_self,)); f, run as it
        # is, receives none
        return _no_callee_sensitivity(_call_transform(T, args, kwargs))
    return _shift_callee_relayout(_call_transform(T, args, kwargs), first, T)


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
            S = ProcResult(S.primal, runtime_calls.closure_parts(S.backprop, 1)[0])
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
        own = (out[0], pos[:nb], runtime_core.keywords_at(out, 1 + npos, self.kept()))
        res = (own,) + pos[nb:]
        if self.names:
            res = res + (runtime_core.keywords_at(out, 1 + npos, self.names),)
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
        from ..transform.plus_functions import plus_function_for

        return plus_function_for(P.__dplus_source__)
    return P


def _call_positionally_tower(
    tower: Any, f: Any, names: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> ProcResult:
    """The transform of ``runtime_result._call_positionally``: keywords to a plus-function with
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
            S = ProcResult(S.primal, runtime_calls.closure_parts(S.backprop, 1)[0])
        out = r.backprop(S, Abox)  # ((), f's, *per-parameter)
        return ((),) + runtime_result.keywords_by_name(out[1:], names, npos, keywords)

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
            runtime_result.keywords_by_name(r.primal, names, npos, keywords),
            keyword_backprop_plus_backprop,
        )

    return keyword_backprop_plus


register_plus_code(
    _keyword_backprop_plus(None, (), 0, ()).__code__, PlusInfo(None, ("inner",), None)
)


def _call_transform(T: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> ProcResult:
    """``T(*args, **kwargs)``, keywords' sensitivities returned by name."""
    if kwargs:
        return call_plus(T, *args, **kwargs)
    return call_plus(T, *args)


def _call_on_constants_tower(f: Any, *args: Any) -> ProcResult:
    """The transform of ``runtime_calls.call_on_constants``: a constant at every order when
    its callee is unknown, else the transform of ``call``."""
    P = runtime_calls.constant_callee(f, args, {})
    if P is None:
        return apply_transform(_call_tower, f, *args)
    r = runtime_calls.call_on_constants(f, *args)
    zeros = ((), None) + (Z,) * len(args)
    return ProcResult(r, lambda A, Abox: zeros)


def _live_iteration_again_tower(fn: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """The transform of ``runtime_routers.live_iteration_again``: the transform of the ordinary
    call where the iterator's laziness cannot show (``zip`` of tuples), else the same refusal."""
    if runtime_routers.laziness_visible(fn, args, kwargs):
        runtime_routers.refuse_live_iteration_again(fn)
    return apply_transform(_call_tower, fn, *args, **kwargs)


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
    parts = dict(zip(names_from, runtime_calls.closure_parts(S, len(names_from))))
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
        names = runtime_result.plain_parameters(_resolved(P), args, kwargs)
        if names is not None:
            return _call_positionally_tower(_call_plus_tower, P, names, args, kwargs)
    T = transform_of_plus(P)
    return _shift_callee_relayout(_call_transform(T, args, kwargs), P, T)


def _binop_tower(fn: Any, a: Any, b: Any) -> ProcResult:
    return _operator_result(
        call_plus(transform_of_plus(runtime_calls.select_binop(fn, a, b)), a, b)
    )


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
