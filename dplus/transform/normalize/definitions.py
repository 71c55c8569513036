"""Definitions inside a differentiated function rewritten into ordinary code before the
scopes are analysed: a ``class`` statement becomes the statements that build the class
(:mod:`.class_statements`), a generator function a function that builds a resumable machine
(:mod:`.generator_machine`). What neither can take is refused here, naming it."""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
import types
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

from ...errors import UnsupportedSyntaxError
from ..trees import walk
from .class_statements import ClassStatement, ClassSyntaxError, mark_functions_set_as_attributes
from .core import _internal
from .generator_effects import changed_in_place, first_effect
from .generator_expressions import (
    GeneratorExpressionLifter,
    OnceReadGeneratorExpressions,
    consumers_in,
    names_bound_anywhere,
)
from .generator_machine import GeneratorMachine, GeneratorSyntaxError, is_generator_function
from .rewrites import refuse_generator_expressions_read_again

__all__ = ["rewrite_definitions"]


class _Names:
    """Fresh names no user code uses (the tree's own names are taken)."""

    def __init__(self, node: ast.AST) -> None:
        self.taken = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        self.taken |= {n.arg for n in ast.walk(node) if isinstance(n, ast.arg)}
        self.counter = itertools.count(1)

    def fresh(self, hint: str) -> str:
        while True:
            name = f"_dp{hint}{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def _refusal(e: GeneratorSyntaxError | ClassSyntaxError, filename: str) -> UnsupportedSyntaxError:
    line = getattr(e.node, "lineno", None)
    msg = f"{e.what} cannot be differentiated by dplus ({filename}, line {line if line else '?'})"
    if e.fix:
        msg += f": {e.fix}"
    err = UnsupportedSyntaxError(msg)
    err.filename = filename
    err.lineno = line
    return err


def rewrite_definitions(
    node: ast.FunctionDef | ast.Lambda,
    qualname: str,
    module: str,
    string_annotations: bool,
    filename: str,
    again: bool = False,
    globals_: dict | None = None,
) -> ast.FunctionDef | ast.Lambda:
    """``node`` (a copy the caller owns) with its class statements and generator functions,
    at any depth, rewritten; unchanged when it has neither. ``again``: the function is
    differentiated again (a higher derivative): a class statement is rewritten there when
    that order takes it (``_refuse_classes_not_supported_again`` names what it does not), a
    generator function left to the normaliser, which runs it to completion into a list
    (``rewrites._YieldsToList``: no ``send``, no return value, not lazy). At the first order a
    generator expression whose laziness the program can see becomes a generator function too
    (:mod:`.generator_expressions`; ``globals_`` tells which builtins are rebound)."""
    kinds = Counter(type(n) for n in walk(node))  # one walk answers what is inside
    if kinds[ast.FunctionDef] + kinds[ast.Lambda] > 1:  # (the function itself is one)
        mark_functions_set_as_attributes(node)
    has_yield = bool(kinds[ast.Yield] or kinds[ast.YieldFrom])
    if again:
        # (a generator is run to completion there, by the normaliser, into an iterator over
        # its values (read once, as Python's); the iterator of zip, map, ... into a list: one
        # kept and read twice is refused)
        functions = [n for n in walk(node) if isinstance(n, ast.FunctionDef)]
        generators = [fn for fn in functions if is_generator_function(fn)] if has_yield else []
        if generators:
            nested: dict[str, list[ast.FunctionDef]] = {}
            for fn in functions:
                nested.setdefault(fn.name, []).append(fn)
            bound = names_bound_anywhere(node)
        for gen in generators:
            if _endless(gen):
                raise _refused_endless(gen, qualname, filename)
            effect = first_effect(gen, nested, globals_ or {}, module, bound)
            if effect is not None:
                raise _refused_effect(gen, effect, qualname, filename)
        lazy_builtins = _lazy_builtins_not_rebound(node, globals_ or {})
        for fn in functions:
            if generators or kinds[ast.GeneratorExp]:
                _refuse_generators_reading_rebound_variables(fn, qualname, filename)
            refuse_generator_expressions_read_again(
                fn.body, fn.name, filename, frozenset(), lazy_builtins
            )
        if kinds[ast.GeneratorExp] and not module.startswith("dplus."):
            _read_once_where_passed(node, functions, module, globals_ or {}, filename)
        if not kinds[ast.ClassDef]:
            return node
        _refuse_classes_not_supported_again(node, qualname, filename)
        try:
            return _Definitions(_Names(node), module, string_annotations, False).function(
                node, qualname
            )
        except (GeneratorSyntaxError, ClassSyntaxError) as e:
            raise _refusal(e, filename) from None
    if not (kinds[ast.ClassDef] or has_yield or kinds[ast.GeneratorExp]):
        return node
    names = _Names(node)
    # (dplus's own rule code, differentiated at a higher order, keeps its lists: as loops.py)
    lift = kinds[ast.GeneratorExp] and not module.startswith("dplus.")
    consumes_whole = consumers_in(node, globals_ or {}) if lift else None
    try:
        return _Definitions(names, module, string_annotations, lazy_from=consumes_whole).function(
            node, qualname
        )
    except (GeneratorSyntaxError, ClassSyntaxError) as e:
        raise _refusal(e, filename) from None


