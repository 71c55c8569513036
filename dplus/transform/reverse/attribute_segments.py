"""Which attribute reads and writes join a fast segment (kinds ``attr_read``, ``attr_write``):
methods of :class:`SegmentRules` (see :meth:`FastSegment.attribute_read_forward`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..normalize.core import Core

if TYPE_CHECKING:
    from .builder_type import Builder
else:
    Builder = object  # (the mixins' shared interface, for the type checker only)

# what may run in a fast segment before an attribute read its guard makes, or an assignment
# of an attribute whose object's class the guard tests: nothing that runs user code
_ATTRIBUTE_NEIGHBOURS = frozenset(
    {"inline", "copy", "read", "write", "store", "display", "append", "attr_read", "attr_write"}
)


class AttributeSegmentRules(Builder):
    """Methods of :class:`FunctionBuilder`: attribute reads and writes in fast segments, and
    the numbers a segment makes."""

    def is_plain_attribute(self, v: ast.expr) -> bool:
        """``obj.name`` on a name (first-order code): a fast segment may read it in its guard
        or assign it in its forward when the object's class is plain for it
        (``PLAIN_ATTRIBUTES``; see :meth:`FastSegment.attribute_read_forward`)."""
        return (
            not self.nestable
            and isinstance(v, ast.Attribute)
            and isinstance(v.value, ast.Name)
            and v.value.id not in self.boxed
        )

    def attribute_read_joins(self, s: Core, cur: list[Core]) -> bool:
        """Whether ``v = obj.name`` may join the fast segment ``cur``: its guard reads it
        before any statement of the segment runs, so none before it may run user code or
        assign ``obj`` or ``obj``'s class, nor assign an attribute ``name`` (of any object:
        two names may hold one object; a read after that starts a segment of its own). Were
        ``obj`` an unbound global, the guard's NameError must not come before an error the
        program raises first: a name the function binds, or nothing before it may raise."""
        obj, name = s.value.value.id, s.value.attr
        if not self.attribute_statements_before(obj, cur):
            return False
        if any(x.dp_kind == "attr_write" and x.targets[0].attr == name for x in cur):
            return False
        return self.guard_may_read(obj, cur)

    def attribute_write_joins(self, s: Core, cur: list[Core], numbers: set[str]) -> bool:
        """Whether ``obj.name = v`` may join the fast segment ``cur``: ``v`` a number the
        segment computed or read (``numbers``), and ``obj`` such that the guard may test its
        class before the segment runs (as for a read, :meth:`attribute_read_joins`)."""
        obj = s.targets[0].value.id
        if s.value.id not in numbers or not self.attribute_statements_before(obj, cur):
            return False
        return self.guard_may_read(obj, cur)

    def guard_may_read(self, obj: str, cur: list[Core]) -> bool:
        """Whether the guard may read the name ``obj`` before ``cur`` runs: a parameter or a
        local, or nothing in ``cur`` may raise first (an unbound global's NameError must not
        come before an error the program raises)."""
        scope = self.ir.scope
        return (
            obj in scope.params
            or scope.is_local(obj)
            or all(x.dp_kind == "unpack" or self.cannot_raise(x) for x in cur)
        )

    def attribute_statements_before(self, obj: str, cur: list[Core]) -> bool:
        """Nothing in ``cur`` runs user code (arithmetic and the inline rules on numbers,
        copies, constants, element and attribute reads and writes the guard tests) or
        assigns ``obj`` (leading unpacks run before the guard)."""
        for x in cur:
            k = x.dp_kind
            if k == "unpack":
                continue
            if k not in _ATTRIBUTE_NEIGHBOURS and not (
                k == "nondiff" and isinstance(x.value, ast.Constant)
            ):
                return False
            t = x.targets[0]
            if isinstance(t, ast.Name) and t.id == obj:
                return False
        return True

    def numbers_of(self, cur: list[Core]) -> set[str]:
        """The names ``cur`` assigns numbers: arithmetic, element and attribute reads, and
        copies of those (``self.px, self.py = a, b`` assigns copies, value by value)."""
        numbers: set[str] = set()
        for x in cur:
            k = x.dp_kind
            if (
                k in ("inline", "attr_read")
                or k == "read"
                and not getattr(x, "dp_row", False)
                or k == "copy"
                and x.value.id in numbers
            ):
                numbers.add(x.targets[0].id)
        return numbers

    def used_as_numbers(
        self, run: list[Core], kinds: list[str], last_read: dict[str, int]
    ) -> set[str]:
        """The names arithmetic reads or a write stores, and the names copied to those: an
        attribute read joins a fast segment only for these (an object read to be passed on
        would fail the guard every time)."""
        if "attr_read" not in kinds:
            return set()
        used = set(last_read) | {
            st.value.id for st, k in zip(run, kinds) if k in ("attr_write", "write", "store")
        }
        for st, k in reversed(list(zip(run, kinds))):
            if k == "copy" and st.targets[0].id in used:
                used.add(st.value.id)
        return used
