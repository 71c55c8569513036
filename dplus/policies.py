"""Policies for callables that have no reverse transform (SPEC section 6)."""

from __future__ import annotations

import contextvars
import functools
import sys
import types
from collections.abc import Callable
from typing import Any, overload

from .errors import DplusError, UnknownTransformError, describe_callable
from .markers import mark, mark_derived
from .runtime.hooks import hooks
from .runtime.linear import gen_zero, is_zero_sensitivity
from .runtime.memory import results_take_entries
from .runtime.result import ProcResult

__all__ = [
    "current_unknown_transform",
    "error_non_zero_sensitivity_transform",
    "error_unknown_proc_transform",
    "error_unknown_transform",
    "transform_from_source",
]

# ``policy(op, op_name)``: the transform to use for ``op`` (a value that is not callable
# comes back as it is)
Policy = Callable[[Any, str], Any]

_FIX = (
    "Fix it by decorating the function with @dplus.define_dplus, registering a rule with "
    "dplus.register_backprop / dplus.register_primitive, or choosing another policy with "
    "`with dplus.current_unknown_transform(policy):`."
)
_CACHED_FIX = (
    "It is wrapped by functools.cache or functools.lru_cache outside the function being "
    "differentiated, and that cache outlives the call: dplus does not differentiate through "
    "it. Fix it by defining the cached function inside the function you differentiate (a "
    "nested @functools.cache def is differentiated at every order), or by calling the "
    "function under the cache, decorated with @dplus.define_dplus."
)


_CLASS_FIX = (
    "Calling this class is not a plain __init__ (its metaclass defines __call__, or its "
    "__new__ takes the arguments: a subclass of tuple, float or an exception, a cache of "
    "instances), which dplus does not differentiate. Fix it by constructing it outside the "
    "function being differentiated, by giving the values to a class with a plain __init__, "
    "or by registering a rule for the class with dplus.register_primitive."
)


def _fix_for(op: Any) -> str:
    if type(op) is functools._lru_cache_wrapper:
        return _CACHED_FIX
    return _CLASS_FIX if isinstance(op, type) and _built_specially(op) else _FIX


def _built_specially(cls: type) -> bool:
    from .transform.plus_functions import ALLOCATING_NEW

    return type(cls).__call__ is not type.__call__ or cls.__new__ not in ALLOCATING_NEW


def _where(op: Any, op_name: str) -> str:
    name = describe_callable(op)
    return f"{name}, called at {op_name}" if op_name and op_name != name else name


