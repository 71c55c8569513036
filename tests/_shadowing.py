"""A module whose global ``len`` is a differentiable function (tests/test_fast_paths.py)."""

import dplus


def len_shadowed(xs):
    return len(xs) * 1.0


@dplus.define_dplus
def len(xs):
    s = 0.0
    for x in xs:
        s = s + x * x
    return s