def _read_once_where_passed(
    node: ast.AST,
    functions: list[ast.FunctionDef],
    module: str,
    globals_: dict,
    filename: str,
) -> None:
    """Differentiated again: a generator expression given to a function of the program or to
    ``next`` becomes an iterator over its values (:class:`.OnceReadGeneratorExpressions`),
    unless ``iter`` is not the builtin. One not consumed whole where it is made (by ``sum``,
    ...) whose elements would do what the program sees (:func:`.first_effect`) is refused:
    they would be made before the code that reads them runs."""
    bound = names_bound_anywhere(node)

    def is_builtin(name: str) -> bool:
        return name not in bound and globals_.get(name, getattr(builtins, name, None)) is getattr(
            builtins, name, None
        )

    if not is_builtin("iter"):
        return
    nested: dict[str, list[ast.FunctionDef]] = {}
    for fn in functions:
        nested.setdefault(fn.name, []).append(fn)

    def is_programs_function(name: str) -> bool:
        if name in bound:
            return not is_builtin(name)
        value = globals_.get(name)
        return isinstance(value, types.FunctionType) and value.__module__ == module

    consumes_whole = consumers_in(node, globals_)
    whole = {id(n.args[0]) for n in walk(node) if isinstance(n, ast.Call) and consumes_whole(n)}
    read_later = [n for n in walk(node) if isinstance(n, ast.GeneratorExp) and id(n) not in whole]

    def is_module(name: str) -> bool:
        return name not in bound and isinstance(globals_.get(name), types.ModuleType)

    rewrite = OnceReadGeneratorExpressions(is_programs_function, is_module, is_builtin("next"))
    rewrite.visit(node)
    for e in read_later:
        effect = first_effect(_as_generator_function(e), nested, globals_, module, bound)
        if effect is not None:
            where, what = effect
            line = getattr(where, "lineno", None) or e.lineno
            err = UnsupportedSyntaxError(
                f"the generator expression ({filename}, line {line}) {what}: at a higher order "
                "of differentiation (hessian, grad of grad) dplus makes its values at once where "
                "it is made, where Python's makes each as it is read (and none that is never "
                "read). Make the change outside the generator expression, or make it a list"
            )
            err.filename = filename
            err.lineno = line
            raise err


def _as_generator_function(e: ast.GeneratorExp) -> ast.FunctionDef:
    """The generator function Python's definition of ``e`` names, for :func:`first_effect`
    (its first iterable, evaluated where ``e`` is, left out)."""
    body: list[ast.stmt] = [ast.Expr(value=ast.Yield(value=e.elt))]
    for i, gen in reversed(list(enumerate(e.generators))):
        for cond in reversed(gen.ifs):
            body = [ast.If(test=cond, body=body, orelse=[])]
        iterable = ast.Constant(value=()) if i == 0 else gen.iter
        body = [ast.For(target=gen.target, iter=iterable, body=body, orelse=[])]
    fn = function_def_named("_genexpr", body)
    return ast.fix_missing_locations(ast.copy_location(fn, e))


def function_def_named(name: str, body: list[ast.stmt]) -> ast.FunctionDef:
    return ast.FunctionDef(
        name=name,
        args=ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=body,
        decorator_list=[],
        returns=None,
        type_params=[],
    )


_LAZY_BUILTINS = ("zip", "enumerate", "reversed", "map", "filter")


def _lazy_builtins_not_rebound(node: ast.AST, globals_: dict) -> frozenset[str]:
    """The names of :data:`_LAZY_BUILTINS` that neither ``node`` nor its module rebinds."""
    bound = names_bound_anywhere(node)
    return frozenset(
        name
        for name in _LAZY_BUILTINS
        if name not in bound
        and globals_.get(name, getattr(builtins, name)) is getattr(builtins, name)
    )