def error_non_zero_sensitivity_transform(op: Any, op_name: str) -> Any:
    """Default: run unknown callables as usual; raise only if their result receives sensitivity."""
    if not callable(op):
        return op

    compiled_module_function = _is_compiled_module_function(op)

    def unknown_plus(*args: Any, **kwargs: Any) -> ProcResult:
        from .runtime.core import as_plain_callable
        from .runtime.fold import (
            ArrayContents,
            changed_since,
            has_own_entry,
            mutable_sensitivity_of,
            watch_call,
        )
        from .runtime.memory import reverse_unseen_writes, unseen_writes
        from .runtime.result import plain_result

        given = args
        args = tuple(as_plain_callable(a) for a in args)
        kwargs = {k: as_plain_callable(v) for k, v in kwargs.items()}
        held = (op,) if _callable_instance(op) else ()  # (an object called: its attributes too)
        _refuse_held_functions(op, op_name, (*held, *args, *kwargs.values()))
        _stand_for_given(op, args, kwargs)
        watched = watch_call(op, args, kwargs)  # (not differentiable: constants at higher orders)
        result = _run_watched(op, op_name, args, kwargs, watched)
        # a function it was handed, handed back (a decorator that registers or returns its
        # argument): the function itself, as in Python, with its sensitivity
        # (dplus's own functions run by this policy at higher orders hand back functions
        # made one order down, which are not the argument's value there)
        handed_back = _handed_back(op, result, args)
        if handed_back is not None:
            result = given[handed_back]
            _carry_attributes(args[handed_back], result)
        changed = changed_since(watched)
        _refuse_reshaped_arrays(op, op_name, changed, watched)
        array_changes = unseen_writes(
            [
                (v, c)
                for v, c in watched
                if type(c) is ArrayContents and any(v is x for x in changed)
            ]
        )
        changed = [v for v in changed if not _is_array(v)]
        integer_valued = _is_integer_valued(result) or (
            compiled_module_function and _only_labels((*args, *kwargs.values()))
        )
        # a view of what it was given (or that very array): the sensitivity its memory holds in
        # the map belongs to that memory, not to this result
        shows_argument = _is_array(result) and _shows_memory_of(result, watched)
        # the very list, dict, object or class it was given (a method: its object): what the
        # map holds for it belongs to that argument, whose maker takes it (the call made
        # nothing; what it changed in it is checked below)
        returns_argument = has_own_entry(result) and any(
            result is a for a in (*args, *kwargs.values(), getattr(op, "__self__", None))
        )

        def unknown_backprop(A: Any, Abox: Any) -> tuple[Any, ...]:
            if handed_back is not None:
                # (the whole sensitivity to the argument it came from, zero to the others)
                to_args = [A if i == handed_back else gen_zero for i in range(len(args))]
                if kwargs:
                    return ((), *to_args, {k: gen_zero for k in kwargs})
                return ((), *to_args)
            held = (
                gen_zero
                if shows_argument or returns_argument
                else mutable_sensitivity_of(result, Abox)
            )
            if integer_valued and is_zero_sensitivity(held):
                # piecewise constant: zero derivative, as int() and round() have (or a function
                # of integers and strings only)
                A = gen_zero
            if not is_zero_sensitivity(A) or not is_zero_sensitivity(held):
                _refuse_internal_again(op)
                raise UnknownTransformError(
                    f"no derivative is known for {_where(op, op_name)}, and its result received a "
                    f"non-zero sensitivity. {_fix_for(op)}"
                )
            for v in changed:
                # what it changed is read later: the change is part of the result, unseen
                if not is_zero_sensitivity(mutable_sensitivity_of(v, Abox)):
                    _refuse_internal_again(op)
                    raise UnknownTransformError(
                        f"no derivative is known for {_where(op, op_name)}, and it changed "
                        f"{_what_changed(v)} it was given whose contents the result depends on. {_FIX}"
                    )
            if array_changes:
                # the arrays it changed get back their old values, which the operations before
                # the call read; what it wrote must not matter
                culprit = reverse_unseen_writes(Abox, array_changes)
                if culprit is not None:
                    _refuse_internal_again(op)
                    raise UnknownTransformError(
                        f"no derivative is known for {_where(op, op_name)}, and it changed in place a "
                        f"NumPy array (shape {culprit.shape}, dtype {culprit.dtype}) it was given, whose "
                        f"new values the result depends on. {_FIX}"
                    )
            out = ((),) + (gen_zero,) * len(args)
            return out + ({k: gen_zero for k in kwargs},) if kwargs else out

        if array_changes:
            mark(unknown_backprop, "dp_changed_arrays", True)
        if shows_argument:
            # (its backprop cannot hand that memory's sensitivity back: none is taken for it)
            return plain_result(result, unknown_backprop)
        return ProcResult(result, unknown_backprop)

    unknown_plus.__qualname__ = f"unknown_plus[{getattr(op, '__qualname__', op)!s}]"
    # with constant arguments, a constant (runtime.calls.call_on_constants)
    mark(unknown_plus, "dp_unknown", True)
    return unknown_plus


def _run_watched(
    op: Any, op_name: str, args: tuple[Any, ...], kwargs: dict[str, Any], watched: Any
) -> Any:
    """``op(*args, **kwargs)``; refused if it changed what it was given, then raised: no
    backprop checks the change (it is made when the call returns), so a ``try`` catching the
    exception would read the changed contents with no sensitivity, silently."""
    from .runtime.fold import changed_since

    try:
        return op(*args, **kwargs)
    except DplusError:
        raise
    except Exception as exc:
        changed = changed_since(watched)
        if changed:
            _refuse_changed_then_raised(op, op_name, exc, changed)
        raise


# (the policy's own code is differentiated from its source at the next order: this helper too)
mark_derived(_run_watched, "rule helper")


def _refuse_changed_then_raised(op: Any, op_name: str, exc: Exception, changed: list[Any]) -> None:
    what = "a NumPy array" if _is_array(changed[0]) else _what_changed(changed[0])
    raise UnknownTransformError(
        f"no derivative is known for {_where(op, op_name)}, and it changed {what} it was given, "
        f"then raised {type(exc).__name__}. {_FIX}"
    ) from exc


