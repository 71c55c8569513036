"""The documentation's examples run, the primitive listing is fresh, and the site builds.

* Every ```python block of every ``docs/*.md`` page is executed. Each page runs in a fresh
  interpreter (``python tests/test_docs.py docs/page.md`` runs one by hand); the blocks of
  one page run in order in one namespace, so a later block may use the names an earlier
  one defined.
  A block whose first line is ``# not run`` is skipped. A failing block fails the test
  with the page, the block number and the line in the page.
* ``docs/primitives.md`` must be what ``python docs/gen_primitives.py`` writes.
* ``mkdocs build --strict`` must succeed (skipped when mkdocs is not installed).
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import re
import subprocess
import sys
import traceback
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

_FENCE = re.compile(r"^```(\w[\w+-]*)?\s*$")


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """The ``python`` fenced blocks of a page: (line of the first code line, code)."""
    blocks: list[tuple[int, str]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        language = m.group(1) or ""
        start = i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path.name}:{i + 1}: a code block is never closed")
        if language == "python":
            blocks.append((start + 1, "\n".join(lines[start:j]) + "\n"))
        i = j + 1
    return blocks


def is_skipped(code: str) -> bool:
    first = code.lstrip("\n").splitlines()[0] if code.strip() else ""
    return first.strip().lower() == "# not run"


def run_page(path: Path) -> int:
    """Run every python block of ``path`` in one namespace; return how many ran."""
    # The page runs as a module of its own (dataclasses, pickle and friends look it up).
    module = types.ModuleType(f"docs_{path.stem.replace('-', '_')}")
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    ran = 0
    for number, (line, code) in enumerate(python_blocks(path), start=1):
        if is_skipped(code):
            continue
        # The block gets a file name of its own, registered with linecache so that dplus
        # (which transforms functions from their source) and tracebacks can read it; it is
        # padded with blank lines so that its line numbers are the page's.
        filename = f"{path}#block{number}"
        source = "\n" * (line - 1) + code
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        failure = None
        try:
            exec(compile(source, filename, "exec"), namespace)
        except BaseException as e:
            failure = (
                f"docs/{path.name}, python block {number} (line {line}) failed: "
                f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-8)}"
            )
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        ran += 1
    return ran


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_examples_run(page: Path) -> None:
    """Each page runs in a fresh interpreter: examples register rules (``np.cross``, ...)
    that must not leak into other pages or other tests."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        pytest.fail((out.stdout + out.stderr).strip(), pytrace=False)


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [p.name for p in PAGES if p.name not in nav]
    assert not missing, f"pages missing from the nav of mkdocs.yml: {missing}"


def test_primitives_listing_is_fresh() -> None:
    """Regenerate the listing (in a fresh process: the examples above register primitives)."""
    out = subprocess.run(
        [sys.executable, str(DOCS / "gen_primitives.py"), "--stdout"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    current = (DOCS / "primitives.md").read_text(encoding="utf-8")
    assert out.stdout == current, (
        "docs/primitives.md is stale: run `python docs/gen_primitives.py` to regenerate it"
    )


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="mkdocs and mkdocstrings are not installed (pip install -e '.[docs]')",
)
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert out.returncode == 0, f"mkdocs build --strict failed:\n{out.stdout}\n{out.stderr}"


if __name__ == "__main__":
    # ``python tests/test_docs.py docs/page.md``: run one page's examples (used by the test
    # above; handy on its own while writing a page).
    try:
        ran = run_page(Path(sys.argv[1]).resolve())
    except pytest.fail.Exception as failure:
        print(failure.msg)
        sys.exit(1)
    print(f"{sys.argv[1]}: {ran} examples ran")
