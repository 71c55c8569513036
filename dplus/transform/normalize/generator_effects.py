"""What a generator's body does that the program outside it can see, found in its source.

Differentiated again (a higher order: ``hessian``, ``grad`` of ``grad``), a generator runs to
completion where it is made (``rewrites._YieldsToList``). Its values are then the ones Python's
generator gives only if running its body early changes nothing the program sees: a body that
appends to a list of the function, writes into a dict, sets an attribute, writes a
``nonlocal``/``global`` variable, prints, draws random numbers, takes items from an iterator
it did not make, or calls a function of the program that does one of these, would do it at
the wrong time (before the code between the generator's making and its reading, and all of
it even when the consumer stops early). :func:`first_effect` names the first such effect, so
that the caller refuses the generator by name instead of giving a wrong result.

What the body does to objects it made itself (``acc = []; acc.append(v)``) is its own. A
method of an object of the program whose name is not one of the containers' in-place methods
(:data:`MUTATING_METHODS`) is taken to change nothing: a method of the user's class that
changes its object is not seen here (FINDINGS, stop 37).
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import types
from typing import Any

from ..trees import unparse, walk_outside

__all__ = ["first_effect", "MUTATING_METHODS", "changed_in_place"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

# the in-place methods of list, dict, set, deque, bytearray, numpy arrays, files
MUTATING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "update",
        "setdefault",
        "popitem",
        "add",
        "discard",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "sort",
        "reverse",
        "appendleft",
        "extendleft",
        "popleft",
        "rotate",
        "fill",
        "resize",
        "put",
        "itemset",
        "setflags",
        "write",
        "writelines",
        "send",
        "throw",
        "close",
        "__setitem__",
        "__delitem__",
        "__setattr__",
        "__delattr__",
        "__iadd__",
        "__imul__",
    }
)

# builtins whose call is an effect the program sees (``next``: of an iterator the body did not
# make, it takes the item from whoever else reads that iterator)
_EFFECT_BUILTINS = frozenset(
    {"print", "setattr", "delattr", "exec", "eval", "input", "open", "breakpoint", "next"}
)

# fresh containers: a local bound only to one of these is the body's own
_FRESH_CALLS = frozenset({"list", "dict", "set", "bytearray", "deque", "defaultdict", "Counter"})
_FRESH_NODES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def first_effect(
    fn: ast.FunctionDef,
    nested: dict[str, list[ast.FunctionDef]],
    globals_: dict[str, Any],
    module: str,
    bound_in_module_code: set[str],
) -> tuple[ast.AST, str] | None:
    """The first effect (the node, what it does) that running ``fn``'s body shows outside it,
    looking into the functions it calls: ``nested`` (the ``def``s of the differentiated
    function, by name) and the Python functions of the module ``globals_``."""
    return _Effects(nested, globals_, module, bound_in_module_code).of(fn, set())


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [node.optional_vars]
    return []


def _flat(targets: list[ast.expr]) -> list[ast.expr]:
    out: list[ast.expr] = []
    todo = list(targets)
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
        else:
            out.append(t)
    return out


class _Effects:
    def __init__(
        self,
        nested: dict[str, list[ast.FunctionDef]],
        globals_: dict[str, Any],
        module: str,
        bound_in_module_code: set[str],
    ) -> None:
        self.nested = nested
        self.globals_ = globals_
        self.module = module
        self.bound = bound_in_module_code

    def of(self, fn: ast.FunctionDef | ast.Lambda, seen: set[int]) -> tuple[ast.AST, str] | None:
        if id(fn) in seen:
            return None
        seen.add(id(fn))
        body: list[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
        nodes = [n for st in body for n in walk_outside(st, _SCOPES)]
        nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        declared: dict[str, str] = {}
        for n in nodes:
            if isinstance(n, ast.Global):
                declared.update((name, "global") for name in n.names)
            elif isinstance(n, ast.Nonlocal):
                declared.update((name, "nonlocal") for name in n.names)
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        local_bindings: dict[str, list[ast.AST]] = {}
        for n in nodes:
            for t in _flat(_targets(n)):
                if isinstance(t, ast.Name):
                    local_bindings.setdefault(t.id, []).append(n)
            if isinstance(n, ast.NamedExpr):
                local_bindings.setdefault(n.target.id, []).append(n)
        locals_ = (set(local_bindings) | params) - set(declared)
        fresh = {
            name
            for name, where in local_bindings.items()
            if name not in declared and name not in params and all(map(self._fresh, where))
        }
        for n in nodes:
            found = self._effect(n, declared, locals_, fresh, seen)
            if found is not None:
                return found
        return None

    @staticmethod
    def _fresh(binding: ast.AST) -> bool:
        """Whether a binding gives its name a container made there."""
        if isinstance(binding, ast.AugAssign):
            return True  # (``acc += [v]`` changes or rebinds the same local container)
        if not isinstance(binding, ast.Assign) or len(binding.targets) != 1:
            return False
        value = binding.value
        if isinstance(value, _FRESH_NODES):
            return True
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in _FRESH_CALLS
        )

    def _effect(
        self,
        n: ast.AST,
        declared: dict[str, str],
        locals_: set[str],
        fresh: set[str],
        seen: set[int],
    ) -> tuple[ast.AST, str] | None:
        for t in _flat(_targets(n)):
            if isinstance(t, ast.Name):
                if t.id in declared:
                    return n, f"writes the {declared[t.id]} variable {t.id!r}"
                continue
            root = _root(t)
            if isinstance(root, ast.Name) and root.id in fresh:
                continue
            verb = "deletes" if isinstance(n, ast.Delete) else "writes"
            return n, f"{verb} {unparse(t)!r}, a part of an object the generator did not make"
        if isinstance(n, ast.NamedExpr) and n.target.id in declared:
            return n, f"writes the {declared[n.target.id]} variable {n.target.id!r}"
        if not isinstance(n, ast.Call):
            return None
        if isinstance(n.func, ast.Name):
            return self._call_effect(n, n.func.id, locals_, seen)
        if isinstance(n.func, ast.Attribute):
            return self._method_effect(n, n.func, locals_, fresh)
        return None

    def _call_effect(
        self, n: ast.Call, name: str, locals_: set[str], seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        if name in locals_:
            return None  # (a local callable: what it does is not known here)
        if name in _EFFECT_BUILTINS and self._is_builtin(name):
            if name == "next" and n.args:
                it = _root(n.args[0])
                if isinstance(it, ast.Name) and it.id in locals_:
                    return None  # (an iterator of its own)
                return n, f"takes an item from {unparse(n.args[0])!r}, an iterator it did not make"
            return n, f"calls {name}()"
        return self._callee_effect(n, name, seen)

    def _method_effect(
        self, n: ast.Call, func: ast.Attribute, locals_: set[str], fresh: set[str]
    ) -> tuple[ast.AST, str] | None:
        root = _root(func.value)
        text = unparse(func)
        if isinstance(root, ast.Name) and root.id not in locals_:
            value = self.globals_.get(root.id)
            if isinstance(value, types.ModuleType) and root.id not in self.bound:
                if "random" in text.split(".") or value.__name__.split(".")[-1] == "random":
                    return n, f"draws random numbers ({text}())"
                return None
        if isinstance(root, ast.Name) and root.id in fresh:
            return None
        if func.attr in MUTATING_METHODS:
            return n, f"calls {text}(), which changes an object the generator did not make"
        return None

    def _is_builtin(self, name: str) -> bool:
        return name not in self.bound and self.globals_.get(
            name, getattr(builtins, name, None)
        ) is getattr(builtins, name, None)

    def _callee_effect(
        self, call: ast.Call, name: str, seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        for d in self.nested.get(name, ()):
            found = self.of(d, seen)
            if found is not None:
                return (
                    call,
                    f"calls {name}(), which {found[1]} (line {getattr(found[0], 'lineno', '?')})",
                )
        if name in self.nested or name in self.bound:
            return None
        value = self.globals_.get(name)
        fn = inspect.unwrap(value) if callable(value) else None
        if not isinstance(fn, types.FunctionType) or fn.__module__ != self.module:
            return None  # (a library's function: taken to change nothing the program holds)
        if id(fn.__code__) in seen:
            return None  # (recursion: looked into already)
        seen.add(id(fn.__code__))
        tree = _parsed(fn)
        if tree is None:
            return None
        found = _Effects({}, fn.__globals__, self.module, set()).of(tree, seen)
        if found is not None:
            return call, f"calls {name}(), which {found[1]}"
        return None


@functools.lru_cache(maxsize=256)
def _parsed(fn: types.FunctionType) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for n in tree.body:
        if isinstance(n, ast.FunctionDef):
            return n
    return None


def changed_in_place(node: ast.AST) -> tuple[str, int] | None:
    """``(name, line)`` when the statement ``node`` changes the object a plain name holds in
    place (``xs.append(v)``, ``xs[i] = v``, ``xs[i] += v``, ``del d[k]``, ``o.a = v``)."""
    for t in _flat(_targets(node)):
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            root = _root(t)
            if isinstance(root, ast.Name):
                return root.id, getattr(node, "lineno", 0)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in MUTATING_METHODS
    ):
        root = _root(node.func.value)
        if isinstance(root, ast.Name):
            return root.id, getattr(node, "lineno", 0)
    return None
