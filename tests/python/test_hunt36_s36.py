"""Session 36 hunt (h-hunt36, issue 13): reproducers of the findings in docs/testing.md "Session 36:
hunt36" (F1, F2, ...), and the session-35 changes probed at users' shapes: outputs written only by
T.atomic_add, more than five Cube / vector hand-offs, wrapped int32 hashes, index-mask bool lets.
Every kernel runs on cpu and on ascend910b (the simulator's checker on: a report fails) against numpy.
The wider probe: tests/python/hunt36_probe.py; the fuzzer's stream: fuzz/hunt.py."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import np_dtype

sys.path.insert(0, os.path.dirname(__file__))
from ascend_util import TARGET, run_checked  # noqa: E402

TARGETS = ["cpu", TARGET]


def run(prim, target, out_idx, *args):
    k = tw.compile(prim, target=target, out_idx=out_idx)
    return k(*args) if target == "cpu" else run_checked(k, *args)


# ------------------------------------------------------------------------------------------------
# F2 (fixed): `p ^ q` / `p == q` of two conditions in a map was "Ascend has no bool vector arithmetic"

R, C = 5, 19


def bool_xor_kernel():
    """Three bool lets of the map, each read twice: `^` and `==` of index masks, `not` of `^` of a data
    comparison and an index mask; used by T.where and by an if."""
    @T.prim_func
    def k(X: T.Tensor((R, C), "float32"), n: T.int32, Y: T.Tensor((R, C), "float32"),
          Z: T.Tensor((R, C), "float32"), W: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), "float32")
            y = T.alloc_fragment((R, C), "float32")
            z = T.alloc_fragment((R, C), "float32")
            w = T.alloc_fragment((R, C), "float32")
            T.copy(X, x)
            T.copy(X, w)
            for i, j in T.Parallel(R, C):
                p = (i < n) ^ (j < 5)
                q = (i < n) == (j >= 5)
                r = not ((x[i, j] > 0) ^ (j < 5 or i == n))
                y[i, j] = T.where(p, x[i, j], T.where(q, -1, -2))
                z[i, j] = T.where(q or x[i, j] > 1, 2, T.where(p, x[i, j], 3))
                if r:
                    w[i, j] = x[i, j] * 2
            T.copy(y, Y)
            T.copy(z, Z)
            T.copy(w, W)
    return k


def test_f2_xor_and_eq_of_conditions():
    x = np.random.default_rng(2).integers(-3, 4, (R, C)).astype(np.float32)
    i, j = np.arange(R)[:, None], np.arange(C)[None, :]
    ks = {t: tw.compile(bool_xor_kernel(), target=t, out_idx=[2, 3, 4]) for t in TARGETS}
    for n in (0, 3):
        p, q = (i < n) ^ (j < 5), (i < n) == (j >= 5)
        r = ~((x > 0) ^ ((j < 5) | (i == n)))
        want = [np.where(p, x, np.where(q, -1, -2)), np.where(q | (x > 1), 2, np.where(p, x, 3)),
                np.where(r, 2 * x, x)]
        for t in TARGETS:
            got = ks[t](x, n) if t == "cpu" else run_checked(ks[t], x, n)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w.astype(np.float32))


# ------------------------------------------------------------------------------------------------
# F1 (fixed in session 37, h-unroll37): T.unroll was still a loop when ascend910b split the Cube / vector
# code, so an `if` on the unrolled variable was a run-time if there; the Ascend pipelines now unroll
# T.unroll first (unroll_loops) and the ifs fold per copy of the body

def mlp_unroll(L, M, D, bm, dt):
    """L layers, a ReLU (halved) between two: Y = W_{L-1}(... relu(W_0 X)); the last layer told apart by
    `if l < L - 1` inside T.unroll(L) (cpu: folded per copy of the body)."""
    @T.prim_func
    def k(X: T.Tensor((M, D), dt), W: T.Tensor((L, D, D), dt), Y: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as b:
            xs = T.alloc_shared((bm, D), dt)
            ws = T.alloc_shared((D, D), dt)
            acc = T.alloc_fragment((bm, D), "float32")
            h = T.alloc_fragment((bm, D), "float32")
            T.copy(X[b * bm, 0], xs)
            for l in T.unroll(L):
                T.copy(W[l, 0, 0], ws)
                T.gemm(xs, ws, acc, clear_accum=True)
                if l < L - 1:
                    for i, j in T.Parallel(bm, D):
                        h[i, j] = T.max(acc[i, j], 0.0) * 0.5
                    T.copy(h, xs)
            T.copy(acc, Y[b * bm, 0])
    return k


def mlp_reference(x, w):
    h = x.astype(np.float64)
    for l in range(len(w)):
        h = h @ w[l].astype(np.float64)
        if l < len(w) - 1:
            h = (np.maximum(h, 0) * 0.5).astype(x.dtype).astype(np.float64)
    return h


def _mlp_inputs(L, M, D, dt):
    rng = np.random.default_rng(L)
    return ((rng.integers(-4, 5, (M, D)) / 4).astype(np_dtype(dt)),
            (rng.integers(-4, 5, (L, D, D)) / 8).astype(np_dtype(dt)))


def test_f1_unrolled_if_runs_on_cpu():
    x, w = _mlp_inputs(3, 20, 16, "float16")
    tw.testing.assert_close(run(mlp_unroll(3, 20, 16, 16, "float16"), "cpu", [-1], x, w), mlp_reference(x, w),
                            atol=1e-2, rtol=1e-2)


def test_f1_unrolled_if_on_ascend():
    x, w = _mlp_inputs(3, 20, 16, "float16")
    tw.testing.assert_close(run(mlp_unroll(3, 20, 16, 16, "float16"), TARGET, [-1], x, w), mlp_reference(x, w),
                            atol=1e-2, rtol=1e-2)


def test_eight_hand_offs_in_a_loop():
    """The MLP's four layers written out (the form that runs on ascend910b today), one program walking the row
    blocks: eight hand-offs (x, then each layer's accumulator to the vector code and its ReLU back), two slots
    each, three of them sharing a pair of flag ids in turn (session 35); bfloat16 too in hunt36_probe.py."""
    L, M, D, bm, dt = 4, 37, 16, 16, "float16"

    @T.prim_func
    def k(X: T.Tensor((M, D), dt), W: T.Tensor((L, D, D), dt), Y: T.Tensor((M, D), "float32")):
        with T.Kernel(1) as b:
            xs = T.alloc_shared((bm, D), dt)
            ws = T.alloc_shared((D, D), dt)
            acc = T.alloc_fragment((bm, D), "float32")
            h = T.alloc_fragment((bm, D), "float32")
            for r in T.serial(T.ceildiv(M, bm)):
                T.copy(X[r * bm, 0], h)
                T.copy(h, xs)
                T.copy(W[0, 0, 0], ws)
                T.gemm(xs, ws, acc, clear_accum=True)
                for i, j in T.Parallel(bm, D):
                    h[i, j] = T.max(acc[i, j], 0.0) * 0.5
                T.copy(h, xs)
                T.copy(W[1, 0, 0], ws)
                T.gemm(xs, ws, acc, clear_accum=True)
                for i, j in T.Parallel(bm, D):
                    h[i, j] = T.max(acc[i, j], 0.0) * 0.5
                T.copy(h, xs)
                T.copy(W[2, 0, 0], ws)
                T.gemm(xs, ws, acc, clear_accum=True)
                for i, j in T.Parallel(bm, D):
                    h[i, j] = T.max(acc[i, j], 0.0) * 0.5
                T.copy(h, xs)
                T.copy(W[3, 0, 0], ws)
                T.gemm(xs, ws, acc, clear_accum=True)
                T.copy(acc, Y[r * bm, 0])
    x, w = _mlp_inputs(L, M, D, dt)
    want = mlp_reference(x, w)
    got = {t: run(k, t, [-1], x, w) for t in TARGETS}
    for t in TARGETS:
        tw.testing.assert_close(got[t], want, atol=1e-2, rtol=1e-2)
    np.testing.assert_array_equal(got["cpu"], got[TARGET])
    prog = tw.compile(k, target=TARGET, out_idx=[-1]).get_source("ascend_program")
    assert "CrossCoreSetFlag<2, MTE2>(9)" in prog   # all five pairs taken


# ------------------------------------------------------------------------------------------------
# F3 (fixed): a multiplier past int32 (Knuth's 2654435761, a 64-bit LCG's) was split into pieces unwrapped

def _w32(v):
    return ((np.asarray(v, dtype=object) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int64)


@T.prim_func
def _wide_constants(X: T.Tensor((3, 19), "int32"), Y: T.Tensor((3, 3, 19), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 19), "int32")
        y = T.alloc_fragment((3, 3, 19), "int32")
        T.copy(X, x)
        for i, j in T.Parallel(3, 19):
            y[0, i, j] = (x[i, j] * 2654435761) >> 7   # Knuth's multiplicative hash (2^32 / golden ratio)
            y[1, i, j] = x[i, j] * 6364136223846793005 + 1442695040888963407   # a 64-bit LCG's step
            y[2, i, j] = (x[i, j] * 4294967296 + 5) ^ (x[i, j] * -4294967297)   # 2^32 (0) and -2^32 - 1 (-1)
        T.copy(y, Y)


def test_f3_multipliers_past_int32():
    x = np.random.default_rng(3).integers(-2 ** 31, 2 ** 31, (3, 19)).astype(np.int32)
    x.flat[:6] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 65536]
    v = x.astype(object)
    want = np.stack([_w32(v * 2654435761) >> 7, _w32(v * 6364136223846793005 + 1442695040888963407),
                     _w32(_w32(v * 4294967296 + 5) ^ _w32(v * -4294967297))])
    for t in TARGETS:
        np.testing.assert_array_equal(run(_wide_constants, t, [-1], x), want)


# ------------------------------------------------------------------------------------------------
# F4 (fixed): a sum or product with a product by a run-time int64 scalar was "vector op on int64"

@T.prim_func
def _int64_scalar_sums(X: T.Tensor((3, 19), "int32"), c: T.int64, Y: T.Tensor((5, 3, 19), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((3, 19), "int32")
        y = T.alloc_fragment((5, 3, 19), "int32")
        T.copy(X, x)
        for i, j in T.Parallel(3, 19):
            y[0, i, j] = x[i, j] * c + 7
            y[1, i, j] = 5 - x[i, j] * c
            y[2, i, j] = (x[i, j] ^ c) * c + x[i, j]
            y[3, i, j] = (x[i, j] * c) & 65535
            y[4, i, j] = (x[i, j] + c) * 1103515245 - c
        T.copy(y, Y)


def test_f4_int64_scalar_products_in_sums():
    x = np.random.default_rng(4).integers(-2 ** 31, 2 ** 31, (3, 19)).astype(np.int32)
    x.flat[:5] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31]
    v = x.astype(object)
    k = {t: tw.compile(_int64_scalar_sums, target=t, out_idx=[-1]) for t in TARGETS}
    for c in (2654435761, -2 ** 40 + 5, 3, 2 ** 31):
        want = np.stack([_w32(v * c + 7), _w32(5 - v * c), _w32((v ^ c) * c + v), (v * c) & 65535,
                         _w32((v + c) * 1103515245 - c)])
        for t in TARGETS:
            np.testing.assert_array_equal(k[t](x, c) if t == "cpu" else run_checked(k[t], x, c), want)


# ------------------------------------------------------------------------------------------------
# the fuzzer's twenty-first stream (fuzz/hunt.py)

def test_hunt_stream_covers_its_forms_and_catches_a_wrong_answer():
    from fuzz import grammar, hunt, reducer
    from fuzz.reference import compare, reference
    ds = [hunt.generate(s) for s in range(0, 3000, grammar.GROUP)]
    assert {d["hunt"] for d in ds} == set(hunt.FORMS)
    assert {d["acc"] for d in ds if d["hunt"] == "acc"} == {"scatter", "hist", "parts"}
    assert {d["imask"] for d in ds if d["hunt"] == "imask"} == {"onehot", "len", "ignore"}
    assert {st.split(" ")[0] for d in ds if d["hunt"] == "hash" for st in d["steps"]} >= {"h", "(h", "s", "~(h"}
    assert any(d["hunt"] == "acc" and d["M"] == 0 for d in map(hunt.generate, range(3000)))
    for form in hunt.FORMS:
        d = next(d for d in ds if d["hunt"] == form and d["M"] > 0)
        compile(grammar.source(d), "fuzz", "exec")
        refs, _ = reference(d)
        assert compare(d, refs) is None
        bad = [r.copy() for r in refs]
        bad[0].flat[0] += 1
        assert compare(d, bad) is not None
        assert all(hunt.valid(c) and c != d for c in reducer.candidates(d))


# ------------------------------------------------------------------------------------------------
# F5 (hint): a dropout whose T.where condition hashes the map indices in place; the hint's form runs

def _dropout(in_place):
    M, N, bm = 5, 37, 4

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), seed: T.int32, Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            h = T.alloc_fragment((bm, N), "int32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                if in_place:
                    x[i, j] = T.where(((((bx * bm + i) * N + j) * 1103515245 + seed) >> 8) & 255 < 128, x[i, j] * 2.0,
                                      0.0)
                else:
                    h[i, j] = ((bx * bm + i) * N + j) * 1103515245 + seed
                    x[i, j] = T.where((h[i, j] >> 8) & 255 < 128, x[i, j] * 2.0, 0.0)
            T.copy(x, Y[bx * bm, 0])
    return k


def test_f5_index_hash_condition_hint_names_the_form_that_runs():
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_dropout(True), target=TARGET, out_idx=[-1])
    assert "not affine" in str(e.value) and "stored into an int32 tile first" in e.value.hint
    x = np.random.default_rng(5).integers(-4, 5, (5, 37)).astype(np.float32)
    idx = np.arange(5 * 37, dtype=object).reshape(5, 37)
    for seed in (0, -2 ** 31):
        h = _w32(idx * 1103515245 + seed)
        want = np.where(((h >> 8) & 255) < 128, x * 2, 0).astype(np.float32)
        for t in TARGETS:
            np.testing.assert_array_equal(run(_dropout(t == "cpu"), t, [-1], x, seed), want)
