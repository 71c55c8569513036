"""Rules for the operator module and the syntax that maps to it."""

import operator

from dplus.rules import defvjp

defvjp(operator.add, lambda A, r, x, y: A, lambda A, r, x, y: A)
defvjp(operator.sub, lambda A, r, x, y: A, lambda A, r, x, y: -A)
defvjp(operator.mul, lambda A, r, x, y: A * y, lambda A, r, x, y: A * x)
defvjp(operator.truediv, lambda A, r, x, y: A / y, lambda A, r, x, y: -A * r / y)
defvjp(operator.neg, lambda A, r, x: -A)
defvjp(operator.pos, lambda A, r, x: A)
