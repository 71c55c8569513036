"""The generated code of a function gathered by the line of the user's source it comes from.

``dplus.show(f)`` prints the reverse transform as one program, each block under a
``# line N:`` comment. ``show_by_line(f)`` regroups those blocks per source line: what the
forward pass (``f+``) runs for the line and what the backpropagator runs for it, which is how
the documentation draws a primal beside its derivative code.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import attrs

from .transform.transformer import generated_source

_LINE_COMMENT = re.compile(r"^(\s*)# line (\d+): (.*)$")
_BACKPROP_DEF = re.compile(r"^(\s*)def \w+__backprop\(")


@attrs.frozen
class LineCode:
    """One line of the user's source and the generated statements made for it."""

    line: int
    source: str
    forward: tuple[str, ...]
    reverse: tuple[str, ...]


def show_by_line(f: Any) -> list[LineCode]:
    """``f``'s generated code per line of its source, in source order.

    Each statement of ``dplus.show(f)`` belongs to the nearest ``# line N:`` comment above it;
    statements inside the backpropagator's definition are ``reverse``, the others ``forward``.
    """
    sources: dict[int, str] = {}
    forward: dict[int, list[str]] = {}
    reverse: dict[int, list[str]] = {}
    current: int | None = None
    backprop_indent: int | None = None
    for text in generated_source(f).splitlines()[1:]:
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip())
        if backprop_indent is not None and indent <= backprop_indent:
            backprop_indent = None
        comment = _LINE_COMMENT.match(text)
        if comment:
            current = int(comment.group(2))
            sources.setdefault(current, comment.group(3))
            continue
        if current is None:
            continue  # the plus-function's own header, before any source line
        in_reverse = backprop_indent is not None
        if not in_reverse:
            header = _BACKPROP_DEF.match(text)
            if header:
                backprop_indent = len(header.group(1))
        (reverse if in_reverse else forward).setdefault(current, []).append(text)
    return [
        LineCode(
            line=n,
            source=sources[n],
            forward=_dedented(forward.get(n, [])),
            reverse=_dedented(reverse.get(n, [])),
        )
        for n in sorted(sources)
    ]


def _dedented(lines: list[str]) -> tuple[str, ...]:
    return tuple(textwrap.dedent("\n".join(lines)).splitlines()) if lines else ()
