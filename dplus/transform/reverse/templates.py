"""Inline rules as templates: a rule's gradient lambdas parsed once, to be copied into
float fast paths."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from ...rules import InlineRule
from ..trees import clone, substituted
from .syntax import C, Helpers, N, _names_read


class _ResolveChains(ast.NodeTransformer):
    def __init__(self, globals_: dict, params: set[str], helpers: Helpers) -> None:
        self.globals = globals_
        self.params = params
        self.helpers = helpers

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        parts = []
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            parts.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name) and root.id not in self.params and root.id in self.globals:
            import types as _types

            obj = self.globals[root.id]
            if isinstance(obj, _types.ModuleType):
                for p in reversed(parts):
                    obj = getattr(obj, p)
                return ast.copy_location(
                    ast.Name(id=self.helpers.ref(obj, parts[0]), ctx=ast.Load()), node
                )
        return self.generic_visit(node)


class Template:
    """A rule's gradient lambda as an expression with holes for A, r and the arguments."""

    def __init__(self, fn: Callable, helpers: Helpers) -> None:
        parsed = _PARSED_TEMPLATES.get(fn)
        if parsed is None:
            parsed = _PARSED_TEMPLATES[fn] = _parse_template(fn)
        self.params, body, refs = parsed
        # the values the template refers to, under this build's names for them
        rename: dict[str, ast.expr] = {}
        for name, (value, hint) in refs.items():
            mine = helpers.ref(value, hint)
            if mine != name:
                rename[name] = N(mine)
        self.body = substituted(body, rename) if rename else body
        self.uses = set(_names_read(self.body))

    def instantiate(self, mapping: dict[str, ast.expr]) -> ast.expr:
        return substituted(self.body, mapping)


class _RecordingHelpers(Helpers):
    """Helpers that remember the hint each name was made from."""

    def __init__(self) -> None:
        super().__init__()
        self.hints: dict[str, str] = {}

    def ref(self, value: Any, hint: str) -> str:
        name = super().ref(value, hint)
        self.hints[name] = hint
        return name


def _parse_template(fn: Callable) -> tuple[list[str], ast.expr, dict[str, tuple[Any, str]]]:
    """A gradient lambda's parameters, its body with every free name and module chain
    (``math.cos``) replaced by a helper name, and each helper name's ``(value, hint)``.
    Parsed once per lambda: each build renames the helpers to its own names."""
    from ..source import function_source

    node = function_source(fn).node
    if not isinstance(node, ast.Lambda):
        raise ValueError("inline gradients must be lambdas")
    params = [a.arg for a in node.args.args]
    helpers = _RecordingHelpers()
    # dotted names of modules (math.cos) become the objects themselves: no lookups at run time
    body = _ResolveChains(fn.__globals__, set(params), helpers).visit(clone(node.body))
    # free names of the template refer to the rule module's globals
    rename: dict[str, ast.expr] = {}
    for name in set(_names_read(body)):
        if name in params or name in helpers.values:
            continue
        if name in fn.__globals__:
            value = fn.__globals__[name]
        else:
            import builtins

            value = getattr(builtins, name)
        rename[name] = N(helpers.ref(value, name))
    body = substituted(body, rename)
    return (
        params,
        body,
        {name: (value, helpers.hints[name]) for name, value in helpers.values.items()},
    )


# parsed gradient lambdas, by lambda (rules live as long as the process)
_PARSED_TEMPLATES: dict[Callable, tuple[list[str], ast.expr, dict[str, tuple[Any, str]]]] = {}


def _whole_power_gradient(
    rule: InlineRule, operands: list[ast.expr], A: ast.expr
) -> ast.expr | None:
    """The base's sensitivity for ``x ** c``, ``c`` a whole constant, on numbers: ``A * (c *
    x ** (c - 1))``, ``A * (2 * x)`` for a square. The rule's template also covers
    complex results and computes ``c * r / x`` (one pow fewer, other rounding); a real base
    to a whole power is real, and a reader of the generated code sees the textbook rule.
    None for any other operation."""
    if rule.fn not in (operator.pow, operator.ipow) or len(operands) != 2:
        return None
    e = operands[1]
    c = e.value if isinstance(e, ast.Constant) else None
    # (exactly an int or a float: not a bool, not a NumPy scalar; isinstance for mypy)
    if not (isinstance(c, (int, float)) and type(c) in (int, float) and float(c).is_integer()):
        return None
    x = clone(operands[0])
    if c == 0:
        d: ast.expr = C(0.0)
    elif c == 1:
        return clone(A)
    elif c == 2:
        d = ast.BinOp(left=C(c), op=ast.Mult(), right=x)
    else:
        d = ast.BinOp(
            left=C(c), op=ast.Mult(), right=ast.BinOp(left=x, op=ast.Pow(), right=C(c - 1))
        )
    return ast.BinOp(left=clone(A), op=ast.Mult(), right=d)


def template_for(fn: Callable, helpers: Helpers) -> Template | None:
    """The inline template of a gradient lambda, built once per build (helpers) and function."""
    cache = helpers.templates
    if fn in cache:
        return cache[fn]
    try:
        t: Template | None = Template(fn, helpers)
    except Exception:
        t = None
    cache[fn] = t
    return t
