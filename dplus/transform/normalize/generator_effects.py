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

What the body does to objects it made itself (``acc = []; acc.append(v)``) is its own.

Two strengths. The lenient one (``strict=False``) names the effects it sees and takes what
it cannot see into (a library's function, a method of an object whose name is not one of the
containers' in-place methods, :data:`MUTATING_METHODS`) to change nothing: enough where the
generator is read to its end where it is made. The strict one, for a generator read later
(kept, taken by ``next``, read by a loop), counts anything not known to change nothing as a
possible effect: a call is free of effects only when it is a builtin, a function of ``math``,
``numpy``, ``operator``... of the tables below (not their in-place ones), a function, class
or method of the program looked into through its source, or a method in :data:`PURE_METHODS`
that no class of the program defines with an effect (stop 38). :func:`effects_in` lists every
effect of a function's own code that way, for what may change the state a generator reads
between its making and its reading.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import types
from typing import Any, NamedTuple

from ..trees import unparse, walk_outside

__all__ = [
    "first_effect",
    "effects_in",
    "Effect",
    "MUTATING_METHODS",
    "CHANGES_ITS_FIRST_ARGUMENT",
    "changed_in_place",
]

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

# what the strict analysis takes to change nothing the program holds
_PURE_BUILTINS = frozenset(
    {
        "abs", "len", "range", "min", "max", "sum", "float", "int", "round", "pow", "divmod",
        "zip", "enumerate", "reversed", "sorted", "list", "tuple", "dict", "set", "frozenset",
        "bool", "str", "repr", "isinstance", "issubclass", "any", "all", "map", "filter",
        "hash", "id", "type", "callable", "hasattr", "getattr", "format", "chr", "ord",
        "complex", "slice", "bin", "hex", "oct", "ascii", "super",
    }
)  # fmt: skip
# (builtins and library functions calling a function they are given: it is looked into too)
_CALLING = frozenset({"map", "filter", "sorted", "min", "max", "reduce"})
# modules whose functions change none of their arguments
_PURE_MODULES = frozenset({"math", "cmath", "statistics", "copy", "fractions", "numbers"})
# the in-place functions of the modules taken as pure otherwise (numpy's: besides ``out=``)
_IN_PLACE_FUNCTIONS = {
    "numpy": frozenset(
        {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "at", "seed"}
    ),
    "operator": frozenset(
        {
            "setitem",
            "delitem",
            "iadd",
            "iand",
            "iconcat",
            "ifloordiv",
            "ilshift",
            "imod",
            "imul",
            "imatmul",
            "ior",
            "ipow",
            "irshift",
            "isub",
            "itruediv",
            "ixor",
        }
    ),  # fmt: skip
    "functools": frozenset({"update_wrapper", "wraps", "cache", "lru_cache"}),
}
# library functions changing the object given first and keeping no hold on it
CHANGES_ITS_FIRST_ARGUMENT = frozenset(
    {"heappush", "heappop", "heapify", "heapreplace", "heappushpop", "insort", "insort_left",
     "insort_right", "setitem", "delitem", "copyto", "put", "place", "putmask",
     "fill_diagonal", "shuffle"}
)  # fmt: skip
# functions of other modules known to change nothing
_PURE_FUNCTIONS = {
    "heapq": frozenset({"nlargest", "nsmallest", "merge"}),
    "bisect": frozenset({"bisect", "bisect_left", "bisect_right"}),
}
# methods of builtin and numpy objects that change nothing (a class of the program defining
# one of these names is looked into)
PURE_METHODS = frozenset(
    {
        "get", "keys", "values", "items", "copy", "index", "count", "conjugate", "is_integer",
        "as_integer_ratio", "bit_length", "hex", "upper", "lower", "strip", "lstrip",
        "rstrip", "split", "join", "format", "startswith", "endswith", "replace", "find",
        "sum", "mean", "prod", "std", "var", "dot", "reshape", "transpose", "tolist",
        "astype", "flatten", "ravel", "item", "argmax", "argmin", "cumsum", "cumprod",
        "any", "all", "round", "clip", "nonzero", "squeeze", "swapaxes", "trace", "diagonal",
        "union", "intersection", "difference", "symmetric_difference", "issubset",
        "issuperset", "isdisjoint", "fromkeys", "__getitem__", "__len__", "__contains__",
        "most_common", "elements", "total",
    }
)  # fmt: skip

# fresh containers: a local bound only to one of these is the body's own
_FRESH_CALLS = frozenset({"list", "dict", "set", "bytearray", "deque", "defaultdict", "Counter"})
_FRESH_NODES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def first_effect(
    fn: ast.FunctionDef,
    nested: dict[str, list[Any]],
    globals_: dict[str, Any],
    module: str,
    bound_in_module_code: set[str],
    strict: bool = False,
    classes: dict[str, ast.ClassDef] | None = None,
) -> tuple[ast.AST, str] | None:
    """The first effect (the node, what it does) that running ``fn``'s body shows outside it,
    looking into the functions it calls: ``nested`` (the ``def``s of the differentiated
    function, by name) and the Python functions of the module ``globals_``. ``strict``: a
    call not known to change nothing is an effect too (the module's docstring)."""
    return _Effects(nested, globals_, module, bound_in_module_code, strict, classes).of(fn, set())


class Effect(NamedTuple):
    node: ast.AST
    what: str
    changes: str | None  # the local name whose object it changes directly (``xs`` of ``xs[i] = v``)


def effects_in(
    fn: ast.FunctionDef,
    nested: dict[str, list[ast.FunctionDef]],
    globals_: dict[str, Any],
    module: str,
    bound_in_module_code: set[str],
    classes: dict[str, ast.ClassDef] | None = None,
) -> list[Effect]:
    """Every effect of ``fn``'s own code (not of its nested functions' bodies, but of their
    calls), by the strict analysis, including those on the containers ``fn`` made itself
    (``changes`` names the local when the object changed is the one it holds)."""
    found: list[Effect] = []
    _Effects(nested, globals_, module, bound_in_module_code, True, classes).of(fn, set(), found)
    return found


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


def _direct(node: ast.expr) -> str | None:
    """``xs`` for ``xs[i]``, ``xs.a``: the name whose object is the one changed."""
    if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.value, ast.Name):
        return node.value.id
    return None


