"""``grad`` in one generated function for small functions of vectors.

A body that is one float fast segment already gets ``f__grad`` (see
``FunctionBuilder.fused_gradient``): forward and reverse in one function, no record. Many
small numerical functions take their vectors as lists or tuples and read them at fixed
positions (``x, y, z = p``, ``q[0]``); each read is a runtime call in the reverse and
splits the arithmetic into segments. Here such a parameter is read once, on entry, into
one scalar per position read, and the function is differentiated as a function of those
scalars; the gradient of the parameter is a list (tuple) of its length, each position
holding the sum of its reads' sensitivities, zeros elsewhere::

    def rotate__grad(q, v):
        if type(q) is not list and type(q) is not tuple or len(q) != 4: return None
        ...                                  # (v likewise: each index in range)
        q_0, ... = q[0], ...                 # the positions read
        <the fused forward and reverse of the body, reading q_0, ...>
        gq = [0.0] * len(q); gq[0] += <sensitivity of q_0>; ...
        return (gq, gv)

A parameter qualifies when every read of it (and of names it is copied to, each bound
once) is an index that is an integer constant, or an unpacking into names; it is not
rebound. The lengths are tested on entry (an unpacking needs exactly as many elements, an
index must be in range), and the elements must be floats, so whatever fails there takes
the general way, which raises Python's own error or gives other kinds their own zeros.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import attrs

from .normalize.core import IRFunction, Namer
from .reverse.builder import FunctionBuilder
from .reverse.syntax import C, Helpers, N, assign, call
from .scalarize import name_counts, read_of
from .trees import clone, walk

__all__ = ["vector_fused_gradient"]


def vector_fused_gradient(
    ir: IRFunction,
    namer: Namer,
    helpers: Helpers,
    globals_: dict,
    outer_free: tuple[str, ...],
    const_names: set[str],
    specialized: Any,
) -> ast.FunctionDef | None:
    """``f__grad`` for ``ir`` with its vector parameters read into scalars, or None."""
    params = [a.arg for a in ir.args.args]
    if not all(isinstance(st, ast.Assign) and len(st.targets) == 1 for st in ir.body):
        return None
    stores, _, consts = name_counts(ir.body)
    vectors: dict[str, _Vector] = {}
    for p in params:
        v = _vector(p, ir.body, stores, consts)
        if v is not None:
            vectors[p] = v
    if not vectors:
        return None
    body = clone(ir.body)  # (rewritten below; the uses are keyed by ir.body's statements)
    for v in vectors.values():
        v.length_name, v.sens_name = namer.fresh(f"{v.name}_len"), namer.fresh(f"{v.name}_sens")
    # the body, reading scalars: each read becomes a copy of the scalar for its position
    scalars: list[str] = []
    new_body: list[ast.stmt] = []
    for original, st in zip(ir.body, body):
        key = id(original)
        use = next((v.uses[key] for v in vectors.values() if key in v.uses), None)
        if use is None:
            new_body.append(st)
            continue
        vec, kind, where = use
        if kind == "alias":
            continue
        # one scalar per position (the vector is not changed while the body runs: it only
        # does arithmetic), so the sensitivities of two reads of one position add up in it
        positions = [where] if kind == "index" else list(range(len(st.targets[0].elts)))
        targets = [st.targets[0].id] if kind == "index" else [e.id for e in st.targets[0].elts]
        for k, t in zip(positions, targets):
            s = vec.scalar_of.get(k)
            if s is None:
                s = vec.scalar_of[k] = namer.fresh(f"{vec.name}_{k}_".replace("-", "m"))
                vec.reads.append((k, s))
                scalars.append(s)
            new_body.append(ast.copy_location(assign(t, N(s)), st))
    plain = [p for p in params if p not in vectors]
    scalar_params = plain + scalars
    scope = attrs.evolve(
        ir.scope,
        params=scalar_params,
        assigned=(ir.scope.assigned - set(vectors)) | set(scalar_params),
    )
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in scalar_params],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
    ir2 = attrs.evolve(ir, body=new_body, args=args, scope=scope)
    b = FunctionBuilder(ir2, namer, helpers, globals_, top_level=True, outer_free=outer_free)
    b.const_names = set(const_names)
    b.specialized = specialized
    b.build()  # (only its analysis is used: the segments and the adjoint names)
    return b.fused_gradient(
        scalar_params,
        signature=params,
        prologue=_prologue(b, params, vectors),
        finish=_finish(b, params, vectors, scalar_params),
    )


@attrs.define
class _Vector:
    name: str
    length: int | None = None  # exact length an unpacking needs
    indexes: set[int] = attrs.field(factory=set)
    uses: dict[int, tuple[_Vector, str, Any]] = attrs.field(factory=dict)  # id(statement) -> use
    reads: list[tuple[int, str]] = attrs.field(factory=list)  # (position, scalar) in body order
    scalar_of: dict[int, str] = attrs.field(factory=dict)
    length_name: str = ""  # the generated code's names for its length and its sensitivity
    sens_name: str = ""


def _vector(
    p: str, body: list[ast.stmt], stores: dict[str, int], consts: dict[str, int]
) -> _Vector | None:
    """How the parameter ``p`` is read, when only at constant positions (else None)."""
    if stores.get(p):
        return None  # rebound
    v = _Vector(p)
    names = {p}
    loads = 0
    for st in body:
        loads += sum(
            1
            for n in walk(st)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
        )
        r = read_of(st, names, consts)
        if r is not None:
            kind, what = r
            if kind == "copy":
                if stores.get(what) != 1:
                    return None
                names.add(what)
                v.uses[id(st)] = (v, "alias", None)
            elif kind == "unpack":
                if v.length is not None and v.length != what:
                    return None  # (two unpackings of different lengths: one always fails)
                v.length = what
                v.uses[id(st)] = (v, "unpack", None)
            elif type(what) is int:  # (a string key: a dict, not a vector)
                v.indexes.add(what)
                v.uses[id(st)] = (v, "index", what)
        if loads > len(v.uses):
            return None  # read some other way too (each use is one read: it stays so)
    if loads != len(v.uses) or not any(kind != "alias" for _, kind, _ in v.uses.values()):
        return None  # read some other way too (or never read at a position)
    return v


def _prologue(b: FunctionBuilder, params: list[str], vectors: dict[str, _Vector]) -> list[ast.stmt]:
    """Type and length tests (None: the general way), then the scalars read from the vectors."""
    typ, flt = b.helper(type, "type"), b.helper(float, "float")
    lst, tup, length = b.helper(list, "list"), b.helper(tuple, "tuple"), b.helper(len, "len")
    fails: list[ast.expr] = []
    out: list[ast.stmt] = []
    for p in params:
        v = vectors.get(p)
        if v is None:
            fails.append(
                ast.Compare(
                    left=call(clone(typ), N(p)), ops=[ast.IsNot()], comparators=[clone(flt)]
                )
            )
            continue
        fails.append(
            ast.BoolOp(
                op=ast.And(),
                values=[
                    ast.Compare(
                        left=call(clone(typ), N(p)), ops=[ast.IsNot()], comparators=[clone(lst)]
                    ),
                    ast.Compare(
                        left=call(clone(typ), N(p)), ops=[ast.IsNot()], comparators=[clone(tup)]
                    ),
                ],
            )
        )
    out.append(
        ast.If(
            test=ast.BoolOp(op=ast.Or(), values=fails) if len(fails) > 1 else fails[0],
            body=[ast.Return(value=C(None))],
            orelse=[],
        )
    )
    for p, v in vectors.items():
        n = v.length_name
        out.append(assign(n, call(clone(length), N(p))))
        # an unpacking needs exactly its length; an index k, -n <= k < n
        need = max((k + 1 if k >= 0 else -k for k in v.indexes), default=0)
        if v.length is not None:
            test: ast.expr | None = ast.Compare(
                left=N(n), ops=[ast.NotEq()], comparators=[C(v.length)]
            )
            if need > v.length:
                test = C(True)  # (an index past the unpacked length: one of them always fails)
        else:
            test = ast.Compare(left=N(n), ops=[ast.Lt()], comparators=[C(need)]) if need else None
        if test is not None:
            out.append(ast.If(test=test, body=[ast.Return(value=C(None))], orelse=[]))
        for k, s in v.reads:
            out.append(assign(s, ast.Subscript(value=N(p), slice=C(k), ctx=ast.Load())))
        # floats only, as the general way would give an unread int its own zero, 0
        not_floats: list[ast.expr] = [
            ast.Compare(left=call(clone(typ), N(s)), ops=[ast.IsNot()], comparators=[clone(flt)])
            for _, s in v.reads
        ]
        if len(v.reads) < (v.length or 0) or v.length is None:  # positions not read: all of them
            not_floats.append(
                ast.UnaryOp(
                    op=ast.Not(),
                    operand=call(
                        ast.Attribute(
                            value=b.helper(frozenset({float}), "FLOATS"),
                            attr="issuperset",
                            ctx=ast.Load(),
                        ),
                        call(b.helper(map, "map"), clone(typ), N(p)),
                    ),
                )
            )
        out.append(
            ast.If(
                test=ast.BoolOp(op=ast.Or(), values=not_floats)
                if len(not_floats) > 1
                else not_floats[0],
                body=[ast.Return(value=C(None))],
                orelse=[],
            )
        )
    return out


def _finish(
    b: FunctionBuilder, params: list[str], vectors: dict[str, _Vector], scalar_params: list[str]
) -> Callable[[list[ast.expr]], list[ast.stmt]]:
    """The statements that return the parameters' sensitivities from the scalars'."""
    tup = b.helper(tuple, "tuple")

    def finish(sens: list[ast.expr]) -> list[ast.stmt]:
        of = dict(zip(scalar_params, sens))
        out: list[ast.stmt] = []
        result: list[ast.expr] = []
        for p in params:
            v = vectors.get(p)
            if v is None:
                result.append(of[p])
                continue
            g = v.sens_name
            out.append(
                assign(
                    g,
                    ast.BinOp(
                        left=ast.List(elts=[C(0.0)], ctx=ast.Load()),
                        op=ast.Mult(),
                        right=N(v.length_name),
                    ),
                )
            )
            for k, s in v.reads:
                out.append(
                    ast.AugAssign(
                        target=ast.Subscript(value=N(g), slice=C(k), ctx=ast.Store()),
                        op=ast.Add(),
                        value=of[s],
                    )
                )
            # a tuple's sensitivity is a tuple
            out.append(
                ast.If(
                    test=ast.Compare(
                        left=call(b.helper(type, "type"), N(p)),
                        ops=[ast.Is()],
                        comparators=[clone(tup)],
                    ),
                    body=[assign(g, call(clone(tup), N(g)))],
                    orelse=[],
                )
            )
            result.append(N(g))
        out.append(ast.Return(value=ast.Tuple(elts=result, ctx=ast.Load())))
        return out

    return finish
