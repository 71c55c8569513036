"""An opt-in cache of generated code on disk, shared by processes (as Numba's ``cache=True``).

A big function is transformed once per change, not once per process: the generated code
objects are written to a directory under a key that covers everything the code depends on,
and a later process with the same key loads them instead of transforming again.

The key (:func:`entry_key`) is a digest of

- the dplus version and the text of dplus's own modules, the Python version and the
  marshal format, the code-generation switches (fast paths, inlining);
- the function: its module, name, code object and the whole text of its source file (the
  transformation reads the file, and inlines functions of the same file);
- what the transformation looked up: a description of every global of the function's
  module (modules by name, functions by their code and closures, classes and callables by
  name, constants of a few types by value, other values by type) and of the builtins its
  code names, and of its closure cells;
- every registered rule and inline rule, and the unknown-function policy in force.

An entry holds the code objects (``marshal``) and, for each value the code refers to, a
*recipe* to find the same value in the loading process (a module attribute, a dplus global,
a global of the function's module). An entry that cannot be read, fails its checksum, was
made for another key or names a value that cannot be found is a miss: the function is
transformed as without the cache. Writes go to a temporary file renamed into place, so a
reader never sees half an entry.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import importlib
import linecache
import marshal
import os
import re
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any

__all__ = ["enable_cache", "disable_cache", "cache_directory", "STATS"]

_FORMAT = b"dplus-code-cache-1\n"
_ENV_VAR = "DPLUS_CACHE_DIR"
_DIRECTORY: list[Path | None] = [None]
_LOCK = threading.Lock()
# counts since the process started (tests and benchmarks read them)
STATS = {"hits": 0, "misses": 0, "writes": 0, "unstorable": 0}


def enable_cache(path: str | os.PathLike | None = None) -> Path:
    """Keep generated code in the directory ``path`` (created if needed), or in the one named
    by the environment variable ``DPLUS_CACHE_DIR`` when ``path`` is omitted; returns it."""
    if path is None:
        path = os.environ.get(_ENV_VAR)
        if not path:
            raise ValueError(
                "dplus.enable_cache() needs a directory: pass one, or set DPLUS_CACHE_DIR"
            )
    directory = Path(path).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    _DIRECTORY[0] = directory
    return directory


def disable_cache() -> None:
    """Stop reading and writing the cache (entries on disk stay)."""
    _DIRECTORY[0] = None


def cache_directory() -> Path | None:
    """The cache's directory, or None when the cache is off."""
    return _DIRECTORY[0]


def enable_from_environment() -> None:
    if os.environ.get(_ENV_VAR):
        try:
            enable_cache()
        except OSError:
            pass  # an unusable directory leaves the cache off, as if the variable were unset


# ---------------------------------------------------------------------------
# the key


class Unkeyable(Exception):
    """The function's dependencies cannot be pinned down (no source file text): no caching."""


def entry_key(f: types.FunctionType, switches: tuple) -> str:
    """The digest of everything ``f``'s generated code depends on (see the module docstring)."""
    code = f.__code__
    linecache.checkcache(code.co_filename)  # (the text the transformation reads: see source.py)
    lines = linecache.getlines(code.co_filename, f.__globals__)
    if not lines:
        raise Unkeyable(code.co_filename)
    h = hashlib.sha256(_FORMAT)
    for part in (
        _dplus_version(),
        _dplus_sources_digest(),
        sys.version,
        str(marshal.version),
        repr(switches),
        str(getattr(f, "__module__", None)),
        f.__qualname__,
        _code_digest(code),
        hashlib.sha256("".join(lines).encode("utf-8", "surrogatepass")).hexdigest(),
        repr(_describe_globals(f)),
        repr(tuple(_describe(_cell_contents(c)) for c in f.__closure__ or ())),
        repr((_describe(f.__defaults__), _describe(f.__kwdefaults__))),
        _rules_digest(),
        repr(_describe(_current_policy())),
    ):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def _dplus_version() -> str:
    return str(getattr(sys.modules.get("dplus"), "__version__", "?"))


_SOURCES_DIGEST: list[str] = []


def _dplus_sources_digest() -> str:
    """The text of dplus's own modules (an edit of dplus without a new version is a change)."""
    if not _SOURCES_DIGEST:
        h = hashlib.sha256()
        root = Path(__file__).resolve().parent
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
        primitives = sys.modules.get("dplus.primitives")
        for folder in getattr(primitives, "__path__", ()):
            for path in sorted(Path(folder).rglob("*.py")):
                h.update(path.name.encode())
                h.update(path.read_bytes())
        _SOURCES_DIGEST.append(h.hexdigest())
    return _SOURCES_DIGEST[0]


_CODE_DIGESTS: dict[int, tuple[types.CodeType, str]] = {}
# the number that makes the name of generated text unique in its process (the key has the text)
_GENERATED_NUMBER = re.compile(r" #\d+>$")


