"""Rules for the math module."""

import math

from dplus.rules import defvjp

defvjp(math.sin, lambda A, r, x: A * math.cos(x))
defvjp(math.cos, lambda A, r, x: -A * math.sin(x))
defvjp(math.exp, lambda A, r, x: A * r)
defvjp(math.log, lambda A, r, x: A / x)
defvjp(math.sqrt, lambda A, r, x: A / (2.0 * r))
