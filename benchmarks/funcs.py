"""Functions for the extra sections: nested derivatives and transformation time."""

import math

# --------------------------------------------------------------------------
# nested derivatives


def smooth(x):
    return math.sin(x) * math.exp(x) + x**3


def smooth_derivative(x, k):
    """The k-th derivative of :func:`smooth` (k = 0..4), in closed form."""
    s, c, e = math.sin(x), math.cos(x), math.exp(x)
    return [
        s * e + x**3,
        e * (s + c) + 3 * x**2,
        2 * e * c + 6 * x,
        2 * e * (c - s) + 6,
        -4 * e * s,
    ][k]


LOOP_TERMS = 20


def sine_series(x):
    total = 0.0
    for i in range(1, LOOP_TERMS + 1):
        total = total + math.sin(i * x) / (i + 1)
    return total


def sine_series_derivative(x, k):
    """d^k/dx^k sum_i sin(i x) / (i + 1) = sum_i i^k sin(i x + k pi / 2) / (i + 1)."""
    return sum(i**k * math.sin(i * x + k * math.pi / 2) / (i + 1) for i in range(1, LOOP_TERMS + 1))


NESTED = [
    ("sin(x)*exp(x) + x**3", smooth, smooth_derivative, 0.6),
    (f"loop: sum sin(i x)/(i+1), {LOOP_TERMS} terms", sine_series, sine_series_derivative, 0.6),
]


# --------------------------------------------------------------------------
# a ~50-line function for the transformation time


def long_function(x, y):
    a = x * y + 1.0
    b = math.sin(a) + math.cos(x)
    c = a * b - y
    if c > 0:
        d = math.sqrt(c + 1.0)
    else:
        d = math.exp(c)
    values = [a, b, c, d]
    total = 0.0
    for i, v in enumerate(values):
        total += (i + 1) * v * v
    coeffs = {"p": 0.5, "q": -0.25, "r": 2.0}
    poly = coeffs["p"] * x**2 + coeffs["q"] * x * y + coeffs["r"] * y**2
    z = total + poly
    k = 0
    while k < 3:
        z = z * 0.9 + math.tanh(z * 0.01) * x
        k += 1
    pairs = [(x, y), (y, a), (a, b)]
    acc = 0.0
    for p, q in pairs:
        acc = acc + p * q
    w = acc / (1.0 + abs(z))
    t = (w, z, acc)
    m, n, o = t
    m = m + n * 0.001
    if x > y:
        big = max(m, o)
    else:
        big = min(m, o)
    squares = [s * s for s in (m, n, o)]
    u = sum(squares) ** 0.5
    h = math.log(1.0 + u)
    g = h * big - m / (1.0 + n * n)
    lst = [g, h]
    lst.append(u)
    lst[0] = lst[0] * 2.0
    r = 0.0
    for item in lst:
        r += item
    res = r + math.atan2(y, x) if x != 0 else r
    e2 = res * res
    e3 = e2 * 0.5 + res
    e4 = e3 - 0.125 * e2
    out = e4 * math.cos(y) + e3 * math.sin(x)
    return out
