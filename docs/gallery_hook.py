"""MkDocs hook: run the gallery's examples before the site is built, so that its figures
are made from the code on the page (docs/gallery.md) by the dplus being documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
