"""The errors dplus raises. Every one is a :class:`DplusError`."""

from __future__ import annotations

import re
import types


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


# the parts of a generated function's qualified name that the user's does not have
# (transform.reverse.syntax.choose_prefix, transformer._compile's factory)
_GENERATED_FACTORY = re.compile(r"(?:^|(?<=\.))_d(?:[p-z]|p\d+)_factory\.<locals>\.")
_GENERATED_SUFFIX = re.compile(r"__plus(?:_\d+)?(?=\.|$)")


def describe_callable(fn: object) -> str:
    """A user-facing name for ``fn``: qualified name, and file:line when known. The
    transform of a nested function is named as the user's (``f.<locals>.g``, not
    ``_dp_factory.<locals>.f__plus.<locals>.g__plus_1``)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    call = getattr(type(fn), "__call__", None)  # noqa: B004  (the class's function)
    if name is None and type(call) is types.FunctionType:
        # an object called as a function: its class and the __call__ it runs (not its repr,
        # which may be long and does not say what to decorate)
        return (
            f"a {describe_callable(type(fn))} object, whose __call__ is {describe_callable(call)}"
        )
    name = name or repr(fn)
    if "__plus" in name:
        name = _GENERATED_FACTORY.sub("", name)
        name = _GENERATED_SUFFIX.sub("", name)
    module = getattr(fn, "__module__", None)
    if module and module not in ("builtins",) and not name.startswith(module):
        name = f"{module}.{name}"
    code = getattr(fn, "__code__", None)
    if code is None and hasattr(fn, "__func__"):
        code = getattr(fn.__func__, "__code__", None)
    if code is not None:
        name += f" ({code.co_filename}:{code.co_firstlineno})"
    return name