def _refuse_held_functions(op: Any, op_name: str, values: tuple[Any, ...]) -> None:
    """A function defined in differentiated code, held in a list, tuple, dict or object given
    to code dplus runs as it is: called from there it would return dplus's pair of value and
    backprop, not its value (found by ``ExRK(inits, [f1, f2], ...)``). Refused by name first."""
    from .runtime.closures import is_plus_function
    from .runtime.linear import object_attributes

    if _is_dplus_function(getattr(op, "__func__", op)):
        return  # (dplus's own code run at a higher order: it holds the functions it routes)
    seen: set[int] = set()
    stack = [(v, False) for v in values]  # (top-level functions are handed over as primals)
    while stack:
        v, inside = stack.pop()
        t = type(v)
        if t is float or t is int or t is bool or t is str or v is None or id(v) in seen:
            continue
        if inside and callable(v) and is_plus_function(v):
            raise UnknownTransformError(
                f"{_where(op, op_name)} was given {describe_callable(v)} inside a list, tuple, dict or "
                f"object: dplus runs that code as it is (it is not differentiated), and a function defined "
                f"in the code being differentiated cannot be called from there. Decorate "
                f"{getattr(op, '__qualname__', 'the function called')} with @dplus.define_dplus so that "
                "dplus differentiates it, or differentiate every function "
                "from its source with `with dplus.current_unknown_transform(dplus.transform_from_source):`."
            )
        seen.add(id(v))
        if t is list or t is tuple:
            if not _NUMBER_TYPES.issuperset(map(type, v)):
                stack.extend((x, True) for x in v)
        elif t is dict:
            stack.extend((x, True) for x in v.values())
        elif (
            hasattr(v, "__dict__")
            and not isinstance(v, (type, types.ModuleType))
            and (not callable(v) or _callable_instance(v))
        ):
            # (a module is no container of the user's: array-API code hands its namespace
            # around, and walking one reaches every module, dplus's own included)
            try:
                stack.extend((x, True) for x in object_attributes(v).values())
            except Exception:  # (attributes that cannot be read: nothing to look into)
                pass


_NUMBER_TYPES = frozenset({float, int, bool})


def _inherited_call(t: type) -> Any:
    """``t.__call__`` as the class defines or inherits it (None for no Python class's)."""
    for klass in t.__mro__:
        if "__call__" in klass.__dict__:
            return klass.__dict__["__call__"]
    return None


def _callable_instance(v: Any) -> bool:
    """An instance of the program's class with a Python ``__call__`` (not a function, nor one of
    dplus's objects): its attributes are the program's, as any object's."""
    t = type(v)
    return (
        isinstance(_inherited_call(t), types.FunctionType)
        and not getattr(t, "__dplus_plus_object__", False)
        and not _is_dplus_function(t)
    )


