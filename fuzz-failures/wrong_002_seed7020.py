# dplus fuzz failure: wrong / gradient
# seed 7020; features: arith array_inplace_argument array_inplace_local float32_arrays math numpy
# reproduce: save as a file, run it; the checks that failed are described at the end.
import math
import functools
import contextlib
import numpy as np
import dplus

SCALE = 0.75
COUNTER = 0

@dplus.define_dplus
def nh13(A, s):
    return np.exp(np.tanh(A)) * s + A * 0.5

def f(x1, A2, A3):
    v4 = float(np.sum(A2.T[0]))
    v4 = math.hypot(x1, max(1.5, float(np.sum(A3.T[0]))))
    A5 = np.arange(9.0).reshape(3, 3) * x1
    def g6(u7):
        return u7 * float(A3[1, 2]) + float(A3.sum())
    v8 = g6(float(np.sum(A3)))
    a9 = A3 * 1.0
    a9 += A3
    r10, r11 = A2[:2]
    A12 = nh13(A2, x1)
    return float(x1 + float(np.sum(A2)) + float(np.sum(A3, axis=0, keepdims=True)[0, 0]) + float(np.sum(A5)) + v8 + float(np.sum(a9[a9 > 0.0])) + float(np.sum(r11[r11 > 0.0])) + float(np.mean(A12, axis=-1)[0]))

if __name__ == '__main__':
    args = (-1.435795, np.array([[-0.812034010887146, -1.3790819644927979, -1.3082879781723022], [-1.3287760019302368, -0.33639898896217346, -0.7836679816246033], [1.4774669408798218, 1.5163459777832031, -0.3866089880466461]], dtype=np.float32), np.array([[-1.3025619983673096, -0.21301500499248505, 1.591209053993225], [-1.3014589548110962, -0.7942190170288086, 0.7499769926071167]], dtype=np.float32),)
    print('plain:      ', f(*__import__('copy').deepcopy(args)))
    print('dplus.grad: ', dplus.grad(f)(*__import__('copy').deepcopy(args)))

# call: f(-1.435795, np.array([[-0.812034010887146, -1.3790819644927979, -1.3082879781723022], [-1.3287760019302368, -0.33639898896217346, -0.7836679816246033], [1.4774669408798218, 1.5163459777832031, -0.3866089880466461]], dtype=np.float32), np.array([[-1.3025619983673096, -0.21301500499248505, 1.591209053993225], [-1.3014589548110962, -0.7942190170288086, 0.7499769926071167]], dtype=np.float32))
# d f / d args[1][(2, 0)]: finite differences np.float32(1.0004929), dplus.grad 1.0
# full gradient: (np.float64(37.44911945859591), array([[1.03202979, 1.12217558, 1.11546749],
#        [1.        , 1.        , 1.        ],
#        [1.        , 1.        , 1.        ]]), array([[2.74997699, 1.74997699, 3.74997699],
#        [2.74997699, 1.74997699, 2.47990823]]))
