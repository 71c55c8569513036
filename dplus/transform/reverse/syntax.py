"""The syntax the reverse transform builds: operator tables, the prefix of generated names,
the helpers table and short constructors of AST nodes."""

from __future__ import annotations

import ast
import operator
from typing import Any

import attrs

from ..normalize.core import Core
from ..trees import walk

_NUM_TYPES = frozenset({float, int})


_POWERS = (operator.pow, operator.ipow, pow)


FAST_PATHS = [True]  # False: only the general path (transformer.general_paths_only, for tests)


_SEQ_TYPES = frozenset({list, tuple, dict})


# Names of generated variables start with PFX, chosen per transform so that it never occurs
# in the source being transformed (which may itself be generated code: derivatives of
# derivatives). Set by build_plus_function under the transformer's lock.
PFX = "_dp_"


ABOX = PUSH = POP = TAPE = ""


def _set_prefix(p: str) -> None:
    global PFX, ABOX, PUSH, POP, TAPE
    PFX = p
    ABOX, PUSH, POP, TAPE = p + "Abox", p + "push", p + "pop", p + "tape"


_set_prefix("_dp_")


def choose_prefix(names: set[str]) -> str:
    for c in "pqrstuvwxyz":
        p = f"_d{c}_"
        if not any(n.startswith(p) for n in names):
            return p
    i = 0
    while any(n.startswith(f"_dp{i}_") for n in names):
        i += 1
    return f"_dp{i}_"


BINOPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}


INPLACE: dict[type, Any] = {
    ast.Add: operator.iadd,
    ast.Sub: operator.isub,
    ast.Mult: operator.imul,
    ast.Div: operator.itruediv,
    ast.FloorDiv: operator.ifloordiv,
    ast.Mod: operator.imod,
    ast.Pow: operator.ipow,
    ast.MatMult: operator.imatmul,
    ast.LShift: operator.ilshift,
    ast.RShift: operator.irshift,
    ast.BitOr: operator.ior,
    ast.BitXor: operator.ixor,
    ast.BitAnd: operator.iand,
}


UNARYOPS: dict[type, Any] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}


class _NotReplayable(Exception):
    """A segment whose general variant cannot be a replayed program (see replay_plan)."""


class Helpers:
    """The values generated code refers to by name (bound as closure cells)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}
        self.templates: dict[Any, Any] = {}

    def ref(self, value: Any, hint: str) -> str:
        key = id(value)
        name = self._by_id.get(key)
        if name is not None and self.values[name] is value:
            return name
        base = PFX + "".join(c if c.isalnum() else "_" for c in hint)
        name = base
        i = 1
        while name in self.values and self.values[name] is not value:
            i += 1
            name = f"{base}{i}"
        self.values[name] = value
        self._by_id[key] = name
        return name


_TRY_STAR: tuple[type, ...] = (ast.TryStar,) if hasattr(ast, "TryStar") else ()


@attrs.frozen
class FastParts:
    """A segment's fast variant, in pieces: its leading unpacks, the type guard, the forward
    statements, the names its reverse reads, the reverse statements, and the copies back to
    the user's names, and the names the segment assigns."""

    lead: list[Core]
    guard: ast.expr
    fwd: list[ast.stmt]
    rec: list[str]
    rev: list[ast.stmt]
    copy_back: list[Core]
    defined: list[str]  # the names the segment assigns (after renaming)
    numbers: list[str] = attrs.field(factory=list)  # the names the guard tests for numbers
    checks: list[ast.expr] = attrs.field(
        factory=list
    )  # the guard's other tests (an inlined callee is still the one inlined)
    closed: frozenset[str] = (
        frozenset()
    )  # user names the segment leaves holding numbers when the guard held
    stores: bool = False  # whether the segment writes into a list (its reverse reads Abox)


_LOAD, _STORE = ast.Load(), ast.Store()  # stateless: shared by every generated name


def N(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=_LOAD)


def S(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=_STORE)


def C(v: Any) -> ast.Constant:
    return ast.Constant(value=v)


def assign(target: str | ast.expr, value: ast.expr) -> ast.Assign:
    t = S(target) if isinstance(target, str) else target
    return ast.Assign(targets=[t], value=value)


def call(fn: str | ast.expr, *args: ast.expr, keywords: list | None = None) -> ast.Call:
    f = N(fn) if isinstance(fn, str) else fn
    return ast.Call(func=f, args=list(args), keywords=keywords or [])


def attr(obj: str | ast.expr, name: str) -> ast.Attribute:
    o = N(obj) if isinstance(obj, str) else obj
    return ast.Attribute(value=o, attr=name, ctx=ast.Load())


def tuple_(elts: list[ast.expr]) -> ast.Tuple:
    return ast.Tuple(elts=elts, ctx=ast.Load())


def store_tuple(names: list[str]) -> ast.Tuple:
    """The target ``(a, b, ...)`` of an assignment or a ``for`` statement."""
    return ast.Tuple(elts=[S(n) for n in names], ctx=_STORE)


def unpack(names: list[str], value: ast.expr) -> ast.stmt:
    return assign(store_tuple(names), value)


def _is_atom(e: ast.AST | None) -> bool:
    return isinstance(e, (ast.Name, ast.Constant))


def _is_name(e: ast.AST, name: str | None) -> bool:
    return isinstance(e, ast.Name) and e.id == name