def _code_digest(code: types.CodeType) -> str:
    """A digest of a code object and the code nested in it (same in every process)."""
    known = _CODE_DIGESTS.get(id(code))
    if known is not None and known[0] is code:
        return known[1]
    h = hashlib.sha256()
    for field in (
        code.co_qualname,
        _GENERATED_NUMBER.sub(">", code.co_filename),
        code.co_firstlineno,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
    ):
        h.update(repr(field).encode("utf-8", "surrogatepass"))
    h.update(code.co_code)
    h.update(code.co_linetable)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            h.update(_code_digest(const).encode())
        else:
            h.update(repr(_describe(const, depth=3)).encode("utf-8", "surrogatepass"))
    digest = h.hexdigest()
    _CODE_DIGESTS[id(code)] = (code, digest)
    return digest


_SMALL_STR = 200


def _describe(value: Any, depth: int = 2) -> tuple:
    """What the transformation may have read of ``value``, the same in every process: no ids,
    no addresses. Values compare by what they are (a module by name, a function by its code)."""
    t = type(value)
    if value is None or t is bool or t is type(Ellipsis):
        return ("c", repr(value))
    if t in (int, float, complex):
        return ("n", t.__name__)  # (numbers are read at run time, never built into code)
    if t in (str, bytes):
        return ("c", repr(value)) if len(value) <= _SMALL_STR else ("s", t.__name__, len(value))
    if t is types.ModuleType:
        return ("m", value.__name__)
    if isinstance(value, type):
        return ("t", value.__module__, value.__qualname__)
    if t is types.FunctionType:
        inner = (
            (
                tuple(_describe(_cell_contents(c), depth - 1) for c in value.__closure__ or ()),
                _describe(value.__defaults__, depth - 1),
            )
            if depth > 0
            else ()
        )
        return ("f", value.__module__, value.__qualname__, _code_digest(value.__code__), inner)
    if t is types.MethodType:
        return ("bm", _describe(value.__func__, depth), _type_name(value.__self__))
    if t in (tuple, frozenset) and depth > 0 and len(value) <= 64:
        items = [_describe(v, depth - 1) for v in value]
        return (t.__name__, tuple(items) if t is tuple else tuple(sorted(items, key=repr)))
    return (
        "o",
        _type_name(value),
        str(getattr(value, "__module__", "")),
        str(getattr(value, "__qualname__", getattr(value, "__name__", ""))),
    )


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def _cell_contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_CELL


_EMPTY_CELL = ("<empty cell>",)


def _describe_globals(f: types.FunctionType) -> tuple:
    """Every global of ``f``'s module (a function with whether ``define_dplus`` registered it),
    and every builtin its code names."""
    namespace = f.__globals__
    described = [
        (name, _describe(value), _derived_from_source(value))
        for name, value in namespace.items()
        if not (name.startswith("__") and name != "__name__")
    ]
    described.sort(key=lambda item: item[0])
    names = sorted(_names_used(f.__code__) - set(namespace))
    described += [(name, _describe(getattr(builtins, name, _EMPTY_CELL)), False) for name in names]
    return tuple(described)


def _derived_from_source(fn: Any) -> bool:
    from ..runtime.registry import _TRANSFORMS

    try:
        transform = _TRANSFORMS.get(fn)
    except TypeError:  # (unhashable)
        return False
    return transform is not None and getattr(transform, "__dplus_source__", None) is fn