def _top_module(value: Any) -> str:
    name = getattr(value, "__module__", None)
    if not isinstance(name, str):
        name = getattr(type(value), "__module__", "") or ""
    return name.split(".")[0].lstrip("_")


class _Scope(NamedTuple):
    declared: dict[str, str]  # name -> "global" / "nonlocal"
    locals_: set[str]
    fresh: set[str]  # locals bound only to containers made there
    functions: dict[str, list[ast.AST]]  # functions and lambdas defined in the body


def _called_arguments(n: ast.Call) -> list[ast.expr]:
    """The arguments a builtin or library function calls (``map(f, xs)``, ``key=f``)."""
    func = n.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in _CALLING:
        return []
    if name in ("map", "filter", "reduce"):
        return n.args[:1]
    return [k.value for k in n.keywords if k.arg == "key"]


class _Effects:
    def __init__(
        self,
        nested: dict[str, list[ast.FunctionDef]],
        globals_: dict[str, Any],
        module: str,
        bound_in_module_code: set[str],
        strict: bool = False,
        classes: dict[str, ast.ClassDef] | None = None,
    ) -> None:
        self.nested = nested
        self.classes = classes or {}
        self.globals_ = globals_
        self.module = module
        self.bound = bound_in_module_code
        self.strict = strict

    def of(
        self,
        fn: ast.FunctionDef | ast.Lambda,
        seen: set[int],
        collect: list[Effect] | None = None,
        self_is_fresh: bool = False,
    ) -> tuple[ast.AST, str] | None:
        """The first effect of ``fn``; with ``collect``, all of them go there instead, those on
        ``fn``'s own containers too."""
        if id(fn) in seen:
            return None
        seen.add(id(fn))
        body: list[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
        nodes = [n for st in body for n in walk_outside(st, _SCOPES)]
        nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        scope = self._scope(fn, body, nodes)
        if self_is_fresh and fn.args.args:
            scope.fresh.add(fn.args.args[0].arg)  # (``__init__`` setting up its own object)
        if collect is not None:
            scope.fresh.clear()
        for n in nodes:
            found = self._effect(n, scope, seen)
            if found is not None:
                if collect is None:
                    return found
                collect.append(Effect(found[0], found[1], self._changes(n)))
        return None

    def _scope(self, fn: ast.AST, body: list[ast.AST], nodes: list[ast.AST]) -> _Scope:
        declared: dict[str, str] = {}
        for n in nodes:
            if isinstance(n, ast.Global):
                declared.update((name, "global") for name in n.names)
            elif isinstance(n, ast.Nonlocal):
                declared.update((name, "nonlocal") for name in n.names)
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore[attr-defined]
        local_bindings: dict[str, list[ast.AST]] = {}
        for n in nodes:
            for t in _flat(_targets(n)):
                if isinstance(t, ast.Name):
                    local_bindings.setdefault(t.id, []).append(n)
            if isinstance(n, ast.NamedExpr):
                local_bindings.setdefault(n.target.id, []).append(n)
        fresh = {
            name
            for name, where in local_bindings.items()
            if name not in declared and name not in params and all(map(self._fresh, where))
        }
        functions: dict[str, list[ast.AST]] = {}
        if self.strict:
            # (lambdas and functions defined in the body: their effects are the body's when
            # called; a local callable of another origin is not known)
            for st in body:
                for n in walk_outside(st, (ast.ClassDef,)):
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn:
                        functions.setdefault(n.name, []).append(n)
            for n in nodes:
                if (
                    isinstance(n, ast.Assign)
                    and len(n.targets) == 1
                    and isinstance(n.targets[0], ast.Name)
                    and isinstance(n.value, ast.Lambda)
                ):
                    functions.setdefault(n.targets[0].id, []).append(n.value)
        locals_ = (set(local_bindings) | params) - set(declared)
        return _Scope(declared, locals_, fresh, functions)

    def _changes(self, n: ast.AST) -> str | None:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            owner = n.func.value
            if isinstance(owner, ast.Name) and not isinstance(
                self._resolved(owner), types.ModuleType
            ):
                return owner.id
            if n.func.attr in CHANGES_ITS_FIRST_ARGUMENT and n.args:
                first = n.args[0]
                return first.id if isinstance(first, ast.Name) else None
            return None
        names = [_direct(t) for t in _flat(_targets(n))]
        return names[0] if len(names) == 1 else None

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

    def _effect(self, n: ast.AST, scope: _Scope, seen: set[int]) -> tuple[ast.AST, str] | None:
        declared = scope.declared
        for t in _flat(_targets(n)):
            if isinstance(t, ast.Name):
                if t.id in declared:
                    return n, f"writes the {declared[t.id]} variable {t.id!r}"
                continue
            root = _root(t)
            if isinstance(root, ast.Name) and root.id in scope.fresh:
                continue
            verb = "deletes" if isinstance(n, ast.Delete) else "writes"
            return n, f"{verb} {unparse(t)!r}, a part of an object the generator did not make"
        if isinstance(n, ast.NamedExpr) and n.target.id in declared:
            return n, f"writes the {declared[n.target.id]} variable {n.target.id!r}"
        if not isinstance(n, ast.Call):
            return None
        return self._call_node_effect(n, scope, seen)

    def _call_node_effect(
        self, n: ast.Call, scope: _Scope, seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        if self.strict and any(k.arg == "out" for k in n.keywords):
            return n, f"calls {unparse(n.func)}() with out=, which writes into an array"
        found: tuple[ast.AST, str] | None = None
        if isinstance(n.func, ast.Name):
            found = self._call_effect(n, n.func.id, scope, seen)
        elif isinstance(n.func, ast.Attribute):
            found = self._method_effect(n, n.func, scope, seen)
        elif self.strict and not isinstance(n.func, ast.Lambda):
            found = n, f"calls {unparse(n.func)}, a function dplus cannot see into"
        if found is not None or not self.strict:
            return found
        for a in _called_arguments(n):
            if isinstance(a, ast.Name):
                found = self._call_effect(n, a.id, scope, seen)
            elif isinstance(a, ast.Attribute):
                found = self._method_effect(n, a, scope, seen)
            elif not isinstance(a, ast.Lambda):
                found = (
                    n,
                    f"gives {unparse(n.func)}() {unparse(a)}, a function dplus cannot see into",
                )
            if found is not None:
                return found
        return None

    def _call_effect(
        self, n: ast.Call, name: str, scope: _Scope, seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        local_functions = scope.functions
        if name in scope.locals_ or name in local_functions:
            if not self.strict:
                return None  # (a local callable: what it does is not known here)
            if name not in local_functions:
                return n, f"calls {name}(), a local callable dplus cannot see into"
            for d in local_functions[name]:
                found = self.of(d, seen)  # type: ignore[arg-type]
                if found is not None:
                    return n, f"calls {name}(), which {found[1]}"
            return None
        if name in _EFFECT_BUILTINS and self._is_builtin(name):
            if name == "next" and n.args:
                it = _root(n.args[0])
                if isinstance(it, ast.Name) and it.id in scope.locals_:
                    return None  # (an iterator of its own)
                return n, f"takes an item from {unparse(n.args[0])!r}, an iterator it did not make"
            return n, f"calls {name}()"
        return self._callee_effect(n, name, seen)

    def _method_effect(
        self, n: ast.Call, func: ast.Attribute, scope: _Scope, seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        locals_, fresh = scope.locals_, scope.fresh
        root = _root(func.value)
        text = unparse(func)
        if isinstance(root, ast.Name) and root.id not in locals_:
            value = self.globals_.get(root.id)
            if isinstance(value, types.ModuleType) and root.id not in self.bound:
                if "random" in text.split(".") or value.__name__.split(".")[-1] == "random":
                    return n, f"draws random numbers ({text}())"
                if not self.strict:
                    return None
                return self._library_effect(n, text, self._resolved(func))
        if isinstance(root, ast.Name) and root.id in fresh:
            return None
        if func.attr in MUTATING_METHODS:
            return n, f"calls {text}(), which changes an object the generator did not make"
        if not self.strict:
            return None
        defined = self._program_methods(func.attr)
        for d, globals_ in defined:
            effects = _Effects(self.nested, globals_, self.module, self.bound, True, self.classes)
            found = effects.of(d, seen)
            if found is not None:
                return n, f"calls {text}(), which {found[1]}"
        if defined or func.attr in PURE_METHODS:
            return None
        return n, f"calls {text}(), a method dplus cannot see into"

    def _resolved(self, func: ast.expr) -> Any:
        """The object a dotted name of modules names (``np.linalg.norm``), or None."""
        if isinstance(func, ast.Name):
            if func.id in self.bound:
                return None
            return self.globals_.get(func.id, getattr(builtins, func.id, None))
        if isinstance(func, ast.Attribute):
            owner = self._resolved(func.value)
            if isinstance(owner, types.ModuleType) or type(owner).__name__ == "ufunc":
                return getattr(owner, func.attr, None)
        return None

    def _library_effect(self, n: ast.Call, text: str, value: Any) -> tuple[ast.AST, str] | None:
        name = getattr(value, "__name__", None) or text.rsplit(".", 1)[-1]
        top = _top_module(value)
        if isinstance(value, types.FunctionType) and value.__module__ == self.module:
            return None  # (looked into by the caller)
        if top in _PURE_MODULES or type(value).__name__ == "ufunc":
            return None
        if isinstance(value, type) and top == "builtins":
            return None  # (an exception, a number, a container made)
        if top in _IN_PLACE_FUNCTIONS and name not in _IN_PLACE_FUNCTIONS[top]:
            return None
        if name in _PURE_FUNCTIONS.get(top, ()):
            return None
        if top == "itertools" and not any(
            isinstance(a, (ast.Name, ast.Attribute, ast.Subscript)) for a in n.args
        ):
            return None  # (iterators of what it makes there: of a name, it may advance one)
        return n, f"calls {text}(), a library function that may change what it is given"

    def _program_methods(self, name: str) -> list[tuple[ast.FunctionDef, dict[str, Any]]]:
        """The definitions of a method ``name`` in the classes of the program: the
        differentiated function's (``nested``) and its module's."""
        out: list[tuple[ast.FunctionDef, dict[str, Any]]] = [
            (d, self.globals_) for d in self.nested.get(name, ())
        ]
        for value in list(self.globals_.values()):
            if isinstance(value, type) and value.__module__ == self.module:
                for klass in value.__mro__:
                    fn = klass.__dict__.get(name)
                    fn = inspect.unwrap(fn) if callable(fn) else None
                    if isinstance(fn, types.FunctionType):
                        tree = _parsed(fn)
                        if tree is not None:
                            out.append((tree, fn.__globals__))
        return out

    def _constructor_effect(
        self, call: ast.Call, klass: ast.ClassDef, seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        """A class of the differentiated function called: its ``__init__`` setting up the
        object it makes is its own."""
        if klass.bases or klass.keywords or klass.decorator_list:
            return call, f"calls {klass.name}(), a class dplus does not look into"
        for st in klass.body:
            if isinstance(st, ast.FunctionDef) and st.name in ("__init__", "__new__"):
                found = self.of(st, seen, self_is_fresh=st.name == "__init__")
                if found is not None:
                    return call, f"calls {klass.name}(), which {found[1]}"
        return None

    def _is_builtin(self, name: str) -> bool:
        return name not in self.bound and self.globals_.get(
            name, getattr(builtins, name, None)
        ) is getattr(builtins, name, None)

    def _module_class_effect(
        self, call: ast.Call, name: str, value: type, seen: set[int]
    ) -> tuple[ast.AST, str] | None:
        """A class of the module called: its ``__init__`` setting up the object it makes is
        its own."""
        init = inspect.unwrap(vars(value)["__init__"]) if "__init__" in vars(value) else None
        if not isinstance(init, types.FunctionType):
            return None  # (object's: sets up nothing)
        tree = _parsed(init)
        if tree is None or id(init.__code__) in seen:
            return None
        seen.add(id(init.__code__))
        effects = _Effects({}, init.__globals__, self.module, set(), True)
        found = effects.of(tree, seen, self_is_fresh=True)
        return None if found is None else (call, f"calls {name}(), which {found[1]}")

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
        if name in self.nested:
            return None
        klass = self.classes.get(name)
        if klass is not None and self.strict:
            return self._constructor_effect(call, klass, seen)
        if name in self.bound:
            if self.strict:
                return call, f"calls {name}(), a function dplus cannot see into"
            return None
        value = self.globals_.get(name, getattr(builtins, name, None))
        if self.strict and isinstance(value, type) and value.__module__ == self.module:
            return self._module_class_effect(call, name, value, seen)
        fn = inspect.unwrap(value) if callable(value) else None
        if not isinstance(fn, types.FunctionType) or fn.__module__ != self.module:
            if not self.strict or (name in _PURE_BUILTINS and self._is_builtin(name)):
                return None  # (lenient: a library's function taken to change nothing)
            if value is None:
                return call, f"calls {name}(), a function dplus cannot see into"
            return self._library_effect(call, name, value)
        if id(fn.__code__) in seen:
            return None  # (recursion: looked into already)
        seen.add(id(fn.__code__))
        tree = _parsed(fn)
        if tree is None:
            if self.strict:
                return call, f"calls {name}(), whose source dplus cannot read"
            return None
        found = _Effects({}, fn.__globals__, self.module, set(), self.strict).of(tree, seen)
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
