"""Session 38, h-chk38: integer + - * whose value leaves int64 in the generated cpu C++.

`x * 6364136223846793005` (fuzz hunt seeds 3955, 3956) was C's signed int64 overflow, undefined:
g++ -O3 derived loop bounds from it, and checked mode (TW_BOUNDS_CHECK=1) crashed (SIGSEGV) or
stored wrong values. Such arithmetic now wraps modulo 2^64, which the store wraps into int32 as
the language says. Each kernel runs in a subprocess (a crash must not end pytest), checked and
unchecked, against Python integers wrapped into int32.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

C = 6364136223846793005
STEPS = {"index": "t[i, j] + ((bx * bm + i) * 4099 + j) * 6364136223846793005",   # the fuzz's kernel
         "cube": "t[i, j] * t[i, j] * t[i, j] + s"}                              # int32 values past 2^63

SCRIPT = r'''
import json, sys
import numpy as np
import tilewright as tw
import tilewright.language as T

bm, m, n = json.loads(sys.argv[1])


@T.prim_func
def k(X: T.Tensor((m, n), 'int32'), Sd: T.Tensor((1,), 'int32'), Y: T.Tensor((m, n), 'int32')):
    with T.Kernel(T.ceildiv(m, bm)) as bx:
        s = Sd[0]
        t = T.alloc_fragment((bm, n), 'int32')
        T.copy(X[bx * bm, 0], t)
        for i, j in T.Parallel(bm, n):
            t[i, j] = STEP
        T.copy(t, Y[bx * bm, 0])


X = np.array(json.loads(sys.argv[2]), dtype=np.int32).reshape(m, n)
Sd = np.array([-7], dtype=np.int32)
Y = np.zeros((m, n), np.int32)
tw.compile(k, target="cpu")(X, Sd, Y)
print(json.dumps(Y.ravel().tolist()))
'''


def wrap32(v):
    return (v + 2**31) % 2**32 - 2**31


def reference(x, bm, form):
    m, n = x.shape
    y = np.zeros_like(x)
    for r in range(m):
        for j in range(n):
            v = int(x[r, j])
            y[r, j] = wrap32(v + (r * 4099 + j) * C) if form == "index" else wrap32(v * v * v - 7)
    return y


@pytest.mark.parametrize("checked", ["1", "0"])
@pytest.mark.parametrize("bm,m,n,form", [(4, 1, 9, "index"), (1, 1, 4, "index"), (8, 3, 7, "index"),
                                         (4, 5, 9, "cube")])
def test_product_past_int64_wraps(tmp_path, checked, bm, m, n, form):
    rng = np.random.default_rng(38)
    x = rng.integers(-2**31, 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    x.ravel()[:2] = [-2**31, 2**31 - 1][: x.size]
    env = dict(os.environ, TW_BOUNDS_CHECK=checked)
    script = tmp_path / "kernel.py"   # (a file: the frontend reads the kernel's source)
    script.write_text(SCRIPT.replace("STEP", STEPS[form]))
    r = subprocess.run([sys.executable, str(script), json.dumps([bm, m, n]), json.dumps(x.ravel().tolist())],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = np.array(json.loads(r.stdout.strip().splitlines()[-1]), dtype=np.int32).reshape(m, n)
    np.testing.assert_array_equal(got, reference(x, bm, form))
