"""Rules for containers: subscripts, attributes, displays, unpacking, list/dict methods, boxes.

Sensitivities of lists, dicts, boxes and user objects live in the box-sensitivity map
``Abox`` (SPEC section 5): a read adds the result's sensitivity into the container's
entry, a write moves the written element's sensitivity out of the entry (leaving zero)
and restores the layout the container had before the write. Tuples are values: a
projection's sensitivity is a sparse ``OneHot`` so that reading every element of a
length-n tuple costs O(n) in all, not O(n^2).

Decisions (documented in docs/containers.md):
- the sensitivity of a user object is a dict of attribute sensitivities;
- a set's sensitivity is a dict from element to sensitivity (a loop over the set gives it);
  sensitivity reaching a set element any other way raises;
- NumPy arrays are values until they are changed in place (``primitives.numpy_inplace``).

The rules are in :mod:`primitives.container_reads` (``xs[i]``, ``d[k]``, ``obj.a``),
:mod:`primitives.container_writes` (assignments and ``del``),
:mod:`primitives.container_displays` (displays and unpacking) and
:mod:`primitives.container_methods` (constructors and methods of list, tuple, dict, boxes);
this module registers them, in one table, and provides to generated code the ones it calls
by name.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from dplus.markers import mark_derived
from dplus.rules import defnondiff
from dplus.runtime.boxes import Box, BoxSensitivities, box, set_box, unbox
from dplus.runtime.calls import provide_to_generated_code
from dplus.runtime.core import (
    keywords_at,
)
from dplus.runtime.hooks import hooks
from dplus.runtime.linear import (
    gen_zero,
    tuple_items,
)
from dplus.runtime.registry import register_primitive
from dplus.runtime.result import ProcResult

from .container_displays import (
    _sequence_sensitivity,
    _split_star,
    _star_parts,
    build_dict,
    build_list,
    build_list_star,
    build_set,
    build_set_star,
    build_tuple,
    build_tuple_star,
    frozenset_plus,
    match_args_plus,
    set_plus,
    unpack_plus,
    unpack_star_plus,
)
from .container_methods import (
    box_plus,
    dict_copy_plus,
    dict_get_plus,
    dict_ior_plus,
    dict_items_plus,
    dict_keys_plus,
    dict_or_plus,
    dict_plus,
    dict_pop_plus,
    dict_setdefault_plus,
    dict_update_plus,
    dict_values_plus,
    list_append_plus,
    list_clear_plus,
    list_copy_plus,
    list_count_plus,
    list_extend_plus,
    list_index_plus,
    list_insert_plus,
    list_plus,
    list_pop_plus,
    list_remove_plus,
    list_reverse_plus,
    list_sort_plus,
    set_box_plus,
    tuple_plus,
    unbox_plus,
    user_namespace_plus,
)
from .container_reads import (
    NOT_OWN,
    PLAIN_ATTRIBUTES,
    _accessor_run_by_read,
    _attribute_hook_run_by_read,
    _cached_property_read,
    _conform_items,
    _instance_has,
    _named_field_index,
    _overrides,
    _property_read,
    _python_method,
    _refuse_value_made_by_getattribute,
    getattr_plus,
    getitem_plus,
    read_global_plus,
)
from .container_writes import (
    _attribute_setter,
    _property_write,
    attributes_read_back,
    attributes_written_back,
    delattr_plus,
    delitem_plus,
    object_setattr_plus,
    own_attribute_back,
    own_attribute_write_back,
    own_number_attribute,
    setattr_plus,
    setitem_plus,
    store_own_attribute,
)

# (typed Any: the sensitivity of a ProcResult is a ProcResult of sensitivities, whose backprop
# slot holds gen_zero or the backprop's sensitivity, not a function)
Z: Any = gen_zero


register_primitive(
    list,
    list_plus,
    note="list(iterable): a new list; element sensitivities flow back to the iterable",
)
register_primitive(tuple, tuple_plus, note="tuple(iterable)")
register_primitive(dict, dict_plus, note="dict(mapping or pairs, **kwargs)")
register_primitive(
    list.append,
    list_append_plus,
    note="moves the appended element's sensitivity out of the list's entry",
)
register_primitive(list.extend, list_extend_plus)
register_primitive(list.insert, list_insert_plus)
register_primitive(
    list.pop, list_pop_plus, note="puts the popped element's sensitivity back at its index"
)
register_primitive(list.remove, list_remove_plus)
register_primitive(list.copy, list_copy_plus)
register_primitive(list.clear, list_clear_plus)
register_primitive(list.reverse, list_reverse_plus)
register_primitive(
    list.sort,
    list_sort_plus,
    note="gradients follow the permutation; key= is used for primals only",
)
register_primitive(list.index, list_index_plus, note="non-differentiable")
register_primitive(list.count, list_count_plus, note="non-differentiable")
defnondiff(_named_field_index)
defnondiff(_accessor_run_by_read)
defnondiff(_attribute_hook_run_by_read)
defnondiff(_refuse_value_made_by_getattribute)
defnondiff(_attribute_setter)
defnondiff(_python_method)
defnondiff(_overrides)
register_primitive(dict.get, dict_get_plus)
register_primitive(dict.setdefault, dict_setdefault_plus)
register_primitive(dict.update, dict_update_plus)
register_primitive(operator.or_, dict_or_plus, note="dict merge; non-differentiable otherwise")
register_primitive(
    operator.ior, dict_ior_plus, note="dict update in place; non-differentiable otherwise"
)
register_primitive(dict.pop, dict_pop_plus)
register_primitive(
    dict.items, dict_items_plus, note="a list of (key, value) pairs inside differentiated code"
)
register_primitive(dict.values, dict_values_plus, note="a list inside differentiated code")
register_primitive(
    dict.keys, dict_keys_plus, note="a list inside differentiated code; keys carry no sensitivity"
)
register_primitive(dict.copy, dict_copy_plus)
register_primitive(Box, box_plus, note="a new Box")
register_primitive(box, box_plus, note="a new Box")
register_primitive(unbox, unbox_plus)
register_primitive(set_box, set_box_plus)
register_primitive(operator.getitem, getitem_plus, note="xs[i], d[k], t[i], a[idx]")
register_primitive(operator.setitem, setitem_plus)
register_primitive(operator.delitem, delitem_plus)


def partial_plus(func: Any, /, *args: Any, **kwargs: Any) -> ProcResult:
    """``functools.partial(func, *args, **kwargs)``: its sensitivity is (A_func, A_args, A_keywords)."""
    p = functools.partial(func, *args, **kwargs)
    n = len(args)

    def partial_backprop(A: Any, Abox: BoxSensitivities) -> tuple:
        # (the keywords' sensitivities are picked by keywords_at, which has a rule of its own:
        # no dict operations when this is differentiated again)
        if A is Z or A is None:
            return ((), Z) + (Z,) * n + ((keywords_at((), 0, tuple(kwargs)),) if kwargs else ())
        a_func, a_args, a_kw = tuple_items(A, 3)
        items = tuple_items(a_args, n) if a_args is not Z else (Z,) * n
        out = ((), a_func) + tuple(items)
        if kwargs:
            out = out + (keywords_at((a_kw,), 0, tuple(kwargs)),)
        return out

    return ProcResult(p, partial_backprop)


register_primitive(
    functools.partial,
    partial_plus,
    note="a partial application; its sensitivity is (func, args, keywords)",
)
register_primitive(
    getattr,
    lambda obj, name, *default: (
        getattr_plus(obj, name)
        if not default or hasattr(obj, name)
        else ProcResult(default[0], lambda A, Abox: ((), Z, None, A))
    ),
)
register_primitive(setattr, setattr_plus)
register_primitive(object.__setattr__, object_setattr_plus)
register_primitive(
    set,
    set_plus,
    note="set(iterable): the elements of a list or tuple get the sensitivities a "
    "for loop over the set gives them (the first of equal elements)",
)
register_primitive(frozenset, frozenset_plus, note="as set(iterable)")
register_primitive(delattr, delattr_plus)


# The helpers the rules above call are differentiated from their source when a rule is
# itself differentiated (derivatives of derivatives).
for _helper in (
    _conform_items,
    _sequence_sensitivity,
    _star_parts,
    _split_star,
    _instance_has,
    _cached_property_read,
    _property_read,
    _property_write,
):
    mark_derived(_helper, "rule helper")

# Generated code calls these by name (see dplus.runtime.ops.helper_named).
provide_to_generated_code(
    build_dict,
    build_list,
    build_list_star,
    build_set,
    build_set_star,
    build_tuple,
    build_tuple_star,
    delattr_plus,
    delitem_plus,
    getattr_plus,
    getitem_plus,
    match_args_plus,
    own_attribute_back,
    own_attribute_write_back,
    own_number_attribute,
    read_global_plus,
    setattr_plus,
    setitem_plus,
    unpack_plus,
    unpack_star_plus,
    user_namespace_plus,
    store_own_attribute,
    attributes_read_back,
    attributes_written_back,
    NOT_OWN=NOT_OWN,
    PLAIN_ATTRIBUTES=PLAIN_ATTRIBUTES,
)
hooks.install(sequence_sensitivity=_sequence_sensitivity)
