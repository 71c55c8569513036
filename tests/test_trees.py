"""The transformer's tree helpers agree with the ``ast`` module's."""

import ast
import inspect

import pytest

import dplus.transform.reverse.statements
import dplus.transform.transformer
from dplus.transform.trees import clone, walk

SOURCES = [
    inspect.getsource(dplus.transform.trees),
    inspect.getsource(dplus.transform.transformer),
    "x = [a for a in b if a > 1]\nf(*a, k=1, **d)[0].y += -z\nlambda q=1, *r: q is not r",
    "match p:\n    case [1, *rest] if rest: pass\n    case {'k': v, **kw}: del v\n",
]


@pytest.mark.parametrize("text", SOURCES)
def test_walk_is_ast_walk_without_contexts(text):
    tree = ast.parse(text)
    expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    assert list(walk(tree)) == expected  # same nodes, same (breadth-first) order


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
