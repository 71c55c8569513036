"""The core language's vocabulary: the tables of builtins, ``Namer``, ``IRFunction`` and
the small constructors every form uses."""

from __future__ import annotations

import ast
import builtins
import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from ..scopes import Scope

Atom = ast.Name | ast.Constant

# A node of the core language that normalize (and the passes after it) annotate: ``dp_op``,
# ``dp_live``, ``dp_kind``, ``dp_unpack``, ...; ast's classes do not declare those attributes,
# so such a node is typed Any where they are written or read.
Core = Any


# builtins registered as non-differentiable (primitives/builtins.py) that generated code calls directly
_NONDIFF_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "range",
        "len",
        "isinstance",
        "issubclass",
        "type",
        "bool",
        "any",
        "all",
        "id",
        "hash",
        "repr",
        "str",
        "callable",
        "hasattr",
        "ord",
        "chr",
        "int",
    )
}


_FRESH_LIST_BUILTINS = {
    name: getattr(builtins, name)
    for name in ("zip", "enumerate", "map", "filter", "reversed", "sorted")
}


_TUPLE_ITEM_BUILTINS = {name: getattr(builtins, name) for name in ("zip", "enumerate")}


_ZIP = {"zip": builtins.zip}


# builtins that see the caller's namespace (normalize gives them the user's)
_INTROSPECTION_BUILTINS = {
    name: getattr(builtins, name) for name in ("locals", "vars", "dir", "globals", "eval", "exec")
}


UNBOUND = "<dplus: a variable not bound yet>"  # (a constant in generated code: a str)


# lazy in Python: a loop over them sees the writes its body makes into the lists they read
_LIVE_BUILTINS = {name: getattr(builtins, name) for name in ("zip", "enumerate", "reversed")}


_LIVE_CALLERS = {name: getattr(builtins, name) for name in ("map", "filter")}


# builtins whose result is a new container that only the expression holds: a lazy builtin
# over it cannot see a change the loop body makes (no name reaches it)
_SNAPSHOT_BUILTINS = {
    name: getattr(builtins, name) for name in ("sorted", "list", "tuple", "range")
}


# calls that cannot write into a list: builtins and functions of these modules, by their names
_PURE_BUILTINS = {
    "abs",
    "min",
    "max",
    "sum",
    "len",
    "range",
    "float",
    "int",
    "round",
    "pow",
    "divmod",
    "isinstance",
    "bool",
    "str",
    "repr",
    "type",
    "print",
    "complex",
    "any",
    "all",
    "hash",
    "id",
}


_PURE_MODULES = {"math", "cmath"}


class Namer:
    """Fresh names that cannot collide with the user's.

    The names of fast segments' general variants are drawn apart (:meth:`apart`), from a
    counter of their own and ending in ``g`` (``_rec4g``) where every other name ends in its
    number: a build without the general variants (``FunctionBuilder.defer_general``) names
    everything else as the full build does."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.generated: set[str] = set()
        self.counter = itertools.count(1)
        self._apart_counter = itertools.count(1)
        self._suffix = ""

    def fresh(self, hint: str = "") -> str:
        while True:
            name = f"_{hint}{next(self.counter)}{self._suffix}"
            if name not in self.taken:
                self.taken.add(name)
                self.generated.add(name)
                return name

    @contextlib.contextmanager
    def apart(self) -> Iterator[None]:
        """Names drawn inside come from the general variants' own counter."""
        if self._suffix:  # (already apart)
            yield
            return
        main = self.counter
        self.counter, self._suffix = self._apart_counter, "g"
        try:
            yield
        finally:
            self.counter, self._suffix = main, ""


@attrs.define
class IRFunction:
    name: str
    args: ast.arguments  # the user's parameters (defaults are atoms of the enclosing scope)
    body: list[ast.stmt]
    scope: Scope
    retval: str
    filename: str
    lineno: int
    children: list[IRFunction] = attrs.field(factory=list)
    is_lambda: bool = False
    boxed: set[str] = attrs.field(factory=set)
    ret_flag: str | None = None
    outer_boxed: set[str] = attrs.field(
        factory=set
    )  # boxed variables owned by an enclosing function
    qualname: str = ""  # the user's ``__qualname__`` of the function (``f.<locals>.inner``)


def closure_reads(fdef: ast.AST) -> list[str]:
    """The enclosing function's names that a nested function of the core reads: the
    variables it (or a function inside it) closes over, and the atoms its default values
    are. Its ``def`` statement holds no body, so walking it finds none of them."""
    if not hasattr(fdef, "dp_ir"):
        return []
    defaults = list(getattr(fdef, "dp_defaults", [])) + [
        d for d in getattr(fdef, "dp_kw_defaults", []) if d is not None
    ]
    return sorted(fdef.dp_ir.scope.free) + [d.id for d in defaults if isinstance(d, ast.Name)]


@attrs.define
class _LoopCtx:
    esc: Any  # (str | None) set when the rest of the iteration must be skipped
    brk: Any  # (str | None) set when the loop must stop; a str wherever it is assigned
    broke: str | None  # set by a break statement (for loop else)


def _name(id_: str, ctx: ast.expr_context | None = None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _const(v: Any) -> ast.Constant:
    return ast.Constant(value=v)


def _internal(op: str, args: list[ast.expr]) -> ast.Call:
    """A call of one of the transformer's own operations (its callee is not a user name)."""
    node: Core = ast.Call(func=ast.Constant(value=op), args=args, keywords=[])
    node.dp_op = op
    return node


_OP_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}


def _parenthesized(e: ast.expr) -> str:
    """The source of ``e`` as the right operand of a binary operator."""
    text = ast.unparse(e)
    return (
        f"({text})"
        if isinstance(e, (ast.BinOp, ast.BoolOp, ast.IfExp, ast.Compare, ast.Lambda, ast.NamedExpr))
        else text
    )


def _assign(target: str, value: ast.expr, like: ast.AST) -> ast.Assign:
    node = ast.Assign(targets=[_name(target, ast.Store())], value=value)
    return ast.copy_location(node, like)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


_LOOPS = (ast.For, ast.While, ast.AsyncFor)


def _contains_escape(stmts: Sequence[ast.AST], loops_too: bool = True) -> tuple[bool, bool]:
    """(has break/continue reaching this level, has return) in ``stmts``.

    Only statement lists are searched (these statements hold no expressions); a loop's
    body is inside the loop, its ``else`` clause is not (a ``break`` there leaves the
    loop around it)."""
    brk = ret = False
    todo = [(s, False) for s in stmts]
    while todo:
        node, in_loop = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Return):
            ret = True
        elif isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            brk = True
        inner = in_loop or isinstance(node, _LOOPS)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if block:
                here = in_loop if field == "orelse" else inner
                todo.extend((c, here) for c in block)
    return brk, ret


def _may_escape(stmt: ast.AST) -> bool:
    b, r = _contains_escape([stmt], True)
    return b or r
