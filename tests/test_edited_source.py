"""A file edited after import: dplus refuses to differentiate a text that is not the code
that runs, and says why. A user's file: "changed since it was imported", whether the
definition's text changed or is gone from the file (it said "could not find the source",
with advice for functions built by exec). dplus's own files (differentiated from source at
higher orders): "dplus's installation changed on disk", restart, without naming its
internals as the user's or telling the user to decorate them (found while other processes
edited /work/main under a running one: "dplus could not find the source of
dplus.primitives._iterables.seq")."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

import dplus
from dplus.transform.source import function_source

ORIGINAL = """
import math


def f(x):
    y = x * 2.0
    return y * y
"""

EDITS = {
    "body_changed": ORIGINAL.replace("y * y", "y * y * y"),
    "definition_removed": "import math\n",
    "file_shortened": "def g(x):\n    return x\n",
}


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith(("edited_user_", "dplus._edited_"))]:
        del sys.modules[name]


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_user_file_edited_after_import_is_refused_as_changed(on_path, edit):
    name = f"edited_user_{edit}"
    path = on_path / f"{name}.py"
    path.write_text(ORIGINAL)
    module = importlib.import_module(name)
    assert dplus.grad(module.f)(1.5) == (12.0,)  # (before the edit)
    path.write_text(EDITS[edit])
    module_f = module.f
    fresh = type(module_f)(module_f.__code__.replace(), module_f.__globals__)  # not cached yet
    with pytest.raises(dplus.SourceUnavailableError) as info:
        dplus.grad(fresh)(1.5)
    msg = str(info.value)
    assert f"the source of {name}.f" in msg and "has changed since it was imported" in msg
    assert str(path) in msg and "importlib.reload" in msg
    assert "could not find" not in msg


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_dplus_own_file_edited_after_import_says_restart(on_path, edit):
    # (a module imported under dplus's name stands for one of dplus's own files)
    name = f"dplus._edited_{edit}"
    path = on_path / f"dplus_edited_{edit}.py"
    path.write_text(ORIGINAL)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    path.write_text(EDITS[edit])
    with pytest.raises(dplus.SourceUnavailableError) as info:
        function_source(module.f)
    msg = str(info.value)
    assert msg.startswith("dplus's installation changed on disk since it was imported")
    assert str(path) in msg and "restart Python" in msg
    assert "decorat" not in msg and "could not find" not in msg


def test_a_function_without_a_file_is_refused_as_before():
    namespace: dict = {}
    exec("def made(x):\n    return x * x\n", namespace)
    with pytest.raises(dplus.SourceUnavailableError) as info:
        dplus.grad(namespace["made"])(1.5)
    assert type(info.value) is dplus.SourceUnavailableError  # (not a private subclass)
    assert "could not find the source of" in str(info.value)
