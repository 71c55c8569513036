"""Generators differentiated again (a higher order: ``hessian``, ``grad`` of ``grad``), where
a generator runs to completion where it is made (``rewrites._YieldsToList``) and a generator
expression's values are made at once: what that early running would let the program see is
refused here by name, before the transform (a ``while True`` loop, a variable bound again or
an object changed in place after the making, an effect of the body: :mod:`.generator_effects`);
a generator expression given to a function of the program becomes an iterator over its
values, read once (:class:`.generator_expressions.OnceReadGeneratorExpressions`)."""

from __future__ import annotations

import ast
import builtins
import functools
import types
from typing import Any

from ...errors import UnsupportedSyntaxError
from ..trees import walk
from .generator_effects import changed_in_place
from .generator_expressions import (
    OnceReadGeneratorExpressions,
    names_bound_anywhere,
)
from .generator_syntax import is_generator_function
from .generator_uses import (
    GeneratorUses,
    described,
    outside_reads,
    refused_effect,
)

__all__ = [
    "endless",
    "refused_endless",
    "refused_effect",
    "refuse_generators_reading_rebound_variables",
    "read_once_where_passed",
]


def read_once_where_passed(node: ast.AST, module: str, globals_: dict, uses: GeneratorUses) -> None:
    """Differentiated again: a generator expression given to a function of the program or to
    ``next`` becomes an iterator over its values (:class:`.OnceReadGeneratorExpressions`),
    unless ``iter`` is not the builtin. One not read to its end where it is made (by ``sum``,
    ...) whose elements may have an effect, or whose reads the program may change after its
    making (:meth:`GeneratorUses.refuse_expression_read_later`), is refused: its values would
    be made before the code between its making and its reading runs."""
    bound = uses.bound

    def is_builtin(name: str) -> bool:
        return name not in bound and globals_.get(name, getattr(builtins, name, None)) is getattr(
            builtins, name, None
        )

    if not is_builtin("iter"):
        return

    def is_programs_function(name: str) -> bool:
        if name in bound:
            return not is_builtin(name)
        value = globals_.get(name)
        return isinstance(value, types.FunctionType) and value.__module__ == module

    for e in [n for n in walk(node) if isinstance(n, ast.GeneratorExp)]:
        if not uses.read_at_once(e):
            uses.refuse_expression_read_later(e)

    def is_module(name: str) -> bool:
        return name not in bound and isinstance(globals_.get(name), types.ModuleType)

    rewrite = OnceReadGeneratorExpressions(is_programs_function, is_module, is_builtin("next"))
    rewrite.visit(node)


def endless(gen: ast.AST) -> bool:
    """Whether a generator has a ``while True:`` loop (it may never end: run to completion
    into a list at a higher order, it would not return)."""
    return any(
        isinstance(n, ast.While) and isinstance(n.test, ast.Constant) and bool(n.test.value)
        for n in ast.walk(gen)
    )


def refuse_generators_reading_rebound_variables(
    fn: ast.FunctionDef, qualname: str, filename: str, uses: GeneratorUses | None = None
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
    ``xs[i] = v``) after a line that makes the generator. With ``uses``: a generator function
    read to its end wherever it is made reads the variables as Python's does (skipped), and
    the variables read by the functions of the program the generator calls count too."""
    found = _Bindings()
    found.stores(ast.Module(body=fn.body, type_ignores=[]), ())
    for outer, defined_at in found.definitions:
        for gen in [n for n in walk(outer) if isinstance(n, ast.FunctionDef)]:
            if is_generator_function(gen):
                if uses is not None and uses.read_at_once_everywhere(gen):
                    continue
                windows = None
                if uses is not None:
                    around = uses.enclosing(gen)
                    home = around[0] if around else fn
                    windows = uses.read_windows(gen, home)
                    if windows is not None and gen is not outer:
                        continue  # (read only inside the function that defines it: checked there)
                _refuse_reads_changed_after(
                    gen,
                    fn,
                    defined_at,
                    found.may_change_after
                    if windows is None
                    else functools.partial(_bound_while_read, found, windows),
                    qualname,
                    filename,
                    None if uses is None else uses.reads_through_calls(gen),
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
        reads = None if uses is None else uses.reads_through_calls(kept)
        _refuse_reads_changed_after(kept, fn, made_at, later, qualname, filename, reads)
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


def _bound_while_read(
    found: _Bindings, windows: list[tuple[int, int]], name: str, line: int
) -> bool:
    """Whether ``name`` may be bound between a making of the generator and its last read
    (``GeneratorUses.read_windows``: neither in a loop, so a binding runs between them only
    on a line between them; a nested function writing it as ``nonlocal`` runs there only if
    called there, which ``GeneratorUses.refuse_read_later`` refuses as an effect)."""
    return any(m <= b <= last for b, _ in found.bindings.get(name, ()) for m, last in windows)


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
    reads = {n.id for n in outside_reads(gen)}
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
        names = {n.id for n in outside_reads(gen)}
    for name in sorted(names):
        at = found.changed_in_place_after(name, made_at)
        if at is None:
            continue
        what = described(gen)
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
    reads: list[ast.Name] | None = None,
) -> None:
    for n in outside_reads(gen) if reads is None else reads:
        if n.id != getattr(gen, "name", None) and may_change_after(n.id, defined_at):
            line = getattr(gen, "lineno", None)
            what = described(gen)
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


def refused_endless(gen: ast.AST, qualname: str, filename: str) -> UnsupportedSyntaxError:
    line = getattr(gen, "lineno", None)
    name = getattr(gen, "name", "?")
    err = UnsupportedSyntaxError(
        f"the generator function {name!r} in {qualname!r} ({filename}, line {line if line else '?'}) has a "
        "`while True` loop: at a higher order of differentiation (hessian, grad of grad) dplus runs a "
        "generator where it is made, until it has yielded as many values as its readers can take, and "
        "here that number is not known before it runs (it is known for next(it) calls outside loops "
        "on a variable bound once, itertools.islice(gen(), k), and zip with a list display). "
        "Give the loop a condition that ends it, or read the generator in one of those ways"
    )
    err.filename = filename
    err.lineno = line
    return err
