"""The errors dplus raises. Every one is a :class:`DplusError`."""

from __future__ import annotations


class DplusError(Exception):
    """Base class of every error raised by dplus."""


class UnknownTransformError(DplusError, TypeError):
    """A callable with no reverse transform was asked for one, or its result received sensitivity."""


class SensitivityError(DplusError, ValueError):
    """A sensitivity does not conform to the primal it belongs to."""


class UnsupportedSyntaxError(DplusError, SyntaxError):
    """A construct dplus cannot differentiate was found at transform time."""


class SourceUnavailableError(DplusError, TypeError):
    """The source of a function could not be found, so it cannot be transformed."""


class NonDifferentiableError(DplusError, ValueError):
    """Sensitivity reached a value or operation that has no derivative."""


class ArgumentError(DplusError, TypeError):
    """A dplus function was given something it cannot use: not a function, or arguments the
    differentiated function does not accept."""


def describe_callable(fn: object) -> str:
    """A user-facing name for ``fn``: qualified name, and file:line when known."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    if module and module not in ("builtins",) and not name.startswith(module):
        name = f"{module}.{name}"
    code = getattr(fn, "__code__", None)
    if code is None and hasattr(fn, "__func__"):
        code = getattr(fn.__func__, "__code__", None)
    if code is not None:
        name += f" ({code.co_filename}:{code.co_firstlineno})"
    return name
