"""The transformer's tree helpers agree with the ``ast`` module's."""

import ast
import inspect
import textwrap

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


# --- the walks that replaced whole-tree ones (issue #27, the fifth pass of bigfn3)

ATTRIBUTE_SOURCES = [
    "def f(x):\n"
    "    def m(self): return x\n"
    "    class T:\n"
    "        def m(self): return 1\n"
    "        T.k = m\n"
    "    T.m = m\n"
    "    T.n = lambda self: x\n"
    "    setattr(T, 'k', m)\n"
    "    def g(y=lambda: 1, z=(lambda: T.d.__setattr__)):\n"
    "        def m(self): return y\n"
    "        def unused(self): return y\n"
    "        T.q = m\n"
    "        T.l = (lambda: setattr(T, 'w', lambda s: 2))\n"
    "        return m\n"
    "    async def h():\n"
    "        def m(self): return 2\n"
    "        T.r = m\n"
    "        return m\n"
    "    return g, h, (lambda: setattr(T, 'v', m))\n",
    "lambda T: [setattr(T, 'a', lambda s: 1), T]\n",
]


def _marked_by_scope(node):
    """``mark_functions_set_as_attributes`` as it was (a walk of each scope's own nodes)."""
    from dplus.transform.normalize.class_statements import _set_as_attribute

    def own_nodes(body):
        out, todo = [], list(body)
        while todo:
            n = todo.pop()
            out.append(n)
            if not isinstance(n, _SCOPES):
                todo.extend(ast.iter_child_nodes(n))
        return out

    for scope in [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.Lambda))]:
        body = scope.body if isinstance(scope.body, list) else [ast.Expr(value=scope.body)]
        own = own_nodes(body)
        defs = {}
        for n in own:
            if isinstance(n, ast.FunctionDef):
                defs.setdefault(n.name, []).append(n)
        for n in own:
            value = _set_as_attribute(n)
            if isinstance(value, ast.Lambda):
                value.dp_escapes_as_method = True
            elif isinstance(value, ast.Name):
                for d in defs.get(value.id, []):
                    d.dp_escapes_as_method = True


@pytest.mark.parametrize("text", SOURCES + ATTRIBUTE_SOURCES)
def test_functions_set_as_attributes_are_marked_as_scope_by_scope(text):
    from dplus.transform.normalize.class_statements import mark_functions_set_as_attributes

    def marks(mark, fn):
        copy = clone(fn)
        mark(copy)
        return [i for i, n in enumerate(ast.walk(copy)) if getattr(n, "dp_escapes_as_method", 0)]

    tree = ast.parse(text)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))]
    found = [marks(mark_functions_set_as_attributes, fn) for fn in functions]
    assert found == [marks(_marked_by_scope, fn) for fn in functions]
    if text in ATTRIBUTE_SOURCES:
        assert found[0]  # (the cases are there: not a comparison of two empty lists)


@pytest.mark.parametrize("text", SOURCES)
def test_child_nodes_are_iter_child_nodes_without_contexts(text):
    from dplus.transform.trees import child_nodes

    for n in ast.walk(ast.parse(text)):
        expected = [c for c in ast.iter_child_nodes(n) if not isinstance(c, ast.expr_context)]
        assert child_nodes(n) == expected


def _half_positioned(text):
    """The tree of ``text`` with every other node's position removed (the root's kept)."""
    tree = ast.parse(text)
    for i, n in enumerate(ast.walk(tree)):
        if i % 2 and "lineno" in n.__dict__:
            for k in ("lineno", "end_lineno", "col_offset", "end_col_offset"):
                del n.__dict__[k]
    return tree


@pytest.mark.parametrize("text", SOURCES)
def test_statement_lines_are_in_ast_walk_order(text):
    from dplus.transform.generated_text import statement_lines

    tree = _half_positioned(text)
    expected = [getattr(n, "lineno", 0) for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    assert statement_lines(tree) == expected
    assert expected


@pytest.mark.parametrize("text", SOURCES)
def test_statements_located_alone_get_the_lines_of_the_whole_tree_located(text):
    from dplus.transform.reverse.syntax import _locate, _locate_statements

    whole, alone = _half_positioned(text), _half_positioned(text)
    _locate(whole, 7)
    _locate_statements(alone, 7)

    def lines(tree):
        return [
            (type(n).__name__, n.lineno, n.end_lineno, n.col_offset)
            for n in ast.walk(tree)
            if isinstance(n, (ast.stmt, ast.excepthandler))
        ]

    assert lines(alone) == lines(whole)


def test_fresh_inlining_names_are_the_first_free_ones():
    from dplus.transform.inline import _Inliner

    def f(x):
        v_1 = x
        v_3 = x
        return v_1 + v_3

    inliner = _Inliner(f, ast.parse(textwrap.dedent(inspect.getsource(f))).body[0])
    names = [inliner.fresh("v") for _ in range(3)]
    inliner.taken.update({"v_6", "w_1"})
    names += [inliner.fresh("v"), inliner.fresh("_w"), inliner.fresh("_w", keep_underscore=True)]
    assert names == ["v_2", "v_4", "v_5", "v_7", "w_2", "_w_1"]
