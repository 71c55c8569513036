"""A ``class`` statement inside a differentiated function, rewritten into the statements
that build the class, so that its body is differentiated as the function's own code.

Python runs a class body in a namespace of its own and then calls the metaclass with it.
Here the body's statements run in the enclosing function: a name the body binds is an
entry of a dict, the namespace (``k = x * 2`` becomes ``ns['k'] = x * 2``, read back as
``ns['k']``: a dict, so values carry their sensitivities); a method is a nested ``def``
(a plus-function, which closes over the function's variables as any nested function does)
stored in the namespace; then an operation builds the class from the namespace as Python
does (``__prepare__``, the metaclass, ``__init_subclass__``, ``__set_name__``) and the
decorators are applied to it::

    class P(Base):                  _b = (Base,)
        k = x * 2                   ns = {'__module__': ..., '__qualname__': 'f.<locals>.P'}
        def g(self):        ->      ns['k'] = x * 2
            return super().g() * x  def g(self):
                                        return super(<P>, self).g() * x
                                    ns['g'] = g
                                    P = build_class('P', _b, ns, {})
                                    <P> = P

``super()`` and ``__class__`` in a method read a variable the statement assigns after the
class is built (Python's ``__class__`` cell). The nested functions of the class body are
marked (``dp_method``): every variable of the function they close over is kept in a cell
(boxed), so the sensitivity of a value a method reads reaches the variable through the
box-sensitivity map, wherever the method is called from (an operator, a property, code
dplus does not differentiate). What a class body may not contain (``global``,
``nonlocal``, ``import``, ``:=``, ``yield``) is refused, naming it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..scopes import METHOD_NAME_HINT
from ..trees import child_nodes

__all__ = ["ClassStatement", "ClassSyntaxError", "mark_functions_set_as_attributes"]

_Node = TypeVar("_Node", bound=ast.AST)


class ClassSyntaxError(Exception):
    def __init__(self, node: ast.AST, what: str, fix: str) -> None:
        super().__init__(what)
        self.node = node
        self.what = what
        self.fix = fix


def _bound_in_class(body: list[ast.stmt]) -> set[str]:
    """The names a class body binds in its own namespace."""
    out: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            todo.extend(n.decorator_list)
            if isinstance(n, ast.ClassDef):
                todo.extend(n.bases)
                todo.extend(k.value for k in n.keywords)
            else:
                todo.extend(n.args.defaults)
                todo.extend(d for d in n.args.kw_defaults if d is not None)
            continue
        if isinstance(n, ast.Lambda):
            todo.extend(n.args.defaults)
            continue
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            todo.append(n.generators[0].iter)
            continue
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return out


class _Method(ast.NodeTransformer):
    """Inside a method: ``super()`` -> ``super(<cell>, <first parameter>)``, ``__class__`` ->
    ``<cell>`` (only in the method's own scope, as Python's ``__class__`` cell)."""

    def __init__(self, cell: str, first: str | None) -> None:
        self.cell = cell
        self.first = first

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "__class__" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name(id=self.cell, ctx=ast.Load()), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "super"
            and not node.args
            and not node.keywords
            and self.first is not None
        ):
            node.args = [
                ast.Name(id=self.cell, ctx=ast.Load()),
                ast.Name(id=self.first, ctx=ast.Load()),
            ]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        # a function inside the method: its own super() has no __class__ of its own in Python
        # either, but __class__ still names the cell (it is a free variable there)
        inner = _Method(self.cell, None)
        node.body = [inner.visit(s) for s in node.body]
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node  # (its own __class__)


def _first_param(args: ast.arguments) -> str | None:
    ps = args.posonlyargs + args.args
    if ps:
        return ps[0].arg
    if args.vararg:
        return args.vararg.arg
    return None


class ClassStatement:
    """Rewrite one ``class`` statement (see the module's docstring).

    ``fresh(hint)`` makes a name no user code uses; ``op(name, args)`` makes the call of
    ``build_class``; ``qualname`` is the class's ``__qualname__``; ``module`` its module's
    name; ``string_annotations``: the module has ``from __future__ import annotations``."""

    def __init__(
        self,
        node: ast.ClassDef,
        fresh: Callable[[str], str],
        op: Callable[[str, list[ast.expr]], ast.expr],
        qualname: str,
        module: str,
        string_annotations: bool,
    ) -> None:
        self.node = node
        self.fresh = fresh
        self.op = op
        self.qualname = qualname
        self.module = module
        self.string_annotations = string_annotations
        self.ns = fresh(node.name.strip("_")[:12] + "_ns")
        self.cell = fresh(node.name.strip("_")[:12] + "_class")
        self.names = _bound_in_class(node.body)
        # names the body has surely bound in its namespace by the statement being rewritten
        # (a read of another name the class binds looks in the namespace, then the module)
        self.surely_bound: set[str] = set()
        self.deleted = {
            t.id
            for n in ast.walk(node)
            if isinstance(n, ast.Delete)
            for t in n.targets
            if isinstance(t, ast.Name)
        }

    def N(self, name: str) -> ast.Name:
        return ast.Name(id=name, ctx=ast.Load())

    def S(self, name: str) -> ast.Name:
        return ast.Name(id=name, ctx=ast.Store())

    def entry(self, name: str, ctx: ast.expr_context) -> ast.Subscript:
        return ast.Subscript(value=self.N(self.ns), slice=ast.Constant(name), ctx=ctx)

    def store(self, name: str, value: ast.expr) -> ast.Assign:
        return ast.Assign(targets=[self.entry(name, ast.Store())], value=value)

    def read(self, name: str) -> ast.expr:
        """A read of ``name``, which the class binds, in class-level code: as Python's, the
        namespace's entry if it has one, else the module's global (or builtin), never a
        variable of the enclosing function (``class C: x = x + 1``)."""
        if name in self.surely_bound:
            return self.entry(name, ast.Load())
        module_read: Any = ast.Subscript(
            value=ast.Call(func=self.N("globals"), args=[], keywords=[]),
            slice=ast.Constant(name),
            ctx=ast.Load(),
        )
        module_read.dp_global = True  # (the builtins, or NameError, as Python's)
        return ast.IfExp(
            test=ast.Compare(
                left=ast.Constant(name), ops=[ast.In()], comparators=[self.N(self.ns)]
            ),
            body=self.entry(name, ast.Load()),
            orelse=module_read,
        )

    def rewrite(self) -> list[ast.stmt]:
        node = self.node
        out: list[ast.stmt] = []
        decorators = []
        for d in node.decorator_list:  # (evaluated first, as Python does)
            t = self.fresh("decorator")
            out.append(ast.Assign(targets=[self.S(t)], value=d))
            decorators.append(t)
        bases = self.fresh("bases")
        out.append(
            ast.Assign(
                targets=[self.S(bases)], value=ast.Tuple(elts=list(node.bases), ctx=ast.Load())
            )
        )
        kw = self.fresh("keywords")
        out.append(
            ast.Assign(
                targets=[self.S(kw)],
                value=ast.Dict(
                    keys=[
                        ast.Constant(k.arg) if k.arg is not None else None for k in node.keywords
                    ],
                    values=[k.value for k in node.keywords],
                ),
            )
        )
        out.append(
            ast.Assign(
                targets=[self.S(self.ns)],
                value=ast.Dict(
                    keys=[ast.Constant("__module__"), ast.Constant("__qualname__")],
                    values=[ast.Constant(self.module), ast.Constant(self.qualname)],
                ),
            )
        )
        body = list(node.body)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            out.append(self.store("__doc__", body[0].value))
            body = body[1:]
        if any(isinstance(s, ast.AnnAssign) for s in body):
            out.append(self.store("__annotations__", ast.Dict(keys=[], values=[])))
        for st in body:
            binds = _binds_surely(st) - self.deleted  # (before the statement is rewritten)
            out.extend(self.statement(st))
            self.surely_bound |= binds
        built = self.op(
            "build_class",
            [ast.Constant(node.name), self.N(bases), self.N(self.ns), self.N(kw)],
        )
        out.append(ast.Assign(targets=[self.S(self.cell)], value=built))
        result: ast.expr = self.N(self.cell)
        for decorator in reversed(decorators):
            result = ast.Call(func=self.N(decorator), args=[result], keywords=[])
        out.append(ast.Assign(targets=[self.S(node.name)], value=result))
        for s in out:
            ast.copy_location(s, node)
        for s in out:
            for n in ast.walk(s):
                if "lineno" in getattr(n, "_attributes", ()) and not hasattr(n, "lineno"):
                    ast.copy_location(n, node)
        return out

    # ---------------------------------------------------------------- class-level statements
    def names_to_entries(self, node: _Node) -> _Node:
        """Names the class binds, read or written in class-level code, become namespace entries."""
        return cast(_Node, _ToEntries(self).visit(node))

    def statement(self, st: ast.stmt) -> list[ast.stmt]:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(st, ast.AsyncFunctionDef):
                raise ClassSyntaxError(st, "an async method", "")
            return self.method(st)
        if isinstance(st, ast.ClassDef):
            inner = ClassStatement(
                st,
                self.fresh,
                self.op,
                f"{self.qualname}.{st.name}",
                self.module,
                self.string_annotations,
            )
            inner.node.decorator_list = [self.names_to_entries(d) for d in st.decorator_list]
            inner.node.bases = [self.names_to_entries(b) for b in st.bases]
            stmts = inner.rewrite()
            # (its last statement binds its name: in this namespace, an entry)
            last = stmts[-1]
            assert isinstance(last, ast.Assign)
            stmts[-1] = ast.copy_location(self.store(st.name, last.value), last)
            return stmts
        if isinstance(st, (ast.Global, ast.Nonlocal)):
            raise ClassSyntaxError(
                st, f"a {type(st).__name__.lower()} statement in a class body", ""
            )
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            raise ClassSyntaxError(st, "an import in a class body", "import at module level")
        if isinstance(st, ast.AnnAssign):
            if not isinstance(st.target, ast.Name):
                new = (
                    [ast.copy_location(ast.Assign(targets=[st.target], value=st.value), st)]
                    if st.value
                    else []
                )
                return [self.names_to_entries(s) for s in new]
            ann: ast.expr = (
                ast.Constant(ast.unparse(st.annotation))
                if self.string_annotations
                else self.names_to_entries(st.annotation)
            )
            out: list[ast.stmt] = []
            if st.value is not None:
                out.append(
                    ast.copy_location(self.store(st.target.id, self.names_to_entries(st.value)), st)
                )
            out.append(
                ast.copy_location(
                    ast.Assign(
                        targets=[
                            ast.Subscript(
                                value=self.entry("__annotations__", ast.Load()),
                                slice=ast.Constant(st.target.id),
                                ctx=ast.Store(),
                            )
                        ],
                        value=ann,
                    ),
                    st,
                )
            )
            return out
        for n in ast.walk(st):
            if isinstance(n, ast.NamedExpr):
                raise ClassSyntaxError(n, "an assignment expression (:=) in a class body", "")
        if isinstance(st, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.Match)):
            return [self.compound(st)]
        return [self.names_to_entries(st)]

    def compound(self, st: ast.stmt) -> ast.stmt:
        """A compound statement of the class body: its expressions and its blocks rewritten."""
        for field in ("test", "iter", "target", "subject"):
            value = getattr(st, field, None)
            if isinstance(value, ast.AST):
                setattr(st, field, self.names_to_entries(value))
        for item in getattr(st, "items", []) or []:
            item.context_expr = self.names_to_entries(item.context_expr)
            if item.optional_vars is not None:
                item.optional_vars = self.names_to_entries(item.optional_vars)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(st, field, None)
            if isinstance(block, list) and block:
                setattr(st, field, [r for s in block for r in self.statement(s)] or [ast.Pass()])
        for h in getattr(st, "handlers", []) or []:
            if h.name:
                raise ClassSyntaxError(h, "an except clause binding a name in a class body", "")
            if h.type is not None:
                h.type = self.names_to_entries(h.type)
            h.body = [r for s in h.body for r in self.statement(s)] or [ast.Pass()]
        for c in getattr(st, "cases", []) or []:
            if any(
                isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name for n in ast.walk(c.pattern)
            ):
                raise ClassSyntaxError(c.pattern, "a match capture in a class body", "")
            if c.guard is not None:
                c.guard = self.names_to_entries(c.guard)
            c.body = [r for s in c.body for r in self.statement(s)] or [ast.Pass()]
        return st

    def method(self, st: ast.FunctionDef) -> list[ast.stmt]:
        name = self.fresh(METHOD_NAME_HINT + st.name.strip("_")[:16])
        decorators = [self.names_to_entries(d) for d in st.decorator_list]
        args = st.args
        args.defaults = [self.names_to_entries(d) for d in args.defaults]
        args.kw_defaults = [
            self.names_to_entries(d) if d is not None else None for d in args.kw_defaults
        ]
        body = [_Method(self.cell, _first_param(args)).visit(s) for s in st.body]
        fn = ast.FunctionDef(
            name=name,
            args=args,
            body=body,
            decorator_list=decorators,
            returns=None,
            type_comment=None,
        )
        ast.copy_location(fn, st)
        # (boxed captures; its name and __qualname__)
        setattr(fn, "dp_method", (self.qualname, st.name))  # noqa: B010
        return [fn, ast.copy_location(self.store(st.name, self.N(name)), st)]


class _ToEntries(ast.NodeTransformer):
    """Names of the class namespace in class-level code -> ``ns['name']``; lambdas there are
    marked as methods are (their captures boxed); nested scopes see the function's names."""

    def __init__(self, cls: ClassStatement) -> None:
        self.cls = cls

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.cls.names:
            if isinstance(node.ctx, ast.Load):
                return _located(self.cls.read(node.id), node)
            return ast.copy_location(self.cls.entry(node.id, node.ctx), node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        if not (isinstance(node.target, ast.Name) and node.target.id in self.cls.names):
            return self.generic_visit(node)
        # (``n += v``: Python reads ``n`` as any class-level read, then stores the entry)
        name = node.target.id
        value = ast.BinOp(left=self.cls.read(name), op=node.op, right=self.visit(node.value))
        return _located(self.cls.store(name, value), node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [
            self.visit(d) if d is not None else None for d in node.args.kw_defaults
        ]
        setattr(node, "dp_method", (self.cls.qualname, "<lambda>"))  # noqa: B010
        return node

    def _comprehension(self, node: Any) -> ast.AST:
        # only the first iterable is evaluated in the class scope
        node.generators[0].iter = self.visit(node.generators[0].iter)
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _located(new: _Node, old: ast.AST) -> _Node:
    for n in ast.walk(new):
        if "lineno" in getattr(n, "_attributes", ()):
            ast.copy_location(n, old)
    return new


def _binds_surely(st: ast.stmt) -> set[str]:
    """The names a class-level statement binds whenever it completes (a plain assignment to
    names, a def, a class); compound statements count for nothing."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {st.name}
    if isinstance(st, ast.AnnAssign) and st.value is not None and isinstance(st.target, ast.Name):
        return {st.target.id}
    if isinstance(st, (ast.Assign, ast.AugAssign)):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        out: set[str] = set()
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    out.add(n.id)
        return out
    return set()


def _set_as_attribute(n: ast.AST) -> ast.expr | None:
    """The value ``n`` stores as an attribute (``obj.name = v``, ``setattr(obj, name, v)``)."""
    if isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) for t in n.targets):
        return n.value
    if (
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "setattr"
        and len(n.args) == 3
    ):
        return n.args[2]
    return None


def mark_functions_set_as_attributes(node: ast.FunctionDef | ast.Lambda) -> None:
    """Mark (``dp_escapes_as_method``) the nested functions inside ``node`` that are set as
    an attribute (``T.m = lambda self: ...``, ``T.m = m`` of a nested ``def m``): set on a
    class, such a function is a method, called from wherever the class is used, so what it
    reads of the enclosing function is kept in cells, as for a method of a class statement.

    A ``def m`` counts when it is in the body of the same function (``def`` or lambda) as
    the statement that sets it, not inside a class or another function there. One walk
    of the tree, each node with the function whose body holds it (0: none, as in a class
    body or a function's defaults)."""
    defs: dict[tuple[int, str], list[ast.FunctionDef]] = {}
    values: list[tuple[int, ast.expr]] = []  # (owner, the value set as an attribute)
    todo: list[tuple[ast.AST, int]] = []
    _enter_function(node, todo)
    while todo:
        n, owner = todo.pop()
        if owner:
            if isinstance(n, ast.FunctionDef):
                defs.setdefault((owner, n.name), []).append(n)
            value = _set_as_attribute(n)
            if value is not None:
                values.append((owner, value))
        if isinstance(n, (ast.FunctionDef, ast.Lambda)):
            _enter_function(n, todo)
        else:
            inner = 0 if isinstance(n, (ast.AsyncFunctionDef, ast.ClassDef)) else owner
            todo.extend((c, inner) for c in child_nodes(n))
    for owner, value in values:
        if isinstance(value, ast.Lambda):
            setattr(value, "dp_escapes_as_method", True)  # noqa: B010
        elif isinstance(value, ast.Name):
            for d in defs.get((owner, value.id), ()):
                setattr(d, "dp_escapes_as_method", True)  # noqa: B010


def _enter_function(fn: ast.FunctionDef | ast.Lambda, todo: list[tuple[ast.AST, int]]) -> None:
    """Queue ``fn``'s body as its own, and its other parts (parameters, defaults,
    decorators) as in no function's body."""
    todo.extend((c, id(fn)) for c in (fn.body if isinstance(fn.body, list) else [fn.body]))
    todo.append((fn.args, 0))
    if isinstance(fn, ast.FunctionDef):
        todo.extend((c, 0) for c in fn.decorator_list)
        if fn.returns is not None:
            todo.append((fn.returns, 0))
