# dplus fuzz failure: wrong / gradient
# seed 7014; features: arith array_inplace_argument array_inplace_local float32_arrays math numpy
# reproduce: save as a file, run it; the checks that failed are described at the end.
import math
import functools
import contextlib
import numpy as np
import dplus

SCALE = 0.75
COUNTER = 0

def f(A1, A2, A3, x4):
    x4 -= float(A1.sum())
    x4 *= math.tanh(x4)
    x4 = float(A1[0])
    x4 -= float(np.sum(A1[[0, -1]]))
    A5 = np.einsum('ij,j->i', A2, A1)
    return float(float(np.sum(A1)) + x4 + float(np.sum(A5[A5 > 0.0])))

if __name__ == '__main__':
    args = (np.array([-0.17782099545001984, -1.0982029438018799, -1.442121982574463], dtype=np.float32), np.array([[-1.47916, -1.160311, -0.6248], [1.586982, 0.299174, -0.993036]], dtype=np.float64), np.array([[-0.30767199397087097, 1.1650099754333496, 1.5725829601287842], [0.8369449973106384, 1.3569079637527466, -1.4793039560317993], [0.5490869879722595, -1.0096700191497803, -1.3347769975662231]], dtype=np.float32), -1.548913,)
    print('plain:      ', f(*__import__('copy').deepcopy(args)))
    print('dplus.grad: ', dplus.grad(f)(*__import__('copy').deepcopy(args)))

# call: f(np.array([-0.17782099545001984, -1.0982029438018799, -1.442121982574463], dtype=np.float32), np.array([[-1.47916, -1.160311, -0.6248], [1.586982, 0.299174, -0.993036]], dtype=np.float64), np.array([[-0.30767199397087097, 1.1650099754333496, 1.5725829601287842], [0.8369449973106384, 1.3569079637527466, -1.4793039560317993], [0.5490869879722595, -1.0096700191497803, -1.3347769975662231]], dtype=np.float32), -1.548913)
# d f / d args[0][(2,)]: finite differences np.float32(-1.6181844), dplus.grad -1.617836
# full gradient: (array([ 1.107822,  0.138863, -1.617836]), array([[-0.177821  , -1.09820294, -1.44212198],
#        [-0.177821  , -1.09820294, -1.44212198]]), array([[0., 0., 0.],
#        [0., 0., 0.],
#        [0., 0., 0.]], dtype=float32), 0.0)