def _propagated_reads(st: ast.stmt) -> set[str]:
    """The names whose values a statement of reverse code carries into its result: all it
    reads, except the target's own value where the statement only adds to it."""
    target = (
        st.targets[0].id
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        else None
    )
    v = getattr(st, "value", None) if target is not None else None
    if (
        isinstance(v, ast.IfExp)
        and isinstance(v.test, ast.Compare)
        and _is_name(v.test.left, target)
        and isinstance(v.orelse, ast.BinOp)
        and isinstance(v.orelse.op, ast.Add)
        and _is_name(v.orelse.left, target)
    ):
        parts: list[ast.AST] = [
            v.test.comparators[0],
            v.body,
            v.orelse.right,
        ]  # a = c if a is Z else a + c
    elif isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and _is_name(v.left, target):
        parts = [v.right]  # a = a + c
    else:
        parts = [st]
    reads = {
        n.id
        for p in parts
        for n in walk(p)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    if parts[0] is not st and target in reads:  # c reads a itself: a propagates
        reads.add(target)
    return reads


def _names_read(node: ast.AST) -> list[str]:
    return [n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _is_number_const(e: ast.AST) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) in (int, float)


_NODE_FIELDS: dict[type[ast.AST], tuple[bool, tuple[str, ...]]] = {}


def _assigned_names(st: ast.stmt) -> list[str]:
    """The names a simple statement assigns (an assignment's name targets, a def's name)."""
    if isinstance(st, ast.FunctionDef):
        return [st.name]
    if isinstance(st, ast.Assign):
        t = st.targets[0]
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, (ast.Tuple, ast.List)):
            return [e.id for e in t.elts if isinstance(e, ast.Name)]
    return []


def _node_fields(t: type[ast.AST]) -> tuple[bool, tuple[str, ...]]:
    """Whether nodes of type ``t`` have positions, and their fields that may hold nodes."""
    entry = _NODE_FIELDS.get(t)
    if entry is None:
        entry = _NODE_FIELDS[t] = (
            "lineno" in t._attributes,
            tuple(
                f
                for f in t._fields
                if f not in ("ctx", "id", "arg", "attr", "name", "value")
                or (f == "value" and t is not ast.Constant)
            ),
        )
    return entry


def _locate(root: ast.AST, lineno: int) -> None:
    """Give every node without a position the line of the nearest enclosing node that has one.

    (Generated trees are large: a position is read from the node's ``__dict__``, where the
    ``ast`` module keeps it: ``getattr`` of a missing attribute is much slower.)"""
    stack: list[tuple[Any, int]] = [(root, lineno)]  # (Any: positions set where the type has them)
    pop, push = stack.pop, stack.append
    AST = ast.AST
    kinds = _NODE_FIELDS
    while stack:
        node, line = pop()
        positioned, fields = kinds.get(type(node)) or _node_fields(type(node))
        if positioned:
            d = node.__dict__
            own = d.get("lineno")
            if own is None:
                d["lineno"] = d["end_lineno"] = line
                d["col_offset"] = d["end_col_offset"] = 0
            else:
                line = own
        for f in fields:
            v = getattr(node, f, None)
            if type(v) is list:
                for c in v:
                    if isinstance(c, AST):
                        push((c, line))
            elif isinstance(v, AST):
                push((v, line))


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_STATEMENT_FIELDS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _locate_statements(root: ast.AST, lineno: int) -> None:
    """What :func:`_locate` does, for statements and exception handlers only: the code of a
    nestable build is compiled from its text, and only its statements' lines are read (the
    map from the text's lines to the source's, ``dplus.show``). A statement's enclosing
    nodes are statements, handlers and match cases, so each gets the line ``_locate``
    would give it, without a visit of every expression (most of the tree)."""
    stack: list[tuple[Any, int]] = [(root, lineno)]
    pop, push = stack.pop, stack.append
    kinds = _STATEMENT_FIELDS
    while stack:
        node, line = pop()
        entry = kinds.get(type(node))
        if entry is None:
            t = type(node)
            entry = kinds[t] = (
                "lineno" in t._attributes,
                tuple(f for f in _BLOCK_FIELDS if f in t._fields),
            )
        positioned, fields = entry
        d = node.__dict__
        if positioned:
            own = d.get("lineno")
            if own is None:
                d["lineno"] = d["end_lineno"] = line
                d["col_offset"] = d["end_col_offset"] = 0
            else:
                line = own
        for f in fields:
            for c in d.get(f) or ():
                push((c, line))


def _locate_all(stmts: list[ast.stmt], like: ast.AST) -> None:
    """Give statements without a position ``like``'s line; their insides get theirs from
    the single recursive pass over the whole function (``_locate`` in ``build``), as do
    these statements when ``like`` has no position of its own (a node the normaliser made)."""
    line = getattr(like, "lineno", None)
    if line is None:
        return
    for st in stmts:
        if getattr(st, "lineno", None) is None:
            st.lineno = st.end_lineno = line
            st.col_offset = st.end_col_offset = 0


def _gen_zero() -> Any:
    from ...runtime.linear import gen_zero

    return gen_zero


def _procresult() -> Any:
    from ...runtime.result import ProcResult

    return ProcResult


def _nondiff_error() -> Any:
    from ...errors import NonDifferentiableError

    return NonDifferentiableError


def _deletes_name(s: ast.stmt) -> bool:
    """Whether ``s`` is ``del name``: it starts a segment of its own, since a segment records
    the values it needs after all its statements ran, and the name is gone by then."""
    return isinstance(s, ast.Delete) and isinstance(s.targets[0], ast.Name)
