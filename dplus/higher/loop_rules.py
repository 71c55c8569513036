"""Rules that make loops' routing of sensitivities differentiable again: where the
sensitivity of each iteration's element goes (``runtime.routers.route_back``) and what the
loop's iterable receives (``route_result``), for tuples, arrays, lists, sets and
``iter()`` of a list (a generator's values at a higher order).
"""

from __future__ import annotations

from typing import Any

from ..errors import NonDifferentiableError
from ..runtime import routers as runtime_routers
from ..runtime.boxes import BoxSensitivities
from ..runtime.handover import handover, is_tracked_mutable
from ..runtime.kinds import is_number
from ..runtime.linear import gen_zero, is_zero_sensitivity, tuple_part
from ..runtime.registry import register_primitive
from ..runtime.result import ProcResult
from .box_map import added_to_element
from .stashes import router_stash, stash_add, stash_take

Z: Any = gen_zero


def _route_result_tower(route: Any) -> ProcResult:
    r = runtime_routers.route_result(route)
    if type(route) is runtime_routers._SetRouter and type(r) is dict:
        # the set's sensitivity, a dict: its own sensitivity goes into the next map's entry,
        # where the loop's element reads take their parts (_set_route_back)
        def set_route_result_backprop(S: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            if not is_zero_sensitivity(S):
                handover(Abox2, r, S)
            return (), None

        return ProcResult(r, set_route_result_backprop)
    if (
        type(route) is not runtime_routers._TupleRouter
        and type(route) is not runtime_routers._ArrayRouter
    ):
        return ProcResult(r, lambda S, Abox2: ((), None))
    h = router_stash(route)

    def route_result_backprop(S: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        stash_add(h, S, Abox2)
        return (), None

    return ProcResult(r, route_result_backprop)


def _route_back_tower(route: Any, i: int, A: Any, Abox: BoxSensitivities) -> ProcResult:
    if type(route) is runtime_routers._TupleRouter:
        runtime_routers.route_back(route, i, A, Abox)
        h = router_stash(route)
        n = len(route.items)

        def route_back_backprop(S2: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            # the result's sensitivity was stashed first: this reverse runs after it
            return (), None, None, tuple_part(stash_take(h, Abox2), i, n), None

        return ProcResult(None, route_back_backprop)
    if type(route) is runtime_routers._ArrayRouter:
        # the array's sensitivity is the result, stashed first; row i's is its row
        runtime_routers.route_back(route, i, A, Abox)
        h = router_stash(route)

        def array_route_back_backprop(S2: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
            S = stash_take(h, Abox2)
            return (), None, None, Z if S is Z or S is None else S[i], None

        return ProcResult(None, array_route_back_backprop)
    if type(route) is runtime_routers._ListRouter and not is_zero_sensitivity(A):
        transpose = added_to_element(Abox, route, i, A)
        return ProcResult(None, lambda S2, Abox2: ((), None, None, transpose(Abox2), None))
    if type(route) is runtime_routers._SetRouter and not is_zero_sensitivity(A):
        return _set_route_back(route, i, A, Abox)
    if type(route) is runtime_routers._ListIteratorRouter and not is_zero_sensitivity(A):
        pos = route.positions[i]
        if pos < len(route.lst) and is_tracked_mutable(route.lst[pos]) and not is_number(A):
            raise NonDifferentiableError(
                "derivatives of derivatives of a loop over iter() of a list of lists, dicts or "
                "objects (or a generator or generator expression giving them) are not supported "
                "yet; loop over the list itself"
            )
        transpose = added_to_element(Abox, route, i, A, pos)
        return ProcResult(None, lambda S2, Abox2: ((), None, None, transpose(Abox2), None))
    if not isinstance(route, runtime_routers._NullRouter) and not is_zero_sensitivity(A):
        raise NonDifferentiableError(
            "derivatives of derivatives of loops over a zip, map, enumerate or reversed kept in "
            "a variable, or over an array, are not supported yet; loop over a tuple, or over "
            "range(len(xs)) and index"
        )
    runtime_routers.route_back(route, i, A, Abox)
    return ProcResult(None, lambda S, Abox2: ((), None, None, Z, None))


def _set_route_back(route: Any, i: int, A: Any, Abox: BoxSensitivities) -> ProcResult:
    """A loop over a set: ``A`` added to the entry of the element iteration ``i`` took in the
    router's dict (the set's sensitivity, its result). At the next order that dict is a
    container like any other, its sensitivity in the next map (``_route_result_tower``): the
    element's part of it is ``A``'s."""
    runtime_routers.route_back(route, i, A, Abox)
    sens, element = route.sens, route.order[i]

    def set_route_back_backprop(S2: Any, Abox2: BoxSensitivities) -> tuple[Any, ...]:
        entry = Abox2.get(sens, Z)
        part = entry.get(element, Z) if isinstance(entry, dict) else Z
        return (), None, None, part, None

    return ProcResult(None, set_route_back_backprop)


def _set_route_back_again(*args: Any) -> ProcResult:
    """``_set_route_back`` differentiated again (the third order): refused, naming sets."""
    raise NonDifferentiableError(
        "derivatives of the third order and beyond through loops over sets are not supported yet; "
        "keep such values in tuples inside functions differentiated more than twice"
    )


register_primitive(runtime_routers.route_back, _route_back_tower)
register_primitive(
    _set_route_back, _set_route_back_again, note="internal: refused at the third order"
)
register_primitive(runtime_routers.route_result, _route_result_tower)