def _refuse_classes_not_supported_again(
    node: ast.FunctionDef | ast.Lambda, qualname: str, filename: str
) -> None:
    """Refuse, naming it, a class statement that a higher order of differentiation does not
    take yet. Taken: methods (reading the function's variables too: their captures are kept
    in cells at every order, ``scopes.is_method_name``), operator methods, class attributes,
    and the decorators ``higher.class_rules`` builds again around a method's stand-ins
    (staticmethod, classmethod, property, cached_property). Not yet: a decorator on the class
    or another on a method, class keywords, a base class that is an expression, a function
    or class made in the class body outside a method, a method setting an attribute of
    something other than its instance, and an attribute the function sets on the class (the
    next order does not follow these through ``build_class_plus``'s namespace)."""
    classes = [n for n in ast.walk(node) if isinstance(n, ast.ClassDef)]
    class_names = {c.name for c in classes}
    for c in classes:
        why = _not_supported_again(c)
        if why is not None:
            raise _refused_again(c, qualname, filename, why)
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)) and any(
            isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id in class_names
            for t in (n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target])
        ):
            first = next(c for c in classes if c.name in class_names)
            raise _refused_again(first, qualname, filename, "the function sets an attribute of it")


def _not_supported_again(c: ast.ClassDef) -> str | None:
    if c.decorator_list or c.keywords:
        return "it has a decorator or class keywords"
    if not all(isinstance(b, ast.Name) for b in c.bases):
        return "a base class is an expression"
    for st in c.body:
        if isinstance(st, ast.Pass) or (
            isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
        ):
            continue
        if not isinstance(st, ast.FunctionDef):
            inner = next(
                (
                    n
                    for n in ast.walk(st)
                    if isinstance(
                        n, (ast.Lambda, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)
                    )
                ),
                None,
            )
            if inner is not None:
                return "its body makes a function or a class outside a method definition"
            continue
        for d in st.decorator_list:
            if not _taken_again(d):
                return (
                    f"the method {st.name!r} has a decorator other than staticmethod, classmethod, "
                    "property or functools.cached_property"
                )
        for n in ast.walk(st):
            if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
                if not (isinstance(n.value, ast.Name) and n.value.id == _first_arg(st)):
                    return f"the method {st.name!r} sets an attribute of something other than its instance"
    return None


_DECORATORS_TAKEN_AGAIN = ("staticmethod", "classmethod", "property", "cached_property")


def _taken_again(decorator: ast.expr) -> bool:
    """A method decorator a higher order takes: ``staticmethod``, ``classmethod``,
    ``property``, ``functools.cached_property`` (by these names: the class's rule at that
    order, ``higher.class_rules``, builds them again around the method's stand-ins)."""
    if isinstance(decorator, ast.Name):
        return decorator.id in _DECORATORS_TAKEN_AGAIN
    return (
        isinstance(decorator, ast.Attribute)
        and isinstance(decorator.value, ast.Name)
        and decorator.value.id == "functools"
        and decorator.attr == "cached_property"
    )


def _first_arg(fn: ast.FunctionDef) -> str | None:
    ps = fn.args.posonlyargs + fn.args.args
    return ps[0].arg if ps else None


def _refused_again(
    first: ast.ClassDef, qualname: str, filename: str, why: str
) -> UnsupportedSyntaxError:
    """A class statement met at a higher order of differentiation that the next order does
    not take yet (:func:`_refuse_classes_not_supported_again`)."""
    line = getattr(first, "lineno", None)
    err = UnsupportedSyntaxError(
        f"the class statement {first.name!r} in {qualname!r} ({filename}, line {line if line else '?'}) "
        f"is differentiated at first order only ({why}): dplus cannot yet differentiate it again "
        "(hessian, grad of grad, jvp of grad). For higher derivatives, define the class at module "
        "level; at a higher order a class inside takes methods, class attributes and the "
        "decorators staticmethod, classmethod, property and functools.cached_property, and no "
        "attribute the function sets on the class from outside"
    )
    err.filename = filename
    err.lineno = line
    return err


def _endless(gen: ast.AST) -> bool:
    """Whether a generator has a ``while True:`` loop (it may never end: run to completion
    into a list at a higher order, it would not return)."""
    return any(
        isinstance(n, ast.While) and isinstance(n.test, ast.Constant) and bool(n.test.value)
        for n in ast.walk(gen)
    )