def _stand_for_given(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Mark the plain callables the user's unknown ``op`` is given as standing for their
    plus-functions: a decorator or registry that keeps one hands it back to the user's code,
    whose later call of it is a call of that function (``runtime.registry.lookup_transform``).
    (Not for dplus's own functions run by this policy at higher orders: the plain callable made
    there stands for a function one order down, differentiated from its source.)"""
    if _is_dplus_function(op):
        return
    from .runtime.closures import closure_values

    for a in (*args, *kwargs.values()):
        if type(a) is types.FunctionType and "__dplus_primal_of__" in a.__dict__:
            plus = a.__dict__["__dplus_primal_of__"]
            if all(c is None for c in closure_values(plus)):
                mark(a, "__dplus_stands_for__", plus)
            else:
                # (the sensitivities of what it captures travel with the function value, which
                # a later call through what the unknown code kept does not hand back)
                mark(a, "__dplus_kept_by__", op)


def _carry_attributes(given: Any, function: Any) -> None:
    """What the unknown code set on the plain callable it hands back (``fn.calls = 0``), set
    on the function it stands for, which the user's code gets back."""
    for name, value in given.__dict__.items():
        if not name.startswith("__dplus_"):
            setattr(function, name, value)


def _is_dplus_function(op: Any) -> bool:
    return str(getattr(op, "__module__", "") or "").startswith("dplus.")


def _handed_back(op: Any, result: Any, args: tuple[Any, ...]) -> int | None:
    """Where ``result`` was given, when it is a function dplus handed to the unknown code as a
    plain callable (``runtime.core.as_plain_callable``): its position, else ``None``."""
    if (
        type(result) is not types.FunctionType
        or "__dplus_primal_of__" not in result.__dict__
        or _is_dplus_function(op)
    ):
        return None
    for i, a in enumerate(args):
        if a is result:
            return i
    # (not by keyword: at the second order the sensitivity's way back through the keywords'
    # dict was wrong; such a function is refused when called, by runtime.core.lift)
    return None


def _what_changed(v: Any) -> str:
    return f"the class {v.__qualname__!r}" if isinstance(v, type) else f"a {type(v).__name__}"


# dplus's own code (rule code keeping sensitivities of elements) met at a higher order, by
# function: what the user's code did, named in the refusal instead of dplus's internals
INTERNAL_AGAIN: dict[Any, str] = {}
_INTERNAL_FIX = "; keep such values in tuples or in separate variables inside functions differentiated more than once"


def _refuse_internal_again(op: Any) -> None:
    """An internal of dplus's run by the default policy (at the next order of a derivative)
    got sensitivity: refuse naming the user's construct, never telling the user to decorate
    dplus's code."""
    from .errors import NonDifferentiableError

    fn = getattr(op, "__func__", op)
    what = INTERNAL_AGAIN.get(fn)
    if what is None and not str(getattr(fn, "__module__", "") or "").startswith("dplus."):
        return
    if what is not None:
        raise NonDifferentiableError(
            f"derivatives of derivatives through {what} are not supported yet{_INTERNAL_FIX}"
        )
    handed = getattr(fn, "__dict__", {}).get("__dplus_primal_of__")
    if handed is not None:  # (runtime.core.as_plain_callable)
        raise NonDifferentiableError(
            f"dplus cannot differentiate a call of {describe_callable(handed)}: it was handed to "
            "code dplus does not differentiate, which kept it (as a method, an attribute, in a "
            "container) for a later call. Make the function that keeps it differentiable "
            "(@dplus.define_dplus, or pass it a number so that dplus transforms it), or call "
            "the function where it is made"
        )
    raise NonDifferentiableError(
        f"dplus reached its own {describe_callable(op)}, which has no derivative, while differentiating your "
        "code (most likely at a second or higher order, which does not support this construct yet); "
        "this is a gap in dplus, not in your code: please report it with the function you differentiated"
    )


def _is_integer_valued(v: Any) -> bool:
    """An int, a bool, a NumPy integer or an integer or bool array: a value whose
    derivative in real inputs is zero wherever it exists."""
    if type(v) is int or type(v) is bool:
        return True
    np = sys.modules.get("numpy")
    if np is None:
        return False
    dtype = v.dtype if isinstance(v, (np.ndarray, np.generic)) else None
    return dtype is not None and (np.issubdtype(dtype, np.integer) or dtype == np.bool_)


_LABELS = (int, bool, str, bytes, type(None))


def _is_compiled_module_function(op: Any) -> bool:
    """A compiled (C, Cython) function of a module, such as SciPy's ``_specfun.jyzo``: given
    only integers, strings and ``None`` (``_only_labels``), it holds nothing of this run and
    reads nothing differentiable, so its result is a constant, as with literal arguments.
    Python code is not one: it may read globals the run wrote."""
    if isinstance(op, (types.FunctionType, types.MethodType, type)):
        return False
    owner = getattr(op, "__self__", None)
    if owner is not None and type(owner) is not types.ModuleType:
        return False  # (a method of an object, which may hold what this run computed)
    module = sys.modules.get(getattr(op, "__module__", None) or "")
    return module is not None and getattr(module, getattr(op, "__name__", ""), None) is op


def _only_labels(values: tuple[Any, ...]) -> bool:
    stack = list(values)
    while stack:
        v = stack.pop()
        if type(v) is tuple:
            stack.extend(v)
        elif type(v) not in _LABELS:
            return False
    return True


def _is_array(v: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.ndarray)


def _shows_memory_of(result: Any, watched: list[tuple[Any, Any]]) -> bool:
    """Whether the array ``result`` shows the memory of an array the call was given."""
    from .runtime.memory import memory_owner

    owner = memory_owner(result)
    return any(v is owner for v, _ in watched)


def _refuse_reshaped_arrays(
    op: Any, op_name: str, changed: list[Any], watched: list[tuple[Any, Any]]
) -> None:
    """An array whose shape code dplus does not see changed (``a.resize``): the memory that
    other names show is gone, which no reverse pass can follow."""
    from .runtime.fold import ArrayContents

    for v, contents in watched:
        if type(contents) is ArrayContents and contents.shape != v.shape:
            raise UnknownTransformError(
                f"no derivative is known for {_where(op, op_name)}, and it changed the shape of a NumPy "
                f"array it was given in place (from {contents.shape} to {v.shape}), which dplus cannot "
                f"follow. Make the function return a new array instead, or decorate it with "
                f"@dplus.define_dplus so that dplus differentiates it, or register a rule for it."
            )


def error_unknown_proc_transform(op: Any, op_name: str) -> Any:
    """Raise for any callable with no transform; return non-callables unchanged."""
    if not callable(op):
        return op
    raise UnknownTransformError(
        f"no reverse transform is registered for {_where(op, op_name)}. {_FIX}"
    )


def error_unknown_transform(op: Any, op_name: str) -> Any:
    """Raise for everything with no transform: for finding out what is not registered."""
    raise UnknownTransformError(
        f"no reverse transform is registered for {_where(op, op_name)}. {_FIX}"
    )


def transform_from_source(op: Any, op_name: str) -> Any:
    """Differentiate any pure-Python function or method from its source, as if it had been
    decorated with ``@define_dplus`` (it is registered so, and stays registered); builtins,
    C code and functions whose source dplus cannot transform fall back to the default."""
    import types

    from .errors import DplusError
    from .runtime.registry import lookup_transform

    fn = op.__func__ if type(op) is types.MethodType else op
    called_object = type(fn) is not types.FunctionType and not isinstance(fn, type)
    if called_object:  # an object called as a function: its class's Python __call__
        fn = getattr(type(fn), "__call__", None)  # noqa: B004  (the class's function)
    if (
        type(fn) is not types.FunctionType
        or fn.__module__ is None
        or fn.__module__.startswith("dplus")
    ):
        return error_non_zero_sensitivity_transform(op, op_name)
    from .transform.plus_functions import plus_function_for

    try:
        plus_function_for(fn)  # transform now: a function dplus cannot read takes the default
    except DplusError:
        return error_non_zero_sensitivity_transform(op, op_name)
    hooks.define_dplus(fn)
    if called_object:
        return hooks.plus_function_for(op)  # (as runtime.core.lift does for a registered __call__)
    transform = lookup_transform(op)
    return transform if transform is not None else error_non_zero_sensitivity_transform(op, op_name)


_program_policy: list[Policy] = [error_non_zero_sensitivity_transform]
_current: contextvars.ContextVar[Policy | None] = contextvars.ContextVar(
    "dplus_unknown_transform", default=None
)


class _PolicyScope:
    __slots__ = ("policy", "_tokens")

    def __init__(self, policy: Policy) -> None:
        if not callable(policy):
            raise TypeError(f"a policy is a function (op, op_name) -> transform, not {policy!r}")
        self.policy = policy
        self._tokens: list[contextvars.Token[Policy | None]] = []

    def __enter__(self) -> Policy:
        self._tokens.append(_current.set(self.policy))
        return self.policy

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())


class _CurrentUnknownTransform:
    """``current_unknown_transform()`` gives the policy; ``with current_unknown_transform(p):`` sets it."""

    @overload
    def __call__(self) -> Policy: ...

    @overload
    def __call__(self, policy: Policy) -> _PolicyScope: ...

    def __call__(self, policy: Policy | None = None) -> Policy | _PolicyScope:
        if policy is None:
            return _current.get() or _program_policy[0]
        return _PolicyScope(policy)

    def get(self) -> Policy:
        return _current.get() or _program_policy[0]

    def set_for_program(self, policy: Policy) -> None:
        """Make ``policy`` the one every thread and task uses outside a ``with`` block."""
        if not callable(policy):
            raise TypeError(f"a policy is a function (op, op_name) -> transform, not {policy!r}")
        _program_policy[0] = policy

    def __repr__(self) -> str:
        return f"<current_unknown_transform: {getattr(self.get(), '__name__', self.get())}>"


current_unknown_transform = _CurrentUnknownTransform()

hooks.install(unknown_transform_policy=current_unknown_transform.get)

# (its unknown functions' results take the sensitivity of their memory when it is changed in
# place later: runtime.memory)
results_take_entries(filename=__file__)
