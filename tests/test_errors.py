"""Error classes and messages: UnsupportedSyntaxError, SourceUnavailableError,
SensitivityError, UnknownTransformError (SPEC sections 2, 6, 7)."""

from __future__ import annotations

import inspect
import math
import os

import pytest

import dplus
from dplus import (
    D,
    DplusError,
    SensitivityError,
    SourceUnavailableError,
    UnknownTransformError,
    UnsupportedSyntaxError,
    define_dplus,
    grad,
    grad1,
    lift_dplus,
)

THIS_FILE = os.path.basename(__file__)


def _line_of(fn, marker: str) -> int:
    """The absolute line number of the source line of ``fn`` containing ``marker``."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if marker in line:
            return start + i
    raise AssertionError(f"marker {marker!r} not found")


def _assert_unsupported(
    fn, marker: str, *words: str, def_line_ok: bool = False
) -> UnsupportedSyntaxError:
    with pytest.raises(UnsupportedSyntaxError) as info:
        lift_dplus(fn)
    err = info.value
    msg = str(err)
    lines = [_line_of(fn, marker)]
    if def_line_ok:  # a generator function may be reported at its def line
        lines.append(fn.__code__.co_firstlineno)
    assert THIS_FILE in msg, msg
    assert any(f"line {line}" in msg or f":{line}" in msg for line in lines), msg
    for w in words:
        assert w.lower() in msg.lower(), msg
    assert isinstance(err, DplusError) and isinstance(err, SyntaxError)
    return err


# ---------------------------------------------------------------------------
# UnsupportedSyntaxError


def f_yield(x):
    y = x * 2.0
    yield y  # MARK-yield


def test_generator_function_is_rejected():
    _assert_unsupported(f_yield, "MARK-yield", "yield", "f_yield", def_line_ok=True)


def f_yield_from(x):
    yield from [x]  # MARK-yieldfrom


def test_yield_from_is_rejected():
    _assert_unsupported(f_yield_from, "MARK-yieldfrom", "yield", def_line_ok=True)


def f_nested_generator(x):
    def gen():
        yield x  # MARK-nestedyield

    return sum(gen())


def test_nested_generator_function_is_differentiated():
    # (refused before issue #28, naming the outer function: tests/test_python_constructs.py)
    assert grad1(f_nested_generator)(5.0) == 1.0


def test_generator_expression_is_fine():
    assert grad1(lambda x: sum(v * x for v in (1.0, 2.0)))(5.0) == 3.0


async def f_async_top(x):  # MARK-asynctop
    return x


def test_async_function_is_rejected():
    with pytest.raises(UnsupportedSyntaxError) as info:
        lift_dplus(f_async_top)
    msg = str(info.value)
    assert "async" in msg
    assert THIS_FILE in msg and str(_line_of(f_async_top, "MARK-asynctop")) in msg


def f_nested_async(x):
    async def helper():  # MARK-nestedasync
        return x

    return x


def test_nested_async_def_is_rejected():
    _assert_unsupported(f_nested_async, "MARK-nestedasync", "async")


def f_class_inside(x):
    y = x * 2.0

    class Local:  # MARK-class
        k = y

    return Local.k * x


def f_async_inside(x):
    async def inner():  # MARK-async
        return x

    return x


def test_async_definition_inside_is_rejected():
    _assert_unsupported(f_async_inside, "MARK-async", "async")


def f_class_method_reads_enclosing(x):
    y = x * 2.0

    class Local:
        def m(self):
            return y

    return Local().m() * x


def f_class_property_setter_inside(x):
    class Local:  # MARK-class-setter
        def __init__(self, a):
            self._a = a

        @property
        def a(self):
            return self._a

        @a.setter
        def a(self, v):
            self._a = v * 2.0

    obj = Local(x)
    obj.a = obj.a * x
    return obj.a


def test_class_definition_inside_at_second_order():
    # (first order: tests/test_local_definitions.py; a class attribute works at second
    # order since stop 34, a method reading the function's variables since pylang5; a
    # property's setter is still refused)
    assert grad1(f_class_inside)(1.5) == 6.0
    assert grad1(grad1(f_class_inside))(1.5) == 4.0
    assert grad1(f_class_method_reads_enclosing)(1.5) == 6.0
    assert grad1(grad1(f_class_method_reads_enclosing))(1.5) == 4.0
    assert grad1(f_class_property_setter_inside)(1.5) == 6.0  # (2x²: wrong before pylang5)
    with pytest.raises(UnsupportedSyntaxError) as info:
        grad1(grad1(f_class_property_setter_inside))(1.5)
    msg = str(info.value)
    assert (
        "'Local'" in msg
        and f"line {_line_of(f_class_property_setter_inside, 'MARK-class-setter')}" in msg
        and "the method 'a' has a decorator other than" in msg
        and "module level" in msg
    )


COUNTER = 0.0


def f_global_write(x):
    global COUNTER
    COUNTER = x  # MARK-global
    return x


def f_global_augassign(x):
    global COUNTER
    COUNTER += x  # MARK-globalaug
    return x


def f_global_in_nested(x):
    def inner():
        global COUNTER
        COUNTER = 1.0  # MARK-globalnested

    inner()
    return x


def test_global_writes_happen_as_in_python():
    # (refused before issue #28; now the module namespace is a container: see
    # tests/test_python_constructs.py for their derivatives)
    global COUNTER
    for f, expected in (
        (f_global_write, 3.0),
        (f_global_augassign, 3.0),
        (f_global_in_nested, 1.0),
    ):
        COUNTER = 0.0
        assert grad1(f)(3.0) == 1.0
        assert COUNTER == expected
    COUNTER = 0.0


def f_global_read(x):
    global COUNTER
    return x * (COUNTER + 2.0)


def test_global_read_is_fine():
    assert grad1(f_global_read)(3.0) == COUNTER + 2.0


def f_global_for_target(xs):
    global COUNTER
    for COUNTER in xs:  # MARK-globalfor
        pass
    return xs[0]


def f_global_walrus(x):
    global COUNTER
    if (COUNTER := x) > 0:  # MARK-globalwalrus
        return x * COUNTER
    return x


def test_global_as_loop_target_or_walrus_target_is_written():
    global COUNTER
    assert grad(f_global_for_target)([1.0, 2.0]) == ([1.0, 0.0],)
    assert COUNTER == 2.0
    assert grad1(f_global_walrus)(5.0) == 10.0
    assert COUNTER == 5.0
    COUNTER = 0.0


def test_unsupported_error_is_raised_at_transform_time():
    # the error comes when the transform is built, before any call
    with pytest.raises(UnsupportedSyntaxError):
        grad(f_async_inside)


def test_define_dplus_of_unsupported_function_raises_when_used():
    def g(x):
        async def inner():  # (an async function inside: refused)
            return x

        return x

    define_dplus(g)

    def uses(x):
        return g(x) * 1.0

    with pytest.raises(UnsupportedSyntaxError, match="async"):
        grad1(uses)(1.0)


# ---------------------------------------------------------------------------
# SourceUnavailableError


def _exec_function():
    ns: dict = {}
    exec("def built_by_exec(x):\n    return x * x\n", ns)
    return ns["built_by_exec"]


def test_function_built_by_exec():
    f = _exec_function()
    with pytest.raises(SourceUnavailableError) as info:
        lift_dplus(f)
    msg = str(info.value)
    assert "built_by_exec" in msg
    # says what to do instead
    assert "register_primitive" in msg or "register_backprop" in msg or "file" in msg
    assert isinstance(info.value, DplusError)


def test_lambda_built_by_eval():
    f = eval("lambda x: x * 3.0")
    with pytest.raises(SourceUnavailableError, match="lambda"):
        grad(f)


def test_function_built_by_exec_works_once_registered():
    f = _exec_function()
    dplus.register_backprop(f)(lambda x: lambda A, Abox: ((), 2.0 * x * A))
    assert grad(f)(3.0) == (6.0,)


def test_exec_function_called_from_differentiated_code_names_it():
    f = _exec_function()

    def uses(x):
        return f(x) + x

    with pytest.raises(UnknownTransformError, match="built_by_exec"):
        grad1(uses)(2.0)


# ---------------------------------------------------------------------------
# SensitivityError


@define_dplus
def pair(x, y):
    return (x * x, y)


def test_list_sensitivity_for_tuple_result():
    assert D(pair)(2.0, 3.0)((1.0, 0.0)) == (4.0, 0.0)
    with pytest.raises(SensitivityError) as info:
        D(pair)(2.0, 3.0)([1.0, 0.0])
    msg = str(info.value)
    assert "list" in msg and "tuple" in msg


def test_wrong_length_sensitivity():
    with pytest.raises(SensitivityError) as info:
        D(pair)(2.0, 3.0)((1.0, 0.0, 0.0))
    msg = str(info.value)
    assert "3" in msg and "2" in msg and "length" in msg


def test_nested_mismatch_names_the_place():
    with pytest.raises(SensitivityError) as info:
        D(lambda x: (x, [x, x]))(1.0)((1.0, [1.0]))
    msg = str(info.value)
    assert "[1]" in msg and "length" in msg


def test_dict_sensitivity_with_other_keys():
    with pytest.raises(SensitivityError) as info:
        D(lambda x: {"a": x})(1.0)({"b": 1.0})
    assert "dict" in str(info.value)


def test_string_sensitivity_for_number():
    with pytest.raises(SensitivityError) as info:
        D(lambda x: x * 2.0)(1.0)("one")
    msg = str(info.value)
    assert "str" in msg and ("float" in msg or "number" in msg)


def test_number_sensitivity_for_non_differentiable_result():
    with pytest.raises(SensitivityError, match="None"):
        D(lambda x: "text")(1.0)(1.0)


def test_grad_of_non_scalar_needs_sensitivity():
    with pytest.raises(SensitivityError) as info:
        grad(lambda x: [x, x])(1.0)
    msg = str(info.value)
    assert "list" in msg and "sensitivity" in msg
    assert grad(lambda x: [x, x], sensitivity=[1.0, 2.0])(1.0) == (3.0,)


def test_grad_sensitivity_shape_checked():
    with pytest.raises(SensitivityError):
        grad(lambda x: (x, x), sensitivity=(1.0,))(1.0)


def test_array_sensitivity_shape():
    np = pytest.importorskip("numpy")
    with pytest.raises(SensitivityError) as info:
        D(lambda a: a * 2.0)(np.ones(3))(np.ones(2))
    assert "shape" in str(info.value)


def test_sensitivity_error_is_value_error():
    with pytest.raises(ValueError):
        D(pair)(2.0, 3.0)([1.0, 0.0])


# ---------------------------------------------------------------------------
# UnknownTransformError


def unregistered_helper(x):
    return x * x


def test_unknown_callable_with_sensitivity_names_it():
    def f(x):
        return unregistered_helper(x) + x

    with pytest.raises(UnknownTransformError) as info:
        grad1(f)(2.0)
    msg = str(info.value)
    assert "unregistered_helper" in msg
    assert THIS_FILE in msg
    assert str(unregistered_helper.__code__.co_firstlineno) in msg
    # and how to fix it
    assert (
        "define_dplus" in msg and "register_backprop" in msg and "current_unknown_transform" in msg
    )


def test_unknown_callable_without_sensitivity_just_runs():
    calls = []

    def log(v):
        calls.append(v)

    def f(x):
        log(x)
        if unregistered_helper(x) > 1.0:
            return x * 3.0
        return x

    assert grad1(f)(2.0) == 3.0
    assert calls == [2.0]


def test_error_unknown_proc_transform_policy():
    def f(x):
        if unregistered_helper(x) > 1.0:
            return x
        return 2.0 * x

    with dplus.current_unknown_transform(dplus.error_unknown_proc_transform):
        with pytest.raises(UnknownTransformError, match="unregistered_helper"):
            grad1(f)(2.0)
    # the default is restored afterwards
    assert dplus.current_unknown_transform() is dplus.error_non_zero_sensitivity_transform
    assert grad1(f)(2.0) == 1.0


def test_policy_restored_after_exception():
    with pytest.raises(RuntimeError):
        with dplus.current_unknown_transform(dplus.error_unknown_transform):
            raise RuntimeError("x")
    assert dplus.current_unknown_transform() is dplus.error_non_zero_sensitivity_transform


def test_error_unknown_transform_for_non_callable():
    with pytest.raises(UnknownTransformError):
        dplus.error_unknown_transform(3, "three")
    assert dplus.error_unknown_proc_transform(3, "three") == 3


class Opaque:
    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v


def test_unknown_method_named_with_class():
    def f(x):
        return Opaque(x).get() * 2.0

    with pytest.raises(UnknownTransformError) as info:
        grad1(f)(1.0)
    assert "Opaque.get" in str(info.value)


def test_unknown_c_function_named():
    import operator

    def f(x):
        return math.gamma(x) if False else float.__mul__(x, 2.0) + operator.length_hint([x]) * 0.0

    with pytest.raises(UnknownTransformError) as info:
        grad1(f)(1.0)
    assert "__mul__" in str(info.value)


def test_unknown_transform_error_is_type_error():
    with pytest.raises(TypeError):
        grad1(lambda x: unregistered_helper(x))(1.0)


def test_unknown_callable_receiving_mutable_sensitivity():
    def make_list(x):
        return [x, x]

    def f(x):
        ys = make_list(x)
        return ys[0] * 2.0

    with pytest.raises(UnknownTransformError, match="make_list"):
        grad1(f)(1.0)


# ---------------------------------------------------------------------------
# every error is a DplusError


def test_error_hierarchy():
    for cls in (
        UnknownTransformError,
        SensitivityError,
        UnsupportedSyntaxError,
        SourceUnavailableError,
        dplus.NonDifferentiableError,
    ):
        assert issubclass(cls, DplusError)


def test_numpy_in_place_error_message():
    np = pytest.importorskip("numpy")

    def f(a, x):
        a[0] = x
        return a.sum()

    # (a[0] = x is differentiated now; writing into a broadcast view is still refused, naming it)
    assert grad(f)(np.zeros(2), 1.0)[1] == 1.0

    def g(a, x):
        b = np.broadcast_to(a, (2, 2))
        b[0, 0] = x
        return b.sum()

    with pytest.raises(dplus.NonDifferentiableError) as info:
        grad(g)(np.zeros(2), 1.0)
    assert "broadcast view" in str(info.value)


def test_set_elements_from_outside_cannot_carry_sensitivity():
    # (a set made inside is differentiable, issue #28: tests/test_python_constructs.py)
    def f(x):
        s = {x, 2.0 * x}
        return sum(s)

    assert grad1(f)(1.0) == 3.0
    with pytest.raises(DplusError, match="set"):
        grad(lambda s, x: sum(s) * x)({1.0, 2.0}, 3.0)


# ---------------------------------------------------------------------------
# tracebacks point at the user's file and line (SPEC 9)


def _last_frame(fn, *args):
    import traceback

    with pytest.raises(ZeroDivisionError) as info:
        grad(fn)(*args)
    return traceback.extract_tb(info.value.__traceback__)[-1]


def tb_single(x):
    z = x / 0.0  # MARK-tb-single
    return z


def test_traceback_points_at_user_line():
    fr = _last_frame(tb_single, 1.0)
    assert fr.filename.endswith(THIS_FILE)
    assert fr.lineno == _line_of(tb_single, "MARK-tb-single")


def tb_second_statement(x):
    y = x * 2.0
    z = y / 0.0  # MARK-tb-second
    return z


def test_traceback_points_at_failing_line_in_fast_path():
    fr = _last_frame(tb_second_statement, 1.0)
    assert fr.filename.endswith(THIS_FILE)
    assert fr.lineno == _line_of(tb_second_statement, "MARK-tb-second")


class CallableThing:
    def __call__(self, x):
        return x * 2.0


def test_unknown_callable_object_named_by_its_class():
    thing = CallableThing()

    def f(x):
        return thing(x)

    with pytest.raises(UnknownTransformError) as info:
        grad1(f)(1.0)
    msg = str(info.value)
    assert "CallableThing" in msg
    assert " object at 0x" not in msg
    assert "CallableThing.__call__" in msg  # (what to decorate)


# --------------------------------------------------------------------------
# unknown functions that change what they are given


class Recorder:
    def __init__(self):
        self.items = []

    def record(self, v):  # deliberately not registered: an unknown method
        self.items.append(v * 2.0)


def _append_twice(xs, v):  # deliberately not registered
    xs.append(v)
    xs.append(v)


def _log(log, v):  # deliberately not registered
    log.append(float(v))


def records_then_reads(c):
    r = Recorder()
    r.record(c)
    return r.items[0]


def appends_then_reads(c):
    xs = [1.0]
    _append_twice(xs, c)
    return xs[1] * xs[2]


def logs_without_reading(c, log):
    _log(log, c)
    return c * c


def test_an_unknown_function_that_changes_what_the_result_reads_is_an_error():
    # the change is invisible to dplus: a gradient would silently miss it
    with pytest.raises(
        UnknownTransformError, match=r"Recorder.record.*changed a list it was given"
    ):
        dplus.grad(records_then_reads)(1.5)
    with pytest.raises(UnknownTransformError, match=r"_append_twice.*changed a list it was given"):
        dplus.grad(appends_then_reads)(1.5)
    # a change nothing reads afterwards is fine
    log: list = []
    assert dplus.grad(logs_without_reading)(1.5, log) == (3.0, [])  # (its layout at the call)
    assert log == [1.5]
