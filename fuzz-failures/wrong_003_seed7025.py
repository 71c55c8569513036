# dplus fuzz failure: wrong / gradient
# seed 7025; features: arith array_inplace_argument array_inplace_local float32_arrays math numpy
# reproduce: save as a file, run it; the checks that failed are described at the end.
import math
import functools
import contextlib
import numpy as np
import dplus

SCALE = 0.75
COUNTER = 0

def f(x1, A2, x3, x4):
    a5 = A2 * 1.0
    a5 -= x4
    v6 = x1
    return float(float(A2[0]) + x3 + x4 + v6)

if __name__ == '__main__':
    args = (-0.818743, np.array([-1.1685450077056885, -1.0277340412139893, -0.5835530161857605], dtype=np.float32), 0.612178, -0.923763,)
    print('plain:      ', f(*__import__('copy').deepcopy(args)))
    print('dplus.grad: ', dplus.grad(f)(*__import__('copy').deepcopy(args)))

# call: f(-0.818743, np.array([-1.1685450077056885, -1.0277340412139893, -0.5835530161857605], dtype=np.float32), 0.612178, -0.923763)
# d f / d args[1][(0,)]: finite differences np.float32(0.99974847), dplus.grad 1.0
# full gradient: (1.0, array([1., 0., 0.]), 1.0, 1.0)
