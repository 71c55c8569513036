"""A function defined inside the differentiated code is, under ``grad``, a function made by
generated code (``inner__plus_1``). What the program can read of it must be what Python
shows: its ``__name__``, ``__qualname__``, docstring and ``inspect.signature``. Before, a
program logging ``fn.__name__`` or keying a table by it ran differently under ``grad``
(it saw ``inner__plus_1``, ``lambda__plus_2``, no docstring, ``(*args, **kwargs)``).

Also here: a nested function whose keyword-only parameter defaults to ``None`` raised a raw
``TypeError`` ("missing a required argument") under ``grad``: ``None`` was taken for "no
default" when its signature was built.
"""

from __future__ import annotations

import inspect
import math

import pytest
from path_helpers import check_first_order, check_second_order

SEEN: list = []


def _describe(fn):
    return (fn.__name__, fn.__qualname__, fn.__doc__, str(inspect.signature(fn)), repr(fn)[:-16])


def names_read(x, y):
    def scaled(v, k=2.0, *, m=1.5):
        "a docstring"
        return v * k * m * y

    def outer(v):
        def innermost(w):
            return math.sin(w * x)

        SEEN.append(_describe(innermost))
        return innermost(v)

    square = lambda t: t * t
    table = {fn.__name__: fn for fn in (scaled, outer, square)}
    SEEN.extend([_describe(fn) for fn in (scaled, outer, square)])
    return table["scaled"](x) + table["outer"](y) + table["<lambda>"](x * y)


def keyword_only_default_none(x, y):
    def inner(v, *, m=None, k=2.0, n=None):
        scale = k if m is None else m
        return v * x * scale + (0.0 if n is None else n)

    return inner(y) + inner(x, m=y) + inner(x, n=x * y)


POINTS = [(0.7, -1.3), (-0.6, 2.2)]


@pytest.mark.parametrize("point", POINTS)
def test_a_nested_function_shows_the_users_name_docstring_and_parameters(point):
    SEEN.clear()
    names_read(*point)
    plain = list(SEEN)
    assert ("scaled", "names_read.<locals>.scaled", "a docstring") == plain[0][:3]
    SEEN.clear()
    check_first_order(names_read, *point)
    assert SEEN and all(seen == plain[k % len(plain)] for k, seen in enumerate(SEEN))
    SEEN.clear()
    check_second_order(names_read, *point)
    assert SEEN and all(seen == plain[k % len(plain)] for k, seen in enumerate(SEEN))


@pytest.mark.parametrize("point", POINTS)
def test_a_keyword_only_parameter_defaulting_to_none(point):
    check_first_order(keyword_only_default_none, *point)
    check_second_order(keyword_only_default_none, *point)
