"""Migration aid for issue #19 (delete after the branches of that day are merged): rebuild
dplus/transform/normalize/ from a dplus/transform/normalize.py of one piece, as
tools/split_reverse.py does for the reverse transform.

Take the branch's normalize.py (imports rewritten as in the move commit) to
dplus/transform/normalize.py and run ``.venv/bin/python tools/split_normalize.py .``; a method
the branch added stays in normalizer.py: move it to its mixin (MIXINS below). The package's
__init__.py is kept.
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
SRC = ROOT / "dplus/transform/normalize.py"
PKG = ROOT / "dplus/transform/normalize"
text = SRC.read_text()
# one level deeper: every relative import gets one more dot
text = re.sub(r"^(\s*from )(\.+)", lambda m: m.group(1) + m.group(2) + ".", text, flags=re.M)
lines = text.split("\n")
tree = ast.parse(text)


def span(node):
    start = node.lineno
    if getattr(node, "decorator_list", None):
        start = min(d.lineno for d in node.decorator_list)
    return start, node.end_lineno


# leading comments directly above a def/class belong to it
def with_comments(start):
    s = start
    while (
        s - 2 >= 0
        and lines[s - 2].lstrip().startswith("#")
        and not lines[s - 2].startswith("# ----")
    ):
        s -= 1
    return s


cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Normalizer")
methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
top = {}
for n in tree.body:
    if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
        top[n.name] = n
    elif isinstance(n, (ast.Assign, ast.AnnAssign)):
        t = n.targets[0] if isinstance(n, ast.Assign) else n.target
        if isinstance(t, ast.Name):
            top[t.id] = n

MIXINS = {
    "statements": (
        "StatementForms",
        "Assignments, ``del``, ``return``, ``raise``, ``assert``, ``global``, classes.",
        [
            "s_Expr",
            "s_Pass",
            "s_Assign",
            "s_AnnAssign",
            "s_AugAssign",
            "in_place_op",
            "check_store",
            "emit_assign_name",
            "assign_to",
            "s_Delete",
            "s_If",
            "s_Return",
            "s_Raise",
            "s_Assert",
            "s_Global",
            "s_Nonlocal",
            "s_ClassDef",
            "s_AsyncFunctionDef",
            "s_AsyncFor",
            "s_AsyncWith",
        ],
    ),
    "loops": (
        "LoopForms",
        "``for`` and ``while``, ``break`` and ``continue`` as flags, and what a loop's iterable is.",
        [
            "exit_loops",
            "s_Break",
            "s_Continue",
            "loop_ctx",
            "loop_body",
            "s_For",
            "may_write_lists",
            "makes_lazy_iterator",
            "mark_live",
            "calls_observably",
            "is_pure_call",
            "makes_fresh_list",
            "calls_builtin",
            "after_loop",
            "s_While",
        ],
    ),
    "exceptions": (
        "ExceptionForms",
        "``try``, ``with`` and ``match``.",
        ["s_Try", "s_TryStar", "s_With", "s_Match", "capture_bindings"],
    ),
    "functions": (
        "FunctionForms",
        "Nested ``def`` and ``lambda``, comprehensions and generator expressions.",
        [
            "s_FunctionDef",
            "e_Lambda",
            "comprehension",
            "_comp_loops",
            "e_ListComp",
            "e_GeneratorExp",
            "e_SetComp",
            "e_DictComp",
        ],
    ),
    "expressions": (
        "ExpressionForms",
        "Expressions: each operand becomes a name or a constant.",
        [
            "e_Constant",
            "e_Name",
            "e_BinOp",
            "e_UnaryOp",
            "e_BoolOp",
            "bool_rest",
            "e_Compare",
            "e_IfExp",
            "e_NamedExpr",
            "static_callee",
            "introspection",
            "user_namespace",
            "e_Call",
            "e_Attribute",
            "slice_",
            "e_Subscript",
            "e_Slice",
            "elements",
            "e_Tuple",
            "e_List",
            "e_Set",
            "e_Dict",
            "e_JoinedStr",
            "e_Starred",
        ],
    ),
}
moved_methods = {m for _, _, ms in MIXINS.values() for m in ms}
assert moved_methods <= set(methods), moved_methods - set(methods)
missing = set(methods) - moved_methods
print("kept in normalizer:", sorted(missing))

CORE_TOP = [
    "Atom",
    "_NONDIFF_BUILTINS",
    "_FRESH_LIST_BUILTINS",
    "_TUPLE_ITEM_BUILTINS",
    "_ZIP",
    "_INTROSPECTION_BUILTINS",
    "UNBOUND",
    "_LIVE_BUILTINS",
    "_LIVE_CALLERS",
    "_PURE_BUILTINS",
    "_PURE_MODULES",
    "Namer",
    "IRFunction",
    "closure_reads",
    "_LoopCtx",
    "_name",
    "_const",
    "_internal",
    "_OP_SYMBOLS",
    "_parenthesized",
    "_assign",
    "_SCOPES",
    "_LOOPS",
    "_contains_escape",
    "_may_escape",
]
REWRITES_TOP = [
    "_Renamer",
    "_YieldsToList",
    "_ModuleNamespaceAccess",
    "_deepcopy",
    "_walk_no_scopes",
    "_walk_no_scopes_body",
    "_NEW_SCOPES",
]


def text_of(start, end):
    return "\n".join(lines[start - 1 : end])


def top_chunk(name):
    n = top[name]
    s, e = span(n)
    return text_of(with_comments(s), e)


def method_chunk(name):
    n = methods[name]
    s, e = span(n)
    return text_of(with_comments(s), e)


header_end = (
    min(span(n)[0] for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr)))
    - 1
)
import_lines = [
    text_of(*span(n))
    for n in tree.body
    if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "module", None) != "__future__"
]
IMPORTS = "\n".join(import_lines)


def module(doc, body, extra_imports=""):
    return f'"""{doc}"""\n\nfrom __future__ import annotations\n\n{IMPORTS}\n{extra_imports}\n\n{body.rstrip()}\n'


PKG.mkdir(exist_ok=True)
for old in PKG.glob("*.py"):
    if old.name != "__init__.py":
        old.unlink()
SRC.unlink()


out = {}
out["core"] = (
    "The core language's vocabulary: the tables of builtins, ``Namer``, ``IRFunction`` and\nthe small constructors every form uses.",
    "\n\n\n".join(top_chunk(n) for n in CORE_TOP),
)
out["rewrites"] = (
    "Whole-tree rewrites run before or after normalising: renaming, a generator's yields\ncollected in a list, names declared ``global`` read and written in the module's namespace.",
    "\n\n\n".join(top_chunk(n) for n in REWRITES_TOP),
)
for mod, (cname, doc, ms) in MIXINS.items():
    body = (
        f'class {cname}:\n    """Methods of :class:`Normalizer`: {doc[0].lower() + doc[1:]}"""\n\n'
        + "\n\n".join(method_chunk(m) for m in ms)
    )
    out[mod] = (doc, body)

keep = lines[:]
removed = set()
for m in moved_methods:
    s_, e = span(methods[m])
    s_ = with_comments(s_)
    removed.update(range(s_, e + 1))
for n in CORE_TOP + REWRITES_TOP:
    s_, e = span(top[n])
    s_ = with_comments(s_)
    removed.update(range(s_, e + 1))
kept = "\n".join(l for i, l in enumerate(lines, 1) if i not in removed)
kept = re.sub(r"\n{3,}", "\n\n\n", kept)
bases = ", ".join(c for c, _, _ in MIXINS.values())
kept = kept.replace("class Normalizer:", f"class Normalizer({bases}):", 1)
(PKG / "normalizer.py").write_text(kept)
for mod, (doc, body) in out.items():
    (PKG / f"{mod}.py").write_text(module(doc, body, ""))


# ---- imports between the new modules, from ruff's undefined names
PKG = ROOT / "dplus/transform/normalize"
RUFF = str(Path(sys.executable).parent / "ruff")
defs = {}
for p in PKG.glob("*.py"):
    if p.name == "__init__.py":
        continue
    for n in ast.parse(p.read_text()).body:
        names = []
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names = [n.name]
        elif isinstance(n, ast.Assign):
            names = [t.id for t in n.targets if isinstance(t, ast.Name)]
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names = [n.target.id]
        for x in names:
            defs[x] = p.stem
for p in sorted(PKG.glob("*.py")):
    if p.name == "__init__.py":
        continue
    r = subprocess.run(
        [RUFF, "check", "--select", "F821", "--output-format", "json", str(p)],
        capture_output=True,
        text=True,
    )
    undefined = sorted(
        {re.search(r"`([^`]+)`", d["message"]).group(1) for d in json.loads(r.stdout)}
    )
    by_mod, typing_only, unknown = {}, [], []
    for name in undefined:
        mod = defs.get(name)
        if mod is None:
            unknown.append(name)
            continue
        if name == "Normalizer" and p.stem != "normalizer":
            typing_only.append(name)
            continue
        by_mod.setdefault(mod, []).append(name)
    lines = [f"from .{m} import {', '.join(sorted(ns))}" for m, ns in sorted(by_mod.items())]
    if typing_only:
        lines = (
            ["from typing import TYPE_CHECKING"]
            + lines
            + ["", "if TYPE_CHECKING:", "    from .builder import FunctionBuilder"]
        )
    src = p.read_text()
    tree = ast.parse(src)
    last_import = max(
        n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
    )
    L = src.split("\n")
    L[last_import:last_import] = lines
    p.write_text("\n".join(L))
    assert not unknown, (p.name, unknown)


normalizer = PKG / "normalizer.py"
normalizer.write_text(
    normalizer.read_text().replace(
        '__all__ = ["IRFunction", "normalize_function", "Namer", "closure_reads"]',
        '__all__ = ["normalize_function", "Normalizer"]',
    )
)
subprocess.run([RUFF, "check", "--select", "F401,I", "--fix", "--quiet", str(PKG)], check=False)
subprocess.run([RUFF, "format", "--quiet", str(PKG)], check=True)
