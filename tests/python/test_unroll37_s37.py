"""Session 37 (h-unroll37, hunt36 F1, issue 13): T.unroll is unrolled before the Cube / vector split on
ascend910b (target/ascend/unroll_loops.h), so an `if` on the unrolled variable folds per copy of the body.
Each kernel runs on cpu and on ascend910b (the simulator's checker on: a report fails) against numpy
(float64); inputs are small integers and halves, exact in fp16 / bf16 where the sums allow."""
import os
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, os.path.dirname(__file__))
from ascend_util import TARGET, run_on  # noqa: E402
from test_hunt36_s36 import _mlp_inputs, mlp_reference, mlp_unroll  # noqa: E402

TARGETS = ["cpu", TARGET]


def _unroll_loops_left(kernel):
    """The loops over the user's T.unroll variables after unroll_loops (none: every one is copied out)."""
    return [ln for ln in kernel.get_ir("unroll_loops").splitlines() if " in unroll(" in ln]


# ------------------------------------------------------------------------------------------------ MLP (F1)

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("L", [1, 2, 3, 5])
def test_mlp_unrolled_layers(L, dt):
    """hunt36's MLP: `if l < L - 1` inside T.unroll(L) (L = 5: eight Cube / vector hand-offs, the flag ids
    shared in turn); 37 rows: a tail block. cpu at L = 2 and 5 only (its g++ compile is the cost)."""
    M, D, bm = 37, 16, 16
    x, w = _mlp_inputs(L, M, D, dt)
    want = mlp_reference(x, w)
    targets = TARGETS if L in (2, 5) else [TARGET]
    for t in targets:
        got = run_on(mlp_unroll(L, M, D, bm, dt), t, [-1], x, w)
        tw.testing.assert_close(got, want, atol=2e-2, rtol=2e-2, msg=f"{t} L={L} {dt}")
    k = tw.compile(mlp_unroll(L, M, D, bm, dt), target=TARGET, out_idx=[-1])
    assert _unroll_loops_left(k) == []