def _refuse_generators_reading_rebound_variables(
    fn: ast.FunctionDef, qualname: str, filename: str
) -> None:
    """At a higher order a generator runs to completion where it is made (``_YieldsToList``;
    a generator expression into a list), so it reads the variables of ``fn`` as they are
    then; Python's reads them as it runs. A generator function of ``fn`` reading a variable
    that ``fn`` may bind again after the generator function is defined (a binding on a later
    line, one in a loop around the definition, a ``nonlocal`` of another function) could see
    another value: refused, naming it. Bindings all before the definition (outside such
    loops) are the values it reads. The same for a generator expression kept in a variable
    (``g = (v * a for v in xs)``), from the line that makes it; and for a list, dict or
    object the generator reads (or is given) that ``fn`` changes in place (``xs.append``,
    ``xs[i] = v``) after a line that makes the generator."""
    found = _Bindings()
    found.stores(ast.Module(body=fn.body, type_ignores=[]), ())
    for outer, defined_at in found.definitions:
        for gen in [n for n in walk(outer) if isinstance(n, ast.FunctionDef)]:
            if is_generator_function(gen):
                _refuse_reads_changed_after(
                    gen, fn, defined_at, found.may_change_after, qualname, filename
                )
                if gen is outer:
                    _refuse_changed_in_place_after_making(gen, fn, found, qualname, filename)
    for kept, target, made_at in found.kept_generator_expressions:
        # (made in a loop and read in the same iteration, after it is made: a binding of the
        # loop's on an earlier line is not after it; read on an earlier line, it is)
        read_before = any(
            isinstance(n, ast.Name)
            and n.id == target
            and isinstance(n.ctx, ast.Load)
            and n.lineno < made_at
            for n in walk(fn)
        )

        later = functools.partial(_bound_later, found, read_before)
        _refuse_reads_changed_after(kept, fn, made_at, later, qualname, filename)
        _refuse_reads_changed_in_place(kept, fn, made_at, found, set(), qualname, filename)


# builtins that read a generator given them to the end (or drop it) before they return
_READ_AT_ONCE = frozenset(
    {"sum", "list", "tuple", "sorted", "min", "max", "set", "frozenset", "dict", "any", "all"}
)


class _Bindings:
    """Where a function binds each of its variables (outside nested functions), and changes
    the object one holds in place."""

    def __init__(self) -> None:
        self.bindings: dict[str, list[tuple[int, tuple]]] = {}  # name -> (line, loop spans)
        self.changes: dict[str, list[tuple[int, tuple]]] = {}  # in place: xs.append, xs[i] =
        self.always: set[str] = set()  # (nonlocal in a nested function: bound whenever it runs)
        self.definitions: list[tuple[ast.AST, int]] = []  # (a function defined, its line)
        self.calls: dict[str, list[tuple[ast.Call, tuple]]] = {}  # name -> calls, loop spans
        self.kept_generator_expressions: list[tuple[ast.GeneratorExp, str, int]] = []
        self.read_at_once: set[int] = set()  # (the first arguments of sum(...), list(...), ...)

    def bind(self, name: str, line: int, loops: tuple) -> None:
        self.bindings.setdefault(name, []).append((line, loops))

    def stores(self, node: ast.AST, loops: tuple) -> None:
        for child in ast.iter_child_nodes(node):
            line = getattr(child, "lineno", 0)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                if not isinstance(child, ast.Lambda):
                    self.bind(child.name, line, loops)
                    self.definitions.append((child, line))
                for n in ast.walk(child):
                    if isinstance(n, ast.Nonlocal):
                        self.always.update(n.names)
                continue
            inner = loops
            if isinstance(child, (ast.For, ast.While)):
                inner = loops + ((line, getattr(child, "end_lineno", None) or line),)
            if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
                self.bind(child.id, line, loops)
            if isinstance(child, ast.For):
                for n in ast.walk(child.target):
                    if isinstance(n, ast.Name):
                        self.bind(n.id, line, inner)
            changed = changed_in_place(child)
            if changed is not None:
                self.changes.setdefault(changed[0], []).append((changed[1], loops))
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name):
                self.calls.setdefault(child.func.id, []).append((child, loops))
                if child.func.id in _READ_AT_ONCE and child.args:
                    self.read_at_once.add(id(child.args[0]))
            if (
                isinstance(child, ast.Assign)
                and len(child.targets) == 1
                and isinstance(child.targets[0], ast.Name)
                and isinstance(child.value, ast.GeneratorExp)
            ):
                self.kept_generator_expressions.append((child.value, child.targets[0].id, line))
            self.stores(child, inner)

    def may_change_after(self, name: str, defined_at: int) -> bool:
        """Whether ``name`` may be bound after the line ``defined_at`` has run."""
        if name in self.always:
            return True
        return _after(self.bindings.get(name, ()), defined_at)

    def changed_in_place_after(self, name: str, line: int) -> int | None:
        """The line of a change in place of what ``name`` holds that may run after ``line``."""
        for at, loops in self.changes.get(name, ()):
            if _after(((at, loops),), line):
                return at
        return None


