"""Nested ``def`` and ``lambda``, comprehensions and generator expressions."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from ..trees import walk
from .core import Atom, Core, _assign, _name
from .rewrites import _Renamer

if TYPE_CHECKING:
    from .normalizer_type import NormalizerState
else:
    NormalizerState = object  # (the mixins' shared interface, for the type checker only)


class FunctionForms(NormalizerState):
    """Methods of :class:`Normalizer`: nested ``def`` and ``lambda``, comprehensions and generator expressions."""

    def s_FunctionDef(self, s: ast.FunctionDef) -> None:
        decorators = [self.expr(d) for d in s.decorator_list]  # (evaluated first, as Python does)
        defaults = [self.expr(d) for d in s.args.defaults]
        kw_defaults = [self.expr(d) if d is not None else None for d in s.args.kw_defaults]
        self.nested_function(s, s.name, s.body, defaults, kw_defaults, False)
        # a decorator is a call applied to the plus-function, the nearest first
        for decorator in reversed(decorators):
            decorated = self.temp(
                ast.Call(func=decorator, args=[self.load_name(s.name, s)], keywords=[]), s
            )
            self.emit_assign_name(s.name, decorated, s)

    def e_Lambda(self, e: ast.Lambda) -> Atom:
        name = self.namer.fresh("lambda")
        defaults = [self.expr(d) for d in e.args.defaults]
        kw_defaults = [self.expr(d) if d is not None else None for d in e.args.kw_defaults]
        body: list[ast.stmt] = [ast.copy_location(ast.Return(value=e.body), e.body)]
        self.nested_function(e, name, body, defaults, kw_defaults, True)
        return _name(name)

    def comprehension(
        self, e: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, kind: str
    ) -> Atom:
        result = self.namer.fresh("comp")
        init: Core = {
            "list": ast.List(elts=[], ctx=ast.Load()),
            "set": ast.Set(elts=[]),
            "dict": ast.Dict(keys=[], values=[]),
        }[kind]
        if kind == "set":
            init = ast.Call(func=_name("set"), args=[], keywords=[])
            init.dp_builtin = True
        self.emit(_assign(result, init, e))
        # rename the comprehension's own variables so they do not leak
        renames: dict[str, str] = {}
        for gen in e.generators:
            for n in walk(gen.target):
                if isinstance(n, ast.Name):
                    renames.setdefault(n.id, self.namer.fresh(n.id.strip("_")[:8] + "_"))
        e = _Renamer(renames).visit(e)
        for node in walk(e):
            if isinstance(node, (ast.Lambda, ast.FunctionDef)):
                used = {n.id for n in walk(node) if isinstance(n, ast.Name)}
                # closures made in a comprehension see its variable late-bound, as Python does
                self.boxed.update(v for v in renames.values() if v in used)
                rewritten: Core = node
                rewritten.dp_reanalyse = True

        # the first iterable is evaluated in the enclosing scope, the rest per iteration
        loops = self._comp_loops(e, 0, kind, result)
        self.stmts(loops)
        return _name(result)

    def _comp_loops(self, e: Any, i: int, kind: str, result: str) -> list[ast.stmt]:
        gen = e.generators[i]
        body: list[ast.stmt] = []
        if i + 1 < len(e.generators):
            body = self._comp_loops(e, i + 1, kind, result)
        elif kind == "dict":
            store: Core = ast.copy_location(
                ast.Subscript(value=_name(result), slice=e.key, ctx=ast.Store()), e
            )
            store.dp_comp_result = True
            body = [ast.copy_location(ast.Assign(targets=[store], value=e.value), e)]
        else:
            meth = "append" if kind == "list" else "add"
            call: Core = ast.copy_location(
                ast.Call(
                    func=ast.copy_location(
                        ast.Attribute(value=_name(result), attr=meth, ctx=ast.Load()), e
                    ),
                    args=[e.elt],
                    keywords=[],
                ),
                e,
            )
            call.dp_comp_result = (
                True  # (into the comprehension's own new result: not a write the loop can see)
            )
            body = [ast.copy_location(ast.Expr(value=call), e)]
        for cond in reversed(gen.ifs):
            body = [ast.copy_location(ast.If(test=cond, body=body, orelse=[]), cond)]
        return [
            ast.copy_location(
                ast.For(target=gen.target, iter=gen.iter, body=body, orelse=[], type_comment=None),
                e,
            )
        ]

    def e_ListComp(self, e: ast.ListComp) -> Atom:
        return self.comprehension(e, "list")

    def e_GeneratorExp(self, e: ast.GeneratorExp) -> Atom:
        return self.comprehension(e, "list")

    def e_SetComp(self, e: ast.SetComp) -> Atom:
        return self.comprehension(e, "set")

    def e_DictComp(self, e: ast.DictComp) -> Atom:
        return self.comprehension(e, "dict")
