"""Delta debugging of a failing program on its AST.

Candidates, tried in this order and accepted when the program still fails the same way
(same outcome status, kind and, for crashes, exception message):

1. delete a chunk of a statement list (halves first, then single statements), anywhere,
   module-level helpers included;
2. replace a compound statement (``if``, ``for``, ``while``, ``with``, ``try``) by its body,
   drop an ``else`` / ``finally`` block;
3. drop a parameter of ``f`` together with its argument;
4. replace an expression by one of its operands, or by a constant.

Each accepted change restarts the passes; shrinking stops when no candidate is accepted or
the time budget is spent.
"""

from __future__ import annotations

import ast
import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from .checker import Checker, Outcome
from .generator import Program

STATEMENT_FIELDS = ("body", "orelse", "finalbody")


def _located(tree: ast.AST) -> list[tuple[int, str]]:
    """(index of the node in a walk, field) of every statement list, stable across copies."""
    nodes = list(ast.walk(tree))
    out = []
    for i, node in enumerate(nodes):
        for name in STATEMENT_FIELDS:
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                out.append((i, name))
    return out


def deletions(tree: ast.Module) -> Iterator[ast.Module]:
    for index, name in _located(tree):
        length = len(getattr(list(ast.walk(tree))[index], name))
        chunk = length
        while chunk >= 1:
            for start in range(0, length, chunk):
                t = copy.deepcopy(tree)
                owner = list(ast.walk(t))[index]
                body = getattr(owner, name)
                rest = body[:start] + body[start + chunk :]
                if not rest:
                    if name in ("orelse", "finalbody"):
                        setattr(owner, name, [])
                        if (
                            isinstance(owner, ast.Try)
                            and not owner.handlers
                            and not owner.finalbody
                        ):
                            continue
                    else:
                        rest = [ast.Pass()]
                        setattr(owner, name, rest)
                else:
                    setattr(owner, name, rest)
                yield t
            chunk //= 2


def inlinings(tree: ast.Module) -> Iterator[ast.Module]:
    """Replace a compound statement by its body (and, for if/try, by its other branches)."""
    for index, name in _located(tree):
        length = len(getattr(list(ast.walk(tree))[index], name))
        for pos in range(length):
            stmt = getattr(list(ast.walk(tree))[index], name)[pos]
            if not isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                continue
            replacements = [stmt.body]
            if isinstance(stmt, ast.If) and stmt.orelse:
                replacements.append(stmt.orelse)
            if isinstance(stmt, ast.Try):
                replacements += [h.body for h in stmt.handlers]
            for new_body in replacements:
                t = copy.deepcopy(tree)
                owner = list(ast.walk(t))[index]
                body = getattr(owner, name)
                setattr(owner, name, body[:pos] + copy.deepcopy(new_body) + body[pos + 1 :])
                yield t


def expression_slots(tree: ast.Module) -> list[tuple[int, str, int | None]]:
    """(node index, field, list position) of every expression that may be replaced."""
    nodes = list(ast.walk(tree))
    out = []
    for i, node in enumerate(nodes):
        for fname, value in ast.iter_fields(node):
            if isinstance(node, ast.Call) and fname == "func":
                continue
            if isinstance(node, (ast.Attribute, ast.Subscript)) and fname == "value":
                continue
            if isinstance(node, ast.Subscript) and fname == "slice":
                continue
            if isinstance(node, (ast.Lambda, ast.arguments, ast.comprehension)) and fname in (
                "args",
                "target",
                "iter",
            ):
                continue
            if isinstance(value, ast.expr) and not isinstance(value, ast.Constant):
                if getattr(value, "ctx", None) is not None and not isinstance(value.ctx, ast.Load):
                    continue
                out.append((i, fname, None))
            elif isinstance(value, list):
                for k, v in enumerate(value):
                    if (
                        isinstance(v, ast.expr)
                        and not isinstance(v, ast.Constant)
                        and isinstance(getattr(v, "ctx", ast.Load()), ast.Load)
                    ):
                        out.append((i, fname, k))
    return out


def simpler(node: ast.expr) -> list[ast.expr]:
    options: list[ast.expr] = []
    if isinstance(node, ast.BinOp):
        options += [node.left, node.right]
    elif isinstance(node, ast.UnaryOp):
        options.append(node.operand)
    elif isinstance(node, ast.IfExp):
        options += [node.body, node.orelse]
    elif isinstance(node, ast.Call):
        options += [a for a in node.args if not isinstance(a, ast.Starred)]
    elif isinstance(node, ast.BoolOp):
        options += node.values
    elif isinstance(node, ast.Compare):
        options += [ast.Constant(True), ast.Constant(False)]
    if not isinstance(node, (ast.Name, ast.Constant)):
        options.append(ast.Constant(0.5))
    return options


def expression_replacements(tree: ast.Module) -> Iterator[ast.Module]:
    for index, fname, pos in expression_slots(tree):
        node = list(ast.walk(tree))[index]
        current = getattr(node, fname) if pos is None else getattr(node, fname)[pos]
        for option in simpler(current):
            t = copy.deepcopy(tree)
            owner = list(ast.walk(t))[index]
            new = copy.deepcopy(option)
            if pos is None:
                setattr(owner, fname, new)
            else:
                getattr(owner, fname)[pos] = new
            yield t


def parameter_drops(
    tree: ast.Module, args: tuple, entry: str
) -> Iterator[tuple[ast.Module, tuple]]:
    for k in range(len(args)):
        t = copy.deepcopy(tree)
        for node in t.body:
            if isinstance(node, ast.FunctionDef) and node.name == entry:
                del node.args.args[k]
                yield t, args[:k] + args[k + 1 :]


class Shrinker:
    def __init__(self, checker: Checker, budget: float = 60.0):
        self.checker = checker
        self.budget = budget
        self.tries = 0

    def same_failure(self, program: Program, target: Outcome) -> bool:
        self.tries += 1
        outcome = self.checker.focused(target).check(program)
        return outcome.signature == target.signature

    def shrink(self, program: Program, target: Outcome) -> Program:
        deadline = time.monotonic() + self.budget
        best = program
        tree = ast.parse(program.source)
        progress = True
        while progress and time.monotonic() < deadline:
            progress = False
            passes: list[Callable[[], Iterator[tuple[ast.Module, tuple]]]] = [
                lambda: ((t, best.args) for t in deletions(tree)),  # noqa: B023  (made and run in this iteration of the while loop)
                lambda: ((t, best.args) for t in inlinings(tree)),  # noqa: B023  (made and run in this iteration of the while loop)
                lambda: parameter_drops(tree, best.args, best.entry),  # noqa: B023  (made and run in this iteration of the while loop)
                lambda: ((t, best.args) for t in expression_replacements(tree)),  # noqa: B023  (made and run in this iteration of the while loop)
            ]
            for make in passes:
                for candidate, args in make():
                    if time.monotonic() > deadline:
                        break
                    try:
                        source = ast.unparse(ast.fix_missing_locations(candidate)) + "\n"
                        compile(source, "<shrink>", "exec")
                    except (SyntaxError, ValueError, TypeError):
                        continue
                    if len(source) >= len(best.source) and args == best.args:
                        continue
                    trial = replace(best, source=source, args=args)
                    if self.same_failure(trial, target):
                        best, tree, progress = trial, candidate, True
                        break
                if progress:
                    break
        return best
