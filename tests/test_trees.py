"""The transformer's tree helpers agree with the ``ast`` module's."""

import ast
import inspect

import pytest

import dplus.transform.reverse.statements
import dplus.transform.transformer
from dplus.transform.trees import child_blocks, clone, statements, walk, walk_outside

SOURCES = [
    inspect.getsource(dplus.transform.trees),
    inspect.getsource(dplus.transform.transformer),
    "x = [a for a in b if a > 1]\nf(*a, k=1, **d)[0].y += -z\nlambda q=1, *r: q is not r",
    "match p:\n    case [1, *rest] if rest: pass\n    case {'k': v, **kw}: del v\n",
    "def f(a):\n    try:\n        return 1\n    except E as e:\n        x = lambda: 2\n"
    "    else:\n        class C:\n            def m(self): return 3\n    finally:\n"
    "        with g() as h:\n            for i in h:\n                pass\n            else:\n"
    "                del i\n    while a: a -= 1\n",
]
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@pytest.mark.parametrize("text", SOURCES)
def test_walk_is_ast_walk_without_contexts(text):
    tree = ast.parse(text)
    expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    assert list(walk(tree)) == expected  # same nodes, same (breadth-first) order


def _under_without_scopes(node):
    """The reference: ``node`` and what is under it, not entering nested scopes."""
    out = [node]
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (*_SCOPES, ast.expr_context)):
            out += _under_without_scopes(child)
    return out


@pytest.mark.parametrize("text", SOURCES)
def test_walk_outside_skips_nested_scopes(text):
    tree = ast.parse(text)
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, ast.expr_context):
            continue
        got = list(walk_outside(node, _SCOPES))
        assert sorted(map(id, got)) == sorted(map(id, _under_without_scopes(node)))


def _statements_outside(node):
    """The reference: the statements under ``node``, a nested definition listed, not entered."""
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            out.append(child)
        if not isinstance(child, _SCOPES):
            out += _statements_outside(child)
    return out


@pytest.mark.parametrize("text", SOURCES)
def test_statements_are_the_statements_of_the_tree(text):
    tree = ast.parse(text)
    every = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    assert sorted(map(id, statements(tree.body))) == sorted(map(id, every))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            expected = list(body)
            for st in body:
                if not isinstance(st, _SCOPES):
                    expected += _statements_outside(st)
            got = statements(body, nested=False)
            assert sorted(map(id, got)) == sorted(map(id, expected))


@pytest.mark.parametrize("text", SOURCES)
def test_child_blocks_are_the_statement_lists_in_order(text):
    for node in ast.walk(ast.parse(text)):
        expected = [
            getattr(node, f)
            for f in ("body", "orelse", "finalbody")
            if getattr(node, f, None)
            and isinstance(getattr(node, f), list)
            and isinstance(getattr(node, f)[0], ast.stmt)
        ]
        expected += [h.body for h in getattr(node, "handlers", ())]
        expected += [c.body for c in getattr(node, "cases", ())]
        assert [id(b) for b in child_blocks(node)] == [id(b) for b in expected]


@pytest.mark.parametrize("text", SOURCES)
def test_clone_copies_every_stateful_node(text):
    tree = ast.parse(text)
    tree.body[0].dp_note = [["kept"]]
    copy = clone(tree)
    assert ast.dump(copy, include_attributes=True) == ast.dump(tree, include_attributes=True)
    originals = {id(n) for n in ast.walk(tree)}
    for n in ast.walk(copy):
        stateless = isinstance(
            n, (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
        )
        assert (id(n) in originals) == stateless, type(n).__name__
    assert copy.body[0].dp_note == [["kept"]] and copy.body[0].dp_note is not tree.body[0].dp_note
    compile(copy, "<clone>", "exec")


def test_the_engine_uses_these_helpers():
    assert (
        dplus.transform.reverse.statements.clone is clone
        and dplus.transform.transformer.walk is walk
    )


@pytest.mark.parametrize("value", [-2, -2.5, -0.0, 3, 0.5])
def test_unparse_reads_back_as_the_same_tree(value):
    from dplus.transform.trees import unparse

    tree = ast.Expression(
        body=ast.BinOp(
            left=ast.Attribute(value=ast.Constant(value=value), attr="real", ctx=ast.Load()),
            op=ast.Add(),
            right=ast.BinOp(
                left=ast.Constant(value=value), op=ast.Pow(), right=ast.Constant(value=2)
            ),
        )
    )
    expected = eval(compile(ast.fix_missing_locations(tree), "<tree>", "eval"))
    got = eval(unparse(tree))
    assert got == expected and str(got) == str(expected)