def _bound_later(found: _Bindings, read_before: bool, name: str, line: int) -> bool:
    if read_before or name in found.always:
        return found.may_change_after(name, line)
    return any(at > line for at, _ in found.bindings.get(name, ()))


def _after(where: Any, line: int) -> bool:
    return any(at > line or any(a <= line <= b for a, b in loops) for at, loops in where)


def _refuse_changed_in_place_after_making(
    gen: ast.FunctionDef, fn: ast.FunctionDef, found: _Bindings, qualname: str, filename: str
) -> None:
    """Each call of ``gen`` in ``fn`` makes a generator, run to completion there: refused
    when ``fn`` may change in place, after that line, an object the generator reads (through
    ``fn``'s variables) or is given."""
    own = _own_names(gen)
    reads = {
        n.id
        for n in ast.walk(gen)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own
    }
    rebound = names_bound_anywhere(fn)
    for call, loops in found.calls.get(gen.name, ()):
        if id(call) in found.read_at_once and not (rebound & _READ_AT_ONCE):
            continue  # (read to the end where it is made, before anything changes)
        given = {
            n.id
            for a in [*call.args, *(k.value for k in call.keywords)]
            for n in ast.walk(a)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        line = min([call.lineno, *(a for a, _ in loops)])
        _refuse_reads_changed_in_place(gen, fn, line, found, reads | given, qualname, filename)


def _own_names(gen: ast.AST) -> set[str]:
    own = {a.arg for a in ast.walk(gen) if isinstance(a, ast.arg)}
    own |= {
        n.id for n in ast.walk(gen) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    return own


def _refuse_reads_changed_in_place(
    gen: ast.FunctionDef | ast.GeneratorExp,
    fn: ast.FunctionDef,
    made_at: int,
    found: _Bindings,
    names: set[str],
    qualname: str,
    filename: str,
) -> None:
    if isinstance(gen, ast.GeneratorExp):
        own = _own_names(gen)
        names = {
            n.id
            for n in ast.walk(gen)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own
        }
    for name in sorted(names):
        at = found.changed_in_place_after(name, made_at)
        if at is None:
            continue
        what = (
            "the generator expression"
            if isinstance(gen, ast.GeneratorExp)
            else f"the generator function {gen.name!r}"
        )
        line = getattr(gen, "lineno", None)
        err = UnsupportedSyntaxError(
            f"{what} in {qualname!r} ({filename}, line {line if line else '?'}) reads {name!r}, "
            f"which {fn.name!r} changes in place (line {at}) after the line {made_at} that makes "
            "the generator: at a higher order of differentiation (hessian, grad of grad) dplus "
            "runs a generator to completion where it is made, so it would read "
            f"{name!r} as it was then, where Python's generator reads it as it runs. Make the "
            "generator after the change, or take its values as a list where it is made"
        )
        err.filename = filename
        err.lineno = line
        raise err


def _refuse_reads_changed_after(
    gen: ast.FunctionDef | ast.GeneratorExp,
    fn: ast.FunctionDef,
    defined_at: int,
    may_change_after: Any,
    qualname: str,
    filename: str,
) -> None:
    own = _own_names(gen)
    for n in ast.walk(gen):
        if (
            isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)
            and n.id not in own
            and n.id != getattr(gen, "name", None)
            and may_change_after(n.id, defined_at)
        ):
            line = getattr(gen, "lineno", None)
            what = (
                "the generator expression"
                if isinstance(gen, ast.GeneratorExp)
                else f"the generator function {gen.name!r}"
            )
            err = UnsupportedSyntaxError(
                f"{what} in {qualname!r} ({filename}, line "
                f"{line if line else '?'}) reads {n.id!r}, which {fn.name!r} may bind again "
                "after making it: at a higher order of differentiation (hessian, grad of grad) dplus runs "
                "a generator to completion where it is made, so it could read another value "
                f"of {n.id!r} than Python's generator, which reads it as it runs. Pass "
                f"{n.id!r} to the generator function as an argument"
                if not isinstance(gen, ast.GeneratorExp)
                else f"{what} in {qualname!r} ({filename}, line "
                f"{line if line else '?'}) reads {n.id!r}, which {fn.name!r} may bind again "
                "after making it: at a higher order of differentiation (hessian, grad of grad) dplus makes "
                "its values at once where it is made, so it could read another value "
                f"of {n.id!r} than Python's generator, which reads it as it runs. Make it a list "
                "([...]) where it is made, or read it before the new binding"
            )
            err.filename = filename
            err.lineno = line
            raise err


def _refused_effect(
    gen: ast.FunctionDef, effect: tuple[ast.AST, str], qualname: str, filename: str
) -> UnsupportedSyntaxError:
    node, what = effect
    line = getattr(node, "lineno", None) or getattr(gen, "lineno", None)
    err = UnsupportedSyntaxError(
        f"the generator function {gen.name!r} in {qualname!r} ({filename}, line {line if line else '?'}) "
        f"{what}: at a higher order of differentiation (hessian, grad of grad) dplus runs a generator "
        "to completion where it is made, so this would happen before the code that runs between "
        "the generator's making and its reading, and all of it even when the reading stops early; "
        "Python's generator does it as it is read. Make the change outside the generator, or "
        "take the generator's values as a list where it is made"
    )
    err.filename = filename
    err.lineno = line
    return err


def _refused_endless(gen: ast.AST, qualname: str, filename: str) -> UnsupportedSyntaxError:
    line = getattr(gen, "lineno", None)
    name = getattr(gen, "name", "?")
    err = UnsupportedSyntaxError(
        f"the generator function {name!r} in {qualname!r} ({filename}, line {line if line else '?'}) has a "
        "`while True` loop: at a higher order of differentiation (hessian, grad of grad) dplus runs a "
        "generator to completion into a list, and this one may never end. Give the loop a condition "
        "that ends it, or take the values as a list"
    )
    err.filename = filename
    err.lineno = line
    return err


class _Definitions:
    def __init__(
        self,
        names: _Names,
        module: str,
        string_annotations: bool,
        generators: bool = True,
        lazy_from: Callable[[ast.Call], bool] | None = None,
    ) -> None:
        self.names = names
        # (given: generator expressions not consumed at once by such a call become generators)
        self.lazy_from = lazy_from
        self.generators = generators
        self.module = module
        self.string_annotations = string_annotations

    def function(
        self, node: ast.FunctionDef | ast.Lambda, qualname: str
    ) -> ast.FunctionDef | ast.Lambda:
        if isinstance(node, ast.Lambda):
            if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node.body)):
                raise GeneratorSyntaxError(node, "a yield inside a lambda", "write a nested def")
            return node
        node.body = self.block(node.body, qualname + ".<locals>")
        if self.generators and is_generator_function(node):
            node = GeneratorMachine(node, self.names.fresh, _internal, qualname).rewrite()
        return node

    def block(self, stmts: list[ast.stmt], where: str) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in stmts:
            if self.lazy_from is not None:
                lifter = GeneratorExpressionLifter(self.names.fresh, self.lazy_from)
                st = lifter.statement(st)
                out.extend(
                    cast(ast.FunctionDef, self.function(d, f"{where}.<genexpr>"))
                    for d in lifter.defs
                )
            if isinstance(st, ast.ClassDef):
                qual = f"{where}.{st.name}"
                built = ClassStatement(
                    st, self.names.fresh, _internal, qual, self.module, self.string_annotations
                ).rewrite()
                out.extend(self.block(built, where))
                continue
            if isinstance(st, ast.FunctionDef):
                method = getattr(st, "dp_method", None)
                qual = f"{method[0]}.{method[1]}" if method else f"{where}.{st.name}"
                out.append(cast(ast.FunctionDef, self.function(st, qual)))
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(st, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    setattr(st, field, self.block(inner, where))
            for h in getattr(st, "handlers", None) or []:
                h.body = self.block(h.body, where)
            for c in getattr(st, "cases", None) or []:
                c.body = self.block(c.body, where)
            out.append(st)
        return out
