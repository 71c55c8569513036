"""A fuzzing run: generate, check, count, shrink each distinct failure, report."""

from __future__ import annotations

import collections
import os
import re
import sys
import time
from dataclasses import dataclass, field

from . import cotangent
from .checker import Checker, Outcome, args_text
from .generator import ALL, Program, generate
from .shrink import Shrinker


@dataclass
class Failure:
    outcome: Outcome
    program: Program  # the shrunk program
    original: Program
    count: int = 1
    seeds: list = field(default_factory=list)
    variants: dict = field(
        default_factory=dict
    )  # fingerprint of a shrunk program -> (Program, Outcome)


def fingerprint(source: str) -> str:
    """The constructs a shrunk program uses: tells apart failures of one kind with different causes."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.stmt, ast.expr)) and not isinstance(
            node, (ast.Name, ast.Constant, ast.Load, ast.Expr)
        ):
            names.add(type(node).__name__)
        if isinstance(node, ast.Call):
            fn = node.func
            names.add(
                "call:" + (fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "?"))
            )
    names = {n for n in names if not re.fullmatch(r"call:[a-z]+\d+", n)}  # (generated helper names)
    return " ".join(sorted(names))


@dataclass
class Summary:
    programs: int = 0
    seconds: float = 0.0
    partials: int = 0
    partials_skipped: int = 0
    second: int = 0
    second_skipped: int = 0
    third: int = 0
    third_skipped: int = 0
    cotangent: int = 0
    cotangent_second: int = 0
    by_status: collections.Counter = field(default_factory=collections.Counter)
    by_kind: collections.Counter = field(default_factory=collections.Counter)
    failures: dict = field(default_factory=dict)  # signature -> Failure

    def add(self, outcome: Outcome) -> None:
        self.programs += 1
        self.partials += outcome.partials
        self.partials_skipped += outcome.partials_skipped
        self.second += outcome.second
        self.second_skipped += outcome.second_skipped
        self.third += outcome.third
        self.third_skipped += outcome.third_skipped
        self.cotangent += outcome.cotangent
        self.cotangent_second += outcome.cotangent_second
        self.by_status[outcome.status] += 1
        if outcome.status != "ok":
            self.by_kind[(outcome.status, outcome.kind)] += 1

    def table(self) -> str:
        rate = self.programs / self.seconds if self.seconds else 0.0
        lines = [
            f"programs            {self.programs}  ({self.seconds:.1f} s, {rate:.1f} programs/s)",
            f"partials checked    {self.partials}  (skipped as not smooth: {self.partials_skipped})",
            f"second-order checked {self.second}  (skipped: {self.second_skipped})",
            f"third-order checked {self.third}  (skipped: {self.third_skipped})",
            f"backward passes checked in the sensitivity given {self.cotangent}"
            f"  (derivatives in it: {self.cotangent_second} entries)",
            "",
            "outcome        count   percent",
        ]
        for status in ("ok", "wrong", "crash", "refused", "skipped", "timeout"):
            n = self.by_status.get(status, 0)
            lines.append(f"{status:<12} {n:>7}   {100.0 * n / max(1, self.programs):6.2f}%")
        lines.append("")
        lines.append("by kind (status, kind): count, percent of programs")
        width = max((len(k[:150]) for _, k in self.by_kind), default=10)
        for (status, kind), n in sorted(self.by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(
                f"  {status:<8} {kind[:150]:<{width}} {n:>6}  {100.0 * n / max(1, self.programs):6.2f}%"
            )
        if self.failures:
            lines.append("")
            lines.append(f"distinct failures: {len(self.failures)}")
            for sig, fl in sorted(self.failures.items(), key=lambda kv: -kv[1].count):
                lines.append(f"  {fl.count:>5}x  {sig[:160]}  (first seed {fl.seeds[0]})")
        return "\n".join(lines)


def reproduction(failure_program: Program, outcome: Outcome) -> str:
    """A self-contained reproduction: the module, the call, expected vs got."""
    call = f"f({args_text(failure_program.args)})"
    source = failure_program.source
    if "import dplus" not in source:
        source = "import dplus\n" + source
    if "np." in call and "import numpy as np" not in source:
        source = "import numpy as np\n" + source
    probe, probe_calls = cotangent_reproduction(failure_program, outcome)
    return (
        f"# dplus fuzz failure: {outcome.status} / {outcome.kind}\n"
        f"# seed {failure_program.seed}; features: {' '.join(sorted(failure_program.features))}\n"
        f"# reproduce: save as a file, run it; the checks that failed are described at the end.\n"
        f"{source}{probe}\n"
        f"if __name__ == '__main__':\n"
        f"    args = ({args_text(failure_program.args)},)\n"
        f"    print('plain:      ', f(*__import__('copy').deepcopy(args)))\n"
        f"    print('dplus.grad: ', dplus.grad(f)(*__import__('copy').deepcopy(args)))\n"
        f"{probe_calls}"
        f"\n# call: {call}\n" + "".join(f"# {line}\n" for line in outcome.detail.splitlines())
    )


def cotangent_reproduction(program: Program, outcome: Outcome) -> tuple[str, str]:
    """For a failure of the cotangent check: its probe (``cotangent.py``) and its calls."""
    if "cotangent" not in outcome.kind and "cotangent.py" not in outcome.detail:
        return "", ""
    form, c = cotangent.form_of(program.seed)
    v = cotangent.scaled(form.unit, c)
    weights = cotangent.weights_for(program.args, program.seed)
    calls = (
        f"    v = {cotangent.as_source(v)}\n"
        "    back = dplus.dplus(_dplus_probe)(*__import__('copy').deepcopy(args)).backprop(v)\n"
        "    print('backprop(v):', back)\n"
        f"    weights = {cotangent.as_source(weights)}\n"
        "    print('d/dv:', dplus.grad(_dplus_probe_weighted, argnums=0)(v, args, weights))\n"
    )
    return cotangent.probe_source(program.entry, form), calls


def float_only_for(seed: int, order: int) -> bool | None:
    """At second order half the programs take only floats (the Hessian is checked for those);
    at third order all of them (its checks need the Hessian)."""
    return True if order >= 3 or (order >= 2 and seed % 2 == 0) else None


def run(
    seeds,
    features=ALL,
    order: int = 1,
    *,
    out_dir: str | None = None,
    budget: float | None = None,
    shrink: bool = True,
    shrink_budget: float = 60.0,
    time_limit: float = 5.0,
    progress_every: int = 0,
    stop_on_failure: bool = False,
    shrunk_per_kind: int = 4,
    stream=sys.stdout,
) -> Summary:
    checker = Checker(order=order, time_limit=time_limit)
    summary = Summary()
    start = time.monotonic()
    try:
        for seed in seeds:
            if budget is not None and time.monotonic() - start > budget:
                break
            program = generate(seed, features, float_only=float_only_for(seed, order))
            outcome = checker.check(program)
            summary.add(outcome)
            if outcome.failed:
                record_failure(
                    summary,
                    program,
                    outcome,
                    checker,
                    shrink,
                    shrink_budget,
                    out_dir,
                    stream,
                    shrunk_per_kind,
                )
                if stop_on_failure:
                    break
            if progress_every and summary.programs % progress_every == 0:
                summary.seconds = time.monotonic() - start
                counts = " ".join(f"{k}={v}" for k, v in sorted(summary.by_status.items()))
                print(
                    f"[{summary.programs} programs, seed {seed}, {summary.seconds:.0f} s] {counts}",
                    file=stream,
                    flush=True,
                )
    except KeyboardInterrupt:  # (a long run stopped by hand still reports what it did)
        print("interrupted", file=stream, flush=True)
    summary.seconds = time.monotonic() - start
    return summary


def record_failure(
    summary, program, outcome, checker, shrink, shrink_budget, out_dir, stream, shrunk_per_kind=4
) -> None:
    """Count the failure; shrink the first few of each signature and write the reproductions
    whose shrunk programs use a new set of constructs."""
    known = summary.failures.get(outcome.signature)
    if known:
        known.count += 1
        known.seeds.append(program.seed)
        if len(known.seeds) > shrunk_per_kind:
            return
    shrunk = program
    if shrink:
        shrunk = Shrinker(checker, shrink_budget).shrink(program, outcome)
    final = checker.check(shrunk)
    if final.signature != outcome.signature:  # (flaky: keep the original)
        shrunk, final = program, outcome
    if not known:
        known = summary.failures[outcome.signature] = Failure(
            final, shrunk, program, seeds=[program.seed]
        )
        print(
            f"new failure {outcome.signature[:160]} at seed {program.seed}", file=stream, flush=True
        )
    fp = fingerprint(shrunk.source)
    if fp in known.variants:
        return
    known.variants[fp] = (shrunk, final)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        name = f"{outcome.status}_{sum(len(f.variants) for f in summary.failures.values()):03d}_seed{program.seed}.py"
        with open(os.path.join(out_dir, name), "w") as fh:
            fh.write(reproduction(shrunk, final))
