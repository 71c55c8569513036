"""dplus imports only downwards (issue #19): the contract in pyproject.toml holds, there is no
import cycle inside dplus, the rules import no private name of the engine, and every hook
that a lower layer calls up through is installed by ``import dplus``.

The contract is checked on a copy laid out as installed (``primitives/`` as
``dplus/primitives``), since import-linter finds modules by walking the package's folder."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def installed_layout(stage: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "dplus", stage / "dplus", ignore=ignore)
    shutil.copytree(ROOT / "primitives", stage / "dplus" / "primitives", ignore=ignore)
    return stage


def test_import_contract_is_kept(tmp_path: Path) -> None:
    pytest.importorskip("importlinter")
    stage = installed_layout(tmp_path)
    lint_imports = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(lint_imports), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=stage,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(stage)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


# ---------------------------------------------------------------------------
# import cycles, counting every import (function-level ones included)


def module_files() -> dict[str, Path]:
    """Every module of the installed package by its dotted name."""
    files = {}
    for folder, package in ((ROOT / "dplus", "dplus"), (ROOT / "primitives", "dplus.primitives")):
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` that run: imports under ``if TYPE_CHECKING:`` are for annotations."""
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{module}.{a.name}" for a in node.names] + [module]
        else:
            continue
        out.update(t for t in targets if t in modules and t != name)
    return out


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_inside_dplus() -> None:
    files = module_files()
    graph = {name: imported_modules(name, path, set(files)) for name, path in files.items()}
    # the package itself imports everything to offer it; its modules never import it back
    # for one of its submodules, so it is left out of the graph
    graph.pop("dplus")
    for targets in graph.values():
        targets.discard("dplus")
    assert strongly_connected(graph) == []


def test_rules_import_no_private_name_of_the_engine() -> None:
    offenders = []
    for path in sorted((ROOT / "primitives").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level:
                continue
            module = node.module or ""
            if not module.startswith("dplus") or module.startswith("dplus.primitives"):
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if private or any(part.startswith("_") for part in module.split(".")):
                offenders.append(f"{path.name}:{node.lineno} from {module} import {private}")
    assert offenders == []


def test_every_hook_is_installed_by_importing_dplus() -> None:
    import dplus  # noqa: F401
    from dplus.runtime.hooks import Hooks, hooks

    missing = [name for name in Hooks.__slots__ if getattr(hooks, name).__name__ == "not_installed"]
    assert missing == []


def test_a_hook_called_before_it_is_installed_names_itself() -> None:
    from dplus.errors import DplusError
    from dplus.runtime.hooks import Hooks

    with pytest.raises(DplusError, match="plus_function_for"):
        Hooks().plus_function_for(len)
