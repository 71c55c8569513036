"""Migration aid for issue #19 (delete after the branches of that day are merged): rebuild
dplus/transform/reverse/ from a dplus/transform/reverse.py of one piece.

A branch that edited the old dplus/reverse.py merges as a modify/delete conflict: take that
branch's reverse.py (imports rewritten as in the move commit) to dplus/transform/reverse.py,
run ``.venv/bin/python tools/split_reverse.py .`` and the package's modules are generated
again from it, method by method (the table of methods per mixin is MIXINS below; a method
the branch added lands in builder.py: move it to its mixin). reverse/__init__.py is kept.
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
SRC = ROOT / "dplus/transform/reverse.py"
PKG = ROOT / "dplus/transform/reverse"
text = SRC.read_text()
# one level deeper: every relative import gets one more dot
text = re.sub(r"^(\s*from )(\.+)", lambda m: m.group(1) + m.group(2) + ".", text, flags=re.M)
# normalize is a package too (its names are in normalize.core)
text = text.replace("from ..normalize import", "from ..normalize.core import")
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


cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FunctionBuilder")
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
    "segments": (
        "SegmentRules",
        "Which statements run together (segments) and the general path of a segment.",
        [
            "inline_rule",
            "resolve_static",
            "is_static_chain",
            "on_constants_only",
            "is_module_constant",
            "kind",
            "segments",
            "segment",
            "general_segment",
            "stored_displays",
        ],
    ),
    "fast_paths": (
        "FastPathRules",
        "Specialisation: float fast segments under a type guard, and the fused gradient of a\nfunction whose body is one fast segment.",
        [
            "fused_gradient",
            "fast_segment",
            "may_be_complex",
            "numbers_kept",
            "number_guard",
            "operands",
        ],
    ),
    "replay": (
        "ReplayRules",
        "Specialisation: the general variant of a segment as a replay program\n(``runtime.ops.replay_segment``) instead of generated reverse code.",
        ["replay_plan", "replay_reverse"],
    ),
    "statements": (
        "StatementRules",
        "Assignments and unpacking outside fast segments: one statement of the general path.",
        ["unpack_reverse", "unpack_back", "direct_unpack", "ssa_defined_names", "general_stmt"],
    ),
    "containers": (
        "ContainerRules",
        "Subscripts, list reads and writes, displays and ``del``.",
        [
            "not_a_slice",
            "sequence_read",
            "native_append",
            "list_write",
            "slice_expr",
            "display",
            "native_display",
            "delete_stmt",
        ],
    ),
    "calls": (
        "CallRules",
        "Calls, operators and closures (nested ``def``).",
        ["calls_directly", "binop", "call_like", "closure_stmt"],
    ),
    "loops": (
        "LoopRules",
        "``for`` and ``while``: iteration counts, routing element sensitivities.",
        [
            "zip_statement",
            "loop_over_zip",
            "loop_common",
            "c_For",
            "list_length",
            "routed",
            "hand_back",
            "loop_with_fast_prefix",
            "c_While",
            "may_mutate",
        ],
    ),
    "fast_loops": (
        "FastLoopRules",
        "Specialisation of loops: a fast prefix loop over one fast segment, and loops over\nlists of numbers (``zip``) with their sensitivities as columns.",
        [
            "loop_over_lists",
            "mapped_columns",
            "comprehension",
            "fast_prefix_loop",
            "prefix_records",
            "unpacked_items",
            "unless_zero",
            "item_columns",
        ],
    ),
    "exceptions": (
        "ExceptionRules",
        "``try``, ``with`` and ``match``.",
        ["c_Try", "atomic_if", "atomic_branch", "builds_builtin_exception", "c_With", "c_Match"],
    ),
}
moved_methods = {m for _, _, ms in MIXINS.values() for m in ms}
assert moved_methods <= set(methods), moved_methods - set(methods)

SYNTAX_TOP = [
    "_NUM_TYPES",
    "_POWERS",
    "FAST_PATHS",
    "_SEQ_TYPES",
    "PFX",
    "ABOX",
    "_set_prefix",
    "choose_prefix",
    "BINOPS",
    "INPLACE",
    "UNARYOPS",
    "_NotReplayable",
    "Helpers",
    "_TRY_STAR",
    "FastParts",
    "N",
    "S",
    "C",
    "assign",
    "call",
    "attr",
    "tuple_",
    "unpack",
    "_is_atom",
    "_is_name",
    "_propagated_reads",
    "_names_read",
    "_is_number_const",
    "_NODE_FIELDS",
    "_assigned_names",
    "_node_fields",
    "_locate",
    "_locate_all",
    "_gen_zero",
    "_procresult",
    "_nondiff_error",
    "_deletes_name",
]
TEMPLATES_TOP = [
    "_ResolveChains",
    "Template",
    "_RecordingHelpers",
    "_parse_template",
    "_PARSED_TEMPLATES",
    "_whole_power_gradient",
    "template_for",
]
SSA_TOP = ["_SSA", "_AdjointAccumulator"]


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
PREFIX_RE = re.compile(r"(?<![\w.\"'])\b(PFX|ABOX|PUSH|POP|TAPE)\b")


def qualify_prefix(src):
    return PREFIX_RE.sub(lambda m: "syntax." + m.group(1), src)


def module(doc, body, extra_imports=""):
    return f'"""{doc}"""\n\nfrom __future__ import annotations\n\n{IMPORTS}\n{extra_imports}\n\n{body.rstrip()}\n'


PKG.mkdir(exist_ok=True)
for old in PKG.glob("*.py"):
    if old.name != "__init__.py":
        old.unlink()
SRC.unlink()

LOCAL = "from . import syntax\n"

out = {}
SET_DEFAULT = '_set_prefix("_dp_")'
LOAD_STORE = next(l for l in lines if l.startswith("_LOAD, _STORE = "))
assert SET_DEFAULT in lines
out["syntax"] = (
    "The syntax the reverse transform builds: operator tables, the prefix of generated names,\nthe helpers table and short constructors of AST nodes.",
    "\n\n\n".join(
        (LOAD_STORE + "\n\n\n" if n == "N" else "")
        + top_chunk(n)
        + ("\n\n\n" + SET_DEFAULT if n == "_set_prefix" else "")
        for n in SYNTAX_TOP
    ),
)
out["templates"] = (
    "Inline rules as templates: a rule's gradient lambdas parsed once, to be copied into\nfloat fast paths.",
    "\n\n\n".join(top_chunk(n) for n in TEMPLATES_TOP),
)
out["ssa"] = (
    "One segment in single-assignment form (``_SSA``) and the accumulator of its adjoints.",
    "\n\n\n".join(top_chunk(n) for n in SSA_TOP),
)
for mod, (cname, doc, ms) in MIXINS.items():
    if mod == "calls":  # (a nested def gets a builder of its own, as this one is)
        assert "        child = FunctionBuilder(" in "\n".join(method_chunk(m) for m in ms)
    body = (
        f'class {cname}:\n    """Methods of :class:`FunctionBuilder`: {doc.splitlines()[0][0].lower() + doc.splitlines()[0][1:]}"""\n\n'
        + "\n\n".join(method_chunk(m) for m in ms)
    )
    out[mod] = (doc, body)

# the builder keeps the rest of the class and the entry point
keep = lines[:]
removed = set()
for m in moved_methods:
    s, e = span(methods[m])
    s = with_comments(s)
    removed.update(range(s, e + 1))
for n in SYNTAX_TOP + TEMPLATES_TOP + SSA_TOP:
    s, e = span(top[n])
    s = with_comments(s)
    removed.update(range(s, e + 1))
builder = "\n".join(
    l for i, l in enumerate(lines, 1) if i not in removed and l not in (SET_DEFAULT, LOAD_STORE)
)
builder = qualify_prefix(builder)
builder = re.sub(r"\n{3,}", "\n\n\n", builder)
bases = ", ".join(c for c, _, _ in MIXINS.values())
builder = builder.replace("class FunctionBuilder:", f"class FunctionBuilder({bases}):", 1)
mix_imports = "\n".join(f"from .{m} import {c}" for m, (c, _, _) in MIXINS.items())
builder = builder.replace("from ..trees import", "from . import syntax\nfrom ..trees import", 1)
(PKG / "builder.py").write_text(builder)
for mod, (doc, body) in out.items():
    src = module(doc, body, "" if mod == "syntax" else LOCAL)
    if mod != "syntax":
        src = qualify_prefix(src)
    src = src.replace("        child = FunctionBuilder(", "        child = type(self)(")
    (PKG / f"{mod}.py").write_text(src)


# ---- imports between the new modules, from ruff's undefined names

PKG = ROOT / "dplus/transform/reverse"
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
        if name == "FunctionBuilder" and p.stem != "builder":
            typing_only.append(name)
            continue
        by_mod.setdefault(mod, []).append(name)
    lines = [f"from .{m} import {', '.join(sorted(ns))}" for m, ns in sorted(by_mod.items())]
    if typing_only:
        lines = lines + [
            "",
            "# The builder is typed Any here: builder.py imports this module, so this one cannot import it.",
            "FunctionBuilder = Any",
        ]
    src = p.read_text()
    tree = ast.parse(src)
    last_import = max(
        n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
    )
    L = src.split("\n")
    L[last_import:last_import] = lines
    p.write_text("\n".join(L))
    assert not unknown, (p.name, unknown)


subprocess.run([RUFF, "check", "--select", "F401,I", "--fix", "--quiet", str(PKG)], check=False)
subprocess.run([RUFF, "format", "--quiet", str(PKG)], check=True)

# the builder's section comments left without their sections, and its docstring
bar = "# ---------------------------------------------------------------------------\n"
b = (PKG / "builder.py").read_text()
b = b.replace(
    bar + "# inline templates\n\n\n" + bar + "# the builder\n",
    bar + "# the builder: entry, records, blocks; the rules by construct are its mixins\n",
)
b = b.replace(
    bar + "# SSA renaming inside a segment\n\n\n" + bar + "\n\n", bar + "# the entry point\n\n\n"
)
first = '"""The reverse transform: from the normalised core to the AST of a plus-function.\n'
b = b.replace(
    first,
    first
    + "\n``FunctionBuilder`` here keeps the walk (the entry, the record, blocks, ``if``); how each\nconstruct is reversed is in its mixins, one module per family (the table is in this\npackage's docstring).\n",
    1,
)
(PKG / "builder.py").write_text(b)
subprocess.run([RUFF, "check", "--select", "F401,I", "--fix", "--quiet", str(PKG)], check=False)
subprocess.run([RUFF, "format", "--quiet", str(PKG)], check=True)
