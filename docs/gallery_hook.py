"""MkDocs hook: run the gallery's examples before the site is built, so that its figures
are made from the code on the page (docs/gallery.md) by the dplus being documented; and draw
the side-by-side tables of docs/side-by-side.md from the functions its examples define."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def on_pre_build(config: object) -> None:
    figures = ROOT / "docs" / "gallery"
    figures.mkdir(exist_ok=True)
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "test_docs.py"), str(ROOT / "docs" / "gallery.md")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "DPLUS_GALLERY_DIR": str(figures)},
    )
    if out.returncode != 0:
        raise RuntimeError("the gallery's examples failed:\n" + out.stdout + out.stderr)


_SIDE_BY_SIDE = re.compile(r"<!-- side-by-side: (\w+) -->")


def on_page_markdown(markdown: str, page: Any, config: object, files: object) -> str:
    """Replace each ``<!-- side-by-side: name -->`` marker with a table of the function
    ``name`` (defined by the page's own examples) beside its generated code, line by line."""
    if not _SIDE_BY_SIDE.search(markdown):
        return markdown
    namespace = _run_page_examples(ROOT / "docs" / page.file.src_path)
    return _SIDE_BY_SIDE.sub(lambda m: side_by_side_table(namespace[m.group(1)]), markdown)


def _run_page_examples(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(
        "_dplus_docs_runner", ROOT / "tests" / "test_docs.py"
    )
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    runner.run_page(path)
    return vars(sys.modules[f"docs_{path.stem.replace('-', '_')}"])


def side_by_side_table(f: Any) -> str:
    """An HTML table: each source line of ``f``, the forward code and the reverse code made for it."""
    from dplus import show_by_line

    def cell(lines: tuple[str, ...] | list[str]) -> str:
        return f"<td><pre><code>{html.escape(chr(10).join(lines))}</code></pre></td>"

    rows = [
        "<tr><th>line</th><th>your code</th><th>forward pass (f+)</th><th>backpropagator</th></tr>"
    ]
    for entry in show_by_line(f):
        rows.append(
            f"<tr><td>{entry.line}</td>{cell([entry.source])}{cell(entry.forward)}{cell(entry.reverse)}</tr>"
        )
    return '<table class="dplus-side-by-side">\n' + "\n".join(rows) + "\n</table>"
