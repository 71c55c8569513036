"""Definitions inside a differentiated function rewritten into ordinary code before the
scopes are analysed: a ``class`` statement becomes the statements that build the class
(:mod:`.class_statements`), a generator function a function that builds a resumable machine
(:mod:`.generator_machine`). What neither can take is refused here, naming it."""

from __future__ import annotations

import ast
import builtins
import itertools
from collections import Counter
from collections.abc import Callable
from typing import cast

from ...errors import UnsupportedSyntaxError
from ..trees import walk
from .class_statements import ClassStatement, ClassSyntaxError, mark_functions_set_as_attributes
from .core import _internal
from .generator_expressions import (
    GeneratorExpressionLifter,
    consumers_in,
    names_bound_anywhere,
)
from .generator_limits import LIMIT, values_read_at_most
from .generator_machine import GeneratorMachine, GeneratorSyntaxError, is_generator_function
from .generator_returns import generators_bound_once, rewrite_closes, rewrite_returns
from .generator_uses import GeneratorUses
from .generators_again import (
    endless,
    read_once_where_passed,
    refuse_generators_reading_rebound_variables,
    refused_endless,
)
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
        _generators_again(node, kinds, has_yield, qualname, module, filename, globals_ or {})
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


def _generators_again(
    node: ast.FunctionDef | ast.Lambda,
    kinds: Counter,
    has_yield: bool,
    qualname: str,
    module: str,
    filename: str,
    globals_: dict,
) -> None:
    """``rewrite_definitions`` differentiated again: what a generator run where it is made
    would show refused by name; a return value, ``close()`` and an endless generator's
    stop rewritten where they are right (:mod:`.generator_returns`, :mod:`.generator_limits`)."""
    functions = [n for n in walk(node) if isinstance(n, ast.FunctionDef)]
    generators = [fn for fn in functions if is_generator_function(fn)] if has_yield else []
    uses = None
    names = _Names(node)
    if generators:
        _limit_endless_generators(node, generators, globals_)
        rewrite_closes(node, names.fresh)
    if generators or kinds[ast.GeneratorExp]:
        nested: dict[str, list[ast.FunctionDef]] = {}
        for fn in functions:
            nested.setdefault(fn.name, []).append(fn)
        bound = names_bound_anywhere(node)
        uses = GeneratorUses(node, nested, globals_, module, bound, qualname, filename)
    for gen in generators:
        if endless(gen) and getattr(gen, LIMIT, None) is None:
            raise refused_endless(gen, qualname, filename)
        uses.refuse_read_later(gen)  # type: ignore[union-attr]
    lazy_builtins = _lazy_builtins_not_rebound(node, globals_)
    for fn in functions:
        if generators or kinds[ast.GeneratorExp]:
            refuse_generators_reading_rebound_variables(fn, qualname, filename, uses)
        refuse_generator_expressions_read_again(
            fn.body, fn.name, filename, frozenset(), lazy_builtins
        )
    if kinds[ast.GeneratorExp] and not module.startswith("dplus."):
        read_once_where_passed(node, module, globals_, uses)  # type: ignore[arg-type]
    if generators:
        rewrite_returns(node, names.fresh, uses.is_builtin)  # type: ignore[union-attr]


def _limit_endless_generators(
    node: ast.AST, generators: list[ast.FunctionDef], globals_: dict
) -> None:
    """Mark (``LIMIT``) each endless generator function with the most values a making of it
    can give out, where that is known (:mod:`.generator_limits`)."""
    endless_ones = [g for g in generators if endless(g)]
    if not endless_ones:
        return
    parents = {id(c): n for n in walk(node) for c in ast.iter_child_nodes(n)}
    once = generators_bound_once(node)
    bound = names_bound_anywhere(node)
    for gen in endless_ones:
        if once.get(gen.name) is gen:
            most = values_read_at_most(gen, node, parents, globals_, bound)
            if most is not None:
                setattr(gen, LIMIT, most)


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