def mlp_form(form, L, M, D, bm, dt):
    """hunt36 F1's other forms of the MLP: "peeled", the first L - 1 layers in T.unroll(L - 1) and the last
    after it (h handed to the Cube by each copy: the loop-carried rule refused it while the loop was a
    loop); "nested", four layers as T.unroll(2) around T.unroll(1, 4, 2): layer l = 2 a + (s - 1) // 2 (a
    let the copies make constant) and `if l < 3` the ReLU and the hand-back."""
    @T.prim_func
    def k(X: T.Tensor((M, D), dt), W: T.Tensor((L, D, D), dt), Y: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as b:
            xs = T.alloc_shared((bm, D), dt)
            ws = T.alloc_shared((D, D), dt)
            acc = T.alloc_fragment((bm, D), "float32")
            h = T.alloc_fragment((bm, D), "float32")
            T.copy(X[b * bm, 0], xs)
            if form == "peeled":
                for l in T.unroll(L - 1):
                    T.copy(W[l, 0, 0], ws)
                    T.gemm(xs, ws, acc, clear_accum=True)
                    for i, j in T.Parallel(bm, D):
                        h[i, j] = T.max(acc[i, j], 0.0) * 0.5
                    T.copy(h, xs)
                T.copy(W[L - 1, 0, 0], ws)
                T.gemm(xs, ws, acc, clear_accum=True)
            else:
                for a in T.unroll(2):
                    for s in T.unroll(1, 4, 2):
                        l = 2 * a + (s - 1) // 2
                        T.copy(W[l, 0, 0], ws)
                        T.gemm(xs, ws, acc, clear_accum=True)
                        if l < L - 1:
                            for i, j in T.Parallel(bm, D):
                                h[i, j] = T.max(acc[i, j], 0.0) * 0.5
                            T.copy(h, xs)
            T.copy(acc, Y[b * bm, 0])
    return k


@pytest.mark.parametrize("form, dt", [("peeled", "float16"), ("nested", "bfloat16")])
def test_mlp_peeled_and_nested(form, dt):
    L, M, D, bm = (3, 20, 16, 16) if form == "peeled" else (4, 20, 16, 16)
    x, w = _mlp_inputs(L, M, D, dt)
    for t in TARGETS:
        tw.testing.assert_close(run_on(mlp_form(form, L, M, D, bm, dt), t, [-1], x, w), mlp_reference(x, w),
                                atol=2e-2, rtol=2e-2, msg=f"{form} {t}")
    assert _unroll_loops_left(tw.compile(mlp_form(form, L, M, D, bm, dt), target=TARGET, out_idx=[-1])) == []


# ------------------------------------------------------------------------------------------------ vector only

R, N = 5, 40


def test_if_on_the_variable_vector_only():
    """An if / else on the unrolled variable around maps, a tile allocated in the body and a let on the
    variable; float32 and int32 (vector code only: ascend910b keeps the loop, its ifs run-time ifs)."""
    @T.prim_func
    def k(X: T.Tensor((R, N), "float32"), I: T.Tensor((R, N), "int32"),
          Y: T.Tensor((R, N), "float32"), J: T.Tensor((R, N), "int32")):
        with T.Kernel(1) as b:
            y = T.alloc_fragment((R, N), "float32")
            z = T.alloc_fragment((R, N), "int32")
            T.copy(X, y)
            T.copy(I, z)
            for s in T.unroll(4):
                t = T.alloc_fragment((R, N), "float32")
                c = 2 * s + 1
                if s % 2 == 0:
                    for i, j in T.Parallel(R, N):
                        t[i, j] = y[i, j] * 2.0
                        z[i, j] = z[i, j] + c
                else:
                    for i, j in T.Parallel(R, N):
                        t[i, j] = y[i, j] - T.cast(c, "float32")
                        z[i, j] = z[i, j] * 2
                for i, j in T.Parallel(R, N):
                    y[i, j] = t[i, j]
            T.copy(y, Y)
            T.copy(z, J)

    rng = np.random.default_rng(7)
    x = rng.integers(-8, 9, (R, N)).astype(np.float32)
    iv = rng.integers(-50, 51, (R, N)).astype(np.int32)
    y, j = x.astype(np.float64), iv.astype(np.int64)
    for s in range(4):
        c = 2 * s + 1
        y, j = (y * 2, j + c) if s % 2 == 0 else (y - c, j * 2)
    for t in TARGETS:
        got_y, got_j = run_on(k, t, [2, 3], x, iv)
        np.testing.assert_array_equal(got_y, y.astype(np.float32), err_msg=t)
        np.testing.assert_array_equal(got_j, j.astype(np.int32), err_msg=t)


def test_nested_and_stepped_unroll():
    """Nested T.unroll (3 x 2 copies) and T.unroll(1, 8, 3) (1, 4, 7): column bands by the outer variable,
    an if on both variables, a weight from the stepped one (vector code only: ascend910b keeps the loops)."""
    @T.prim_func
    def k(X: T.Tensor((R, 6 * 16), "float32"), Y: T.Tensor((R, 6 * 16), "float32")):
        with T.Kernel(1) as b:
            y = T.alloc_fragment((R, 6 * 16), "float32")
            T.copy(X, y)
            for a in T.unroll(3):
                for c in T.unroll(2):
                    if a + c != 2:
                        for i, j in T.Parallel(R, 16):
                            y[i, (2 * a + c) * 16 + j] = y[i, (2 * a + c) * 16 + j] * T.cast(a + 1, "float32") + T.cast(c, "float32")
            for s in T.unroll(1, 8, 3):
                for i, j in T.Parallel(R, 16):
                    y[i, j] = y[i, j] + T.cast(s, "float32")
            T.copy(y, Y)

    x = np.random.default_rng(8).integers(-8, 9, (R, 96)).astype(np.float32)
    want = x.astype(np.float64)
    for a in range(3):
        for c in range(2):
            if a + c != 2:
                band = slice((2 * a + c) * 16, (2 * a + c + 1) * 16)
                want[:, band] = want[:, band] * (a + 1) + c
    want[:, :16] += 1 + 4 + 7
    for t in TARGETS:
        np.testing.assert_array_equal(run_on(k, t, [-1], x), want.astype(np.float32), err_msg=t)
    assert "unroll_loops" not in tw.compile(k, target=TARGET, out_idx=[-1]).stages  # lowers as loops: kept


# ------------------------------------------------------------------------------------------------ gemm in a serial loop

def test_serial_gemm_loop_in_an_unrolled_body():
    """Each copy of the unrolled body holds a T.serial K loop around a gemm whose operand tiles it allocates
    (a fresh tile per copy), then from the second copy on a gemm of the previous copy's ReLU (handed back
    to the Cube through xs2 by all copies but the last, `if u < U - 1`: lowers only unrolled): acc_u = X_u W + [u > 0] h_{u-1} W2, Y[:, u] = h_u = relu(acc_u)."""
    M, K, D, bk, U, dt = 20, 48, 16, 16, 2, "float16"

    @T.prim_func
    def k(X: T.Tensor((U, M, K), dt), W: T.Tensor((K, D), dt), W2: T.Tensor((D, D), dt),
          Y: T.Tensor((M, U * D), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as b:
            acc = T.alloc_fragment((16, D), "float32")
            h = T.alloc_fragment((16, D), "float32")
            xs2 = T.alloc_shared((16, D), dt)
            w2s = T.alloc_shared((D, D), dt)
            T.copy(W2, w2s)
            for u in T.unroll(U):
                T.clear(acc)
                for kk in T.serial(K // bk):
                    xs = T.alloc_shared((16, bk), dt)
                    ws = T.alloc_shared((bk, D), dt)
                    T.copy(X[u, b * 16, kk * bk], xs)
                    T.copy(W[kk * bk, 0], ws)
                    T.gemm(xs, ws, acc)
                if u > 0:
                    T.gemm(xs2, w2s, acc)
                for i, j in T.Parallel(16, D):
                    h[i, j] = T.max(acc[i, j], 0.0)
                if u < U - 1:
                    T.copy(h, xs2)
                T.copy(h, Y[b * 16, u * D])

    rng = np.random.default_rng(9)
    x = (rng.integers(-4, 5, (U, M, K)) / 4).astype(np_dtype(dt))
    w = (rng.integers(-4, 5, (K, D)) / 4).astype(np_dtype(dt))
    w2 = (rng.integers(-4, 5, (D, D)) / 4).astype(np_dtype(dt))
    hs = []
    for u in range(U):
        a = x[u].astype(np.float64) @ w.astype(np.float64)
        if u > 0:
            a += hs[-1].astype(np_dtype(dt)).astype(np.float64) @ w2.astype(np.float64)
        hs.append(np.maximum(a, 0))
    want = np.concatenate(hs, 1)
    for t in TARGETS:
        tw.testing.assert_close(run_on(k, t, [-1], x, w, w2), want, atol=1e-3, rtol=1e-3, msg=t)
    ka = tw.compile(k, target=TARGET, out_idx=[-1])
    assert _unroll_loops_left(ka) == []
    tiles = re.findall(r"LocalTensor<\w+> (\w+) =", ka.get_source("ascendc"))
    assert "xs" in tiles and len(tiles) == len(set(tiles)), tiles  # each copy's xs, ws declared once, by its own name


def test_more_than_sixty_four_copies_keep_the_loop_forms_error():
    """The retry writes out at most 64 copies (insert_sync's colouring still grows about as the cube of a
    straight-line program: 64 layers of the MLP about 5 s; session 38 raised the cap from 16): past that the
    loop form's located error stands and its hint says why, at once."""
    with pytest.raises(tw.TilewrightError, match=r"(?s)ends on different units.*only up to 64 copies"):
        tw.compile(mlp_unroll(65, 37, 16, 16, "float16"), target=TARGET, out_idx=[-1])
