"""dplus in a real Jupyter kernel (issue #23): functions, lambdas and methods defined in
cells are differentiated and shown; a function redefined in a later cell is
differentiated in its new form. The kernel is ipykernel, started by jupyter_client."""

from __future__ import annotations

import queue
import sys
import textwrap

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(
        kernel_name="python3",
        extra_arguments=["--HistoryManager.enabled=False"],
        startup_timeout=120,
    )
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def run_cell(client, code: str) -> str:
    """Run ``code`` as a cell; return what it printed; fail with the kernel's traceback."""
    msg_id = client.execute(textwrap.dedent(code))
    out: list[str] = []
    while True:
        try:
            msg = client.get_iopub_msg(timeout=120)
        except queue.Empty:
            pytest.fail("the kernel did not answer in time")
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            pytest.fail("cell failed:\n" + "\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)


def test_kernel_uses_this_interpreter(kernel):
    assert run_cell(kernel, "import sys; print(sys.executable)").strip() == sys.executable


def test_functions_lambdas_and_methods_defined_in_cells(kernel):
    run_cell(
        kernel,
        """
        import math
        import dplus
        def f(x, y):
            s = 0.0
            for i in range(3):
                s = s + math.sin(x * i) * y
            return s
    """,
    )
    out = run_cell(
        kernel,
        """
        g = dplus.grad(f)(0.5, 2.0)
        expected = (sum(i * math.cos(0.5 * i) * 2.0 for i in range(3)), sum(math.sin(0.5 * i) for i in range(3)))
        print(all(abs(a - b) < 1e-12 for a, b in zip(g, expected)))
        square = lambda x: x * x * 3.0
        print(dplus.grad1(square)(2.0))
        print(dplus.grad1(dplus.grad1(math.cos))(0.0))
    """,
    )
    assert out.split() == ["True", "12.0", "-1.0"]
    out = run_cell(
        kernel,
        """
        class Spring:
            def __init__(self, k):
                self.k = k
            @dplus.define_dplus
            def energy(self, x):
                return 0.5 * self.k * x * x
        def total(k, x):
            return Spring(k).energy(x)
        print(dplus.grad(total)(2.0, 3.0))
    """,
    )
    assert out.strip() == "(4.5, 6.0)"
    shown = run_cell(kernel, "print(dplus.show(f))")
    assert (
        "def f__plus" in shown and "s = s + math.sin(x * i) * y" in shown
    )  # the cell's line, quoted


def test_a_function_redefined_in_a_later_cell(kernel):
    run_cell(
        kernel,
        """
        import dplus
        def h(x):
            return x * x
    """,
    )
    assert run_cell(kernel, "print(dplus.grad1(h)(3.0))").strip() == "6.0"
    run_cell(
        kernel,
        """
        def h(x):
            return x * x * x
    """,
    )
    assert run_cell(kernel, "print(dplus.grad1(h)(3.0))").strip() == "27.0"
    shown = run_cell(kernel, "print(dplus.show(h))")
    assert "return x * x * x" in shown
