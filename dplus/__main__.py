"""``python -m dplus``: a short demonstration. ``python -m dplus show module:function``: generated code."""

from __future__ import annotations

import argparse
import importlib
import math
import sys

import dplus


def _demo_loop(x: float, n: int) -> float:
    for _ in range(n):
        x = math.sin(x) * x + 0.5 * math.cos(x)
    return x


def _demo_closure(x: float, y: float) -> float:
    scale = lambda t: t * y
    return scale(x) * scale(x)


@dplus.define_dplus
def _demo_power(x: float, n: int) -> float:
    return 1.0 if n == 0 else x * _demo_power(x, n - 1)


def _demo_list(xs: list) -> float:
    total = 0.0
    for i in range(len(xs) - 1):
        total += (xs[i + 1] - xs[i]) ** 2
    return total


def demo() -> None:
    print("dplus: reverse-mode AD of plain Python by source transformation\n")
    g = dplus.grad(_demo_loop)(0.7, 5)
    h = 1e-6
    fd = (_demo_loop(0.7 + h, 5) - _demo_loop(0.7 - h, 5)) / (2 * h)
    print(f"a loop:       grad(loop)(0.7, 5)       = {g[0]:.12f}   (finite differences: {fd:.12f})")
    print(
        f"a closure:    grad(closure)(2.0, 3.0)  = {dplus.grad(_demo_closure)(2.0, 3.0)}   (exact: (36.0, 24.0))"
    )
    print(
        f"recursion:    grad(power)(2.0, 3)      = {dplus.grad(_demo_power)(2.0, 3)}   (exact: (12.0, 0))"
    )
    print(f"a list:       grad(smoothness)([1,3,2]) = {dplus.grad(_demo_list)([1.0, 3.0, 2.0])}")
    print(f"second order: grad1(grad1(cos))(0.0)   = {dplus.grad1(dplus.grad1(math.cos))(0.0)}")
    print("\nThe generated code of the closure example (dplus.show):\n")
    print(dplus.show(_demo_closure))


def show(target: str) -> int:
    if ":" not in target:
        print(f"dplus show: expected module:function, got {target!r}", file=sys.stderr)
        return 2
    module_name, _, qualname = target.partition(":")
    sys.path.insert(0, "")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        print(f"dplus show: cannot import {module_name!r}: {e}", file=sys.stderr)
        return 2
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            print(f"dplus show: {module_name!r} has no attribute {qualname!r}", file=sys.stderr)
            return 2
    try:
        print(dplus.show(obj))
    except dplus.DplusError as e:
        print(f"dplus show: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dplus", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    p_show = sub.add_parser(
        "show", help="print the generated reverse-transformed code of module:function"
    )
    p_show.add_argument("target", help="module:function, e.g. mypkg.model:loss")
    args = parser.parse_args(argv)
    if args.command == "show":
        return show(args.target)
    demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