def _names_used(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used(const)
    return names


_RULES_DIGEST: list[Any] = [None, ""]


def _rules_digest() -> str:
    """A digest of every rule written by hand and inline rule (recomputed after a registration).
    The rules ``define_dplus`` derives from source count where the function's module names
    them (:func:`_describe_globals`): the transformation inlines only those."""
    from .. import rules
    from ..runtime import registry

    state = (registry.changes(), len(registry._TRANSFORMS), len(rules._INLINE))
    if _RULES_DIGEST[0] == state:
        return _RULES_DIGEST[1]
    entries = []
    for fn, transform in list(registry._TRANSFORMS.items()):
        if getattr(transform, "__dplus_source__", None) is not fn:
            entries.append(repr((_describe(fn), _describe(transform))))
    for fn, rule in list(rules._INLINE.items()):
        entries.append(repr(("inline", _describe(fn), _describe(tuple(rule.grads)))))
    for transform, form in list(registry._NEXT_ORDER_FORMS.items()):
        entries.append(repr(("next order", _describe(transform), _describe(form))))
    h = hashlib.sha256()
    for entry in sorted(entries):
        h.update(entry.encode("utf-8", "surrogatepass"))
    _RULES_DIGEST[:] = [state, h.hexdigest()]
    return _RULES_DIGEST[1]


def _current_policy() -> Any:
    from ..runtime.hooks import hooks

    return hooks.unknown_transform_policy()


# ---------------------------------------------------------------------------
# recipes: how another process finds the values the generated code refers to


class Unfindable(Exception):
    """A value the generated code refers to has no recipe (the entry is not written), or its
    recipe finds nothing in this process (the entry is a miss)."""


def recipe_for(value: Any, f: types.FunctionType, special: dict[int, str]) -> tuple:
    t = type(value)
    if id(value) in special:
        return ("special", special[id(value)])
    if value is None or t in (bool, int, float, complex, str, bytes):
        return ("const", value)
    if t is types.ModuleType:
        return ("module", value.__name__)
    if t in (tuple, frozenset):
        return (t.__name__, tuple(recipe_for(v, f, special) for v in value))
    found = _dplus_global_name(value)
    if found is not None:
        return ("dplus", *found)
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        try:
            if _resolve_qualified(module, qualname, importing=False) is value:
                return ("qual", module, qualname)
        except Unfindable:
            pass
    for name, v in f.__globals__.items():
        if v is value:
            return ("global", name)
    raise Unfindable(repr(value))


def follow_recipe(recipe: tuple, f: types.FunctionType, special: dict[str, Any]) -> Any:
    kind = recipe[0]
    if kind == "special":
        return special[recipe[1]]
    if kind == "const":
        return recipe[1]
    if kind == "module":
        return _import(recipe[1])
    if kind == "tuple":
        return tuple(follow_recipe(r, f, special) for r in recipe[1])
    if kind == "frozenset":
        return frozenset(follow_recipe(r, f, special) for r in recipe[1])
    if kind == "dplus":
        module = _import(recipe[1])
        if recipe[2] not in vars(module):
            raise Unfindable(recipe)
        return vars(module)[recipe[2]]
    if kind == "qual":
        value = _resolve_qualified(recipe[1], recipe[2], importing=True)
        # a different object under the name (math.sin rebound) is another function
        if getattr(value, "__module__", None) != recipe[1] or (
            getattr(value, "__qualname__", None) != recipe[2]
        ):
            raise Unfindable(recipe)
        return value
    if kind == "global":
        if recipe[1] not in f.__globals__:
            raise Unfindable(recipe)
        return f.__globals__[recipe[1]]
    raise Unfindable(recipe)


def _import(name: str) -> types.ModuleType:
    module = sys.modules.get(name)
    if module is None:
        try:
            module = importlib.import_module(name)
        except Exception:
            raise Unfindable(name) from None
    return module


def _resolve_qualified(module: str, qualname: str, importing: bool) -> Any:
    obj: Any = _import(module) if importing else sys.modules.get(module)
    if obj is None:
        raise Unfindable(module)
    for part in qualname.split("."):
        if part == "<locals>":
            raise Unfindable(qualname)
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise Unfindable(qualname) from None
    return obj


_DPLUS_INDEX: dict[int, tuple[Any, str, str]] = {}
_INDEXED_MODULES: set[str] = set()


def _dplus_global_name(value: Any) -> tuple[str, str] | None:
    """``(module, name)`` of a global of a dplus module holding ``value`` (gen_zero, a set of
    types), or None."""
    modules = [
        name
        for name in list(sys.modules)
        if (name == "dplus" or name.startswith("dplus.")) and name not in _INDEXED_MODULES
    ]
    for name in modules:
        _INDEXED_MODULES.add(name)
        for attr, v in list(vars(sys.modules[name]).items()):
            if type(v) not in (bool, int, float, str, types.ModuleType):
                _DPLUS_INDEX.setdefault(id(v), (v, name, attr))
    found = _DPLUS_INDEX.get(id(value))
    if found is None or found[0] is not value:
        return None
    return found[1], found[2]


# ---------------------------------------------------------------------------
# entries on disk


def _path_for(directory: Path, key: str) -> Path:
    return directory / key[:2] / f"{key}.dpc"


def load(key: str) -> dict | None:
    """The entry stored under ``key``, or None (absent, unreadable, corrupt, or another key's)."""
    directory = _DIRECTORY[0]
    if directory is None:
        return None
    try:
        data = _path_for(directory, key).read_bytes()
    except OSError:
        return None
    head = len(_FORMAT)
    if data[:head] != _FORMAT or len(data) < head + 32:
        return None
    checksum, payload = data[head : head + 32], data[head + 32 :]
    if hashlib.sha256(payload).digest() != checksum:
        return None
    try:
        entry = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if type(entry) is not dict or entry.get("key") != key:
        return None
    return entry


def store(key: str, entry: dict) -> None:
    """Write ``entry`` under ``key`` (atomically); a failure to write is not an error."""
    directory = _DIRECTORY[0]
    if directory is None:
        return
    entry = dict(entry, key=key)
    try:
        payload = marshal.dumps(entry)
    except ValueError:
        STATS["unstorable"] += 1
        return
    path = _path_for(directory, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".dpc")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_FORMAT + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return
    STATS["writes"] += 1
