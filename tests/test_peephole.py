"""The peephole clean-up of fast reverse code keeps what every non-temporary name ends up holding."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from dplus.transform.peephole import simplify_reverse

NAMES = ["A", "B", "x"]  # read after the list (adjoints, values)
TEMPS = ["t1", "t2", "t3"]  # read by nothing after it

operand = st.sampled_from(NAMES + TEMPS + ["Z", "2.0"])


@st.composite
def programs(draw):
    """Straight-line code as the reverse writes it: copies, resets and arithmetic."""
    lines = []
    assigned = set()
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["copy", "reset", "binop", "barrier"]))
        avail = NAMES + [t for t in TEMPS if t in assigned] + ["2.0"]
        if kind == "copy":
            target, value = draw(st.sampled_from(NAMES + TEMPS)), draw(st.sampled_from(avail[:-1]))
        elif kind == "reset":
            target, value = draw(st.sampled_from(NAMES)), "Z"
        else:
            a, b = draw(st.sampled_from(avail)), draw(st.sampled_from(avail))
            target, value = draw(st.sampled_from(NAMES + TEMPS)), f"{a} * {b} + 1.0"
        if target in TEMPS and target in assigned:
            target = draw(
                st.sampled_from(NAMES)
            )  # temps are assigned once, as the accumulator makes them
        if kind == "barrier":  # another statement: an if that may assign
            a, b = draw(st.sampled_from(avail)), draw(st.sampled_from(avail))
            target = draw(st.sampled_from(NAMES))
            other = draw(st.sampled_from(NAMES))
            lines.append(f"if {a} > 0.5:\n    {target} = 2.5\n    {other} = {b} + 1.0")
            continue
        assigned.add(target)
        lines.append(f"{target} = {value}")
    return "\n".join(lines)


def run(code: str) -> dict:
    env = {"A": 1.5, "B": -0.25, "x": 3.0, "Z": 0.0}
    exec(compile(code, "<test>", "exec"), {}, env)
    return {k: env[k] for k in NAMES}


@settings(max_examples=300, deadline=None)
@given(programs())
def test_simplified_code_leaves_the_same_values(code):
    tree = ast.parse(code)
    temps = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in TEMPS}
    simple = ast.Module(body=simplify_reverse(tree.body, temps), type_ignores=[])
    after = ast.unparse(simple)
    assert run(after) == run(code), (code, after)
    assert len(simple.body) <= len(ast.parse(code).body)


def test_copies_and_overwritten_resets_go():
    code = "t1 = A\nA = Z\nt2 = t1\nt3 = t1\nA = t3 * x\nB = B + t2 * 2.0"
    out = ast.unparse(
        ast.Module(body=simplify_reverse(ast.parse(code).body, {"t1", "t2", "t3"}), type_ignores=[])
    )
    assert out == "t1 = A\nA = t1 * x\nB = B + t1 * 2.0"


def test_a_round_trip_through_a_temporary_goes():
    code = "t1 = A\nA = Z\nA = t1\nt2 = t1 * x\nB = t2"
    out = ast.unparse(
        ast.Module(body=simplify_reverse(ast.parse(code).body, {"t1", "t2"}), type_ignores=[])
    )
    assert out == "t2 = A * x\nB = t2"


def test_other_statements_are_barriers():
    code = "t1 = A\nif x:\n    B = t1\nt2 = B\nif x:\n    B = 1.0\nA = t2"
    out = ast.unparse(
        ast.Module(body=simplify_reverse(ast.parse(code).body, {"t1", "t2"}), type_ignores=[])
    )
    assert out == "if x:\n    B = A\nt2 = B\nif x:\n    B = 1.0\nA = t2"  # B is assigned in between


def test_a_copy_read_after_its_source_is_assigned_in_a_barrier_stays():
    code = "t1 = A\nif x > 0.5:\n    A = 2.5\n    B = t1 + 1.0"
    out = ast.unparse(
        ast.Module(body=simplify_reverse(ast.parse(code).body, {"t1"}), type_ignores=[])
    )
    assert out == code
    assert run(out) == run(code)
