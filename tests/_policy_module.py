"""Undecorated helpers for tests/test_policy_from_source.py (a module of its own, so that
registering them does not affect other tests' functions)."""

import math


def count(items):
    return len(items)


def grows_after_count(row):
    n = count(row)
    row.append(0.0)
    return row[0] * n


def square(x):
    return x * x


def cube(x):
    return x * square(x)


class Model:
    def __init__(self, w):
        self.w = w

    def predict(self, x):
        return self.w * math.sin(x)


def uses_helpers(x, w):
    m = Model(w)
    return cube(x) + m.predict(x)


def calls_a_builtin_helper(x):
    return math.fsum([x, x * x])
