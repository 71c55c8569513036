"""``dplus.show_by_line``: every generated statement is attributed to one source line."""

import math

import pytest

import dplus


def branchy(x, y):
    total = 0.0
    for i in range(3):
        if x > i:
            total = total + math.sin(x * i) * y
        else:
            total = total - y
    return total


def with_closure(x, ys):
    scale = x * 2.0

    def term(y):
        return scale * y

    acc = [term(y) for y in ys]
    acc.append(x)
    return sum(acc)


def _statements(f):
    lines = dplus.show(f).splitlines()[1:]
    return [s.strip() for s in lines if s.strip() and not s.strip().startswith("# line ")]


@pytest.mark.parametrize("f", [branchy, with_closure])
def test_every_statement_belongs_to_exactly_one_line(f):
    rows = dplus.show_by_line(f)
    gathered = [s.strip() for row in rows for s in row.forward + row.reverse]
    expected = _statements(f)[1:]  # (the plus-function's def line precedes every source line)
    assert sorted(gathered) == sorted(expected)


@pytest.mark.parametrize("f", [branchy, with_closure])
def test_rows_follow_the_source(f):
    rows = dplus.show_by_line(f)
    numbers = [row.line for row in rows]
    assert numbers == sorted(set(numbers))
    first = f.__code__.co_firstlineno
    import linecache

    for row in rows:
        assert row.source == linecache.getline(f.__code__.co_filename, row.line).strip()
        assert row.line >= first


def test_arithmetic_lines_have_forward_and_reverse_code():
    rows = {row.source: row for row in dplus.show_by_line(branchy)}
    body = rows["total = total + math.sin(x * i) * y"]
    assert any("_dp_sin(" in s for s in body.forward)
    assert any("_dp_cos(" in s for s in body.reverse)
    assert rows["total = total - y"].reverse


def test_not_a_python_function():
    with pytest.raises(dplus.SourceUnavailableError):
        dplus.show_by_line(math.sin)


def test_docs_table_has_a_row_per_line():
    import importlib.util
    from pathlib import Path

    hook = Path(__file__).resolve().parent.parent / "docs" / "gallery_hook.py"
    spec = importlib.util.spec_from_file_location("_gallery_hook", hook)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.side_by_side_table(branchy)
    assert table.count("<tr>") == len(dplus.show_by_line(branchy)) + 1
    assert "math.sin(x * i)" in table


def _module_functions(module):
    import types

    return [
        f
        for name, f in vars(module).items()
        if isinstance(f, types.FunctionType)
        and f.__module__ == module.__name__
        and not name.startswith("test_")
    ]


def test_generated_code_keeps_the_lines_of_its_function():
    # statements the normaliser makes (an assert's raise, a pass, a comprehension's append)
    # carry the line they come from: `show`'s comments and tracebacks point into the function
    import re

    from dplus.transform.transformer import general_paths_only
    from tests import test_language

    checked = 0
    for f in _module_functions(test_language):
        try:
            # (without inlining: an inlined function's or method's statements carry the
            # lines of its own source, in the same file)
            with general_paths_only():
                text = dplus.show(f)
        except dplus.DplusError:
            continue
        first = f.__code__.co_firstlineno
        lines = [int(n) for n in re.findall(r"# line (\d+):", text)]
        assert all(n >= first for n in lines), (f.__name__, sorted(set(lines))[:3], first)
        checked += 1
    assert checked > 50


def failing_assert(x):
    y = x * 2.0
    assert y < 100, f"too large: {y}"
    return y


def test_traceback_points_at_the_users_line():
    import traceback

    with pytest.raises(AssertionError) as info:
        dplus.grad(failing_assert)(70.0)
    frames = [fr for fr in traceback.extract_tb(info.tb) if fr.filename == __file__]
    assert frames and frames[-1].lineno == failing_assert.__code__.co_firstlineno + 2
