"""One reduction of a long list written in the styles people use, for the memory section:
the forward record's bytes per element, which issue #21 wants at most 64 in every style.
Each returns the same kind of number; ``STYLES`` lists them with the arguments they take."""

import math


def loop_sum(xs):
    acc = 0.0
    for x in xs:
        acc = acc + x * x
    return acc


def genexpr_sum(xs):
    return sum(x * x for x in xs)


def listcomp_sum(xs):
    return sum([x * x for x in xs])


def zip_dot(xs, ys):
    return sum(x * y for x, y in zip(xs, ys))


def zip_loop(xs, ys):
    acc = 0.0
    for x, y in zip(xs, ys):
        acc += x * y
    return acc


def index_loop(xs):
    acc = 0.0
    for i in range(len(xs)):
        acc += xs[i] * xs[i]
    return acc


def enumerate_loop(xs, ys):
    acc = 0.0
    for i, x in enumerate(xs):
        acc += x * ys[i]
    return acc


def map_sum(xs):
    return sum(map(math.sin, xs))


STYLES = (
    ("for loop", loop_sum, 1),
    ("generator expression", genexpr_sum, 1),
    ("list comprehension", listcomp_sum, 1),
    ("zip, generator expression", zip_dot, 2),
    ("zip, for loop", zip_loop, 2),
    ("index loop, +=", index_loop, 1),
    ("enumerate loop, +=", enumerate_loop, 2),
    ("sum(map(math.sin, xs))", map_sum, 1),
)
