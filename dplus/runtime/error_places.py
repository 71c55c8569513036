"""Where in the user's code a refusal came from: a ``DplusError`` raised while generated
code ran names the user's file and line, read through the line maps of the texts dplus
generated (one text per order of differentiation)."""

from __future__ import annotations

import ast
import linecache
from typing import Any

from ..errors import DplusError

# the text of code made differentiable again (transform.generated_text) -> the file it was
# generated from and the source lines of the text's statements in ast.walk order (made, when
# a refusal needs it, into a map from the text's lines)
_SOURCE_LINES: dict[str, tuple[str, Any]] = {}


def register_source_lines(filename: str, source: str, statement_lines: list[int]) -> None:
    _SOURCE_LINES[filename] = (source, statement_lines)


def _line_map(filename: str) -> dict[int, int]:
    source, lines = _SOURCE_LINES[filename]
    if isinstance(lines, dict):
        return lines
    out: dict[int, int] = {}
    try:
        parsed = [
            n
            for n in ast.walk(ast.parse("".join(linecache.getlines(filename))))
            if isinstance(n, ast.stmt)
        ]
    except SyntaxError:
        parsed = []
    if len(parsed) == len(lines):
        for node, line in zip(parsed, lines):
            if line:
                out.setdefault(node.lineno, line)
    _SOURCE_LINES[filename] = (source, out)
    return out


def _source_place(filename: str, line: int) -> tuple[str, int] | None:
    """The user's file and line that ``line`` of the generated ``filename`` came from."""
    for _ in range(64):  # (a text made from a text, one per order)
        if filename not in _SOURCE_LINES:
            return None if filename.startswith("<dplus") else (filename, line)
        lines = _line_map(filename)
        filename = _SOURCE_LINES[filename][0]
        if line not in lines:
            return None
        line = lines[line]
    return None


def locate_in_user_code(e: DplusError) -> None:
    """Name, in a refusal raised while differentiated code ran, the line of the user's code
    it came from: the innermost frame of code dplus generated from the user's (its names end
    in ``__plus``/``__backprop``, it runs in the user's module, its lines are the user's). A
    refusal that names its place already, or raised outside such code, is left as it is."""
    if getattr(e, "dp_located", False) or not e.args or not isinstance(e.args[0], str):
        return
    e.dp_located = True  # type: ignore[attr-defined]
    if isinstance(e, SyntaxError):
        return  # (found at transform time: it names its line)
    place = None
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if ("__plus" in code.co_name or "__backprop" in code.co_name) and not (
            module == "dplus" or module.startswith("dplus.")
        ):
            found = _source_place(code.co_filename, tb.tb_lineno)
            if found is not None:
                name = code.co_name.split("__plus", 1)[0].split("__backprop", 1)[0]
                place = f"{found[0]}, line {found[1]}, in {name}"
        tb = tb.tb_next
    if place is not None and place not in e.args[0]:
        e.args = (f"{e.args[0]} (at {place})",) + e.args[1:]
