"""Session 34 (h-avx2rows34): a fused map + row reduction whose map is a chunk function (exp, exp2) is
mapped and reduced in sub-chunks of four vectors (codegen.cpp, emit_chunk_map_reduce), so that on AVX2
a chunk's argument and result do not go through the stack. The same vectors go into the same
accumulators in the same order as when the whole chunk is mapped first: the same bits. Checked in a
child process compiled for x86-64-v3 (8 lanes: two sub-chunks per 64-float chunk) against the same
kernels with the map written `exp(...) + 0.0` (no chunk function: the whole chunk mapped, then
reduced; exp() has the chunk form's bits, tw_cpu/math.h), bit for bit: softmax, 100 columns (a full
chunk and a 36-float one: a sub-chunk and 4 scalars), its exp + row sum in the row pipeline (two full
blocks of 8 rows) and in its tail block (3 rows, the statements as written: a map + row sum outside a
pipeline). And the norms' copy-out in row pairs, with AVX2 too since session 34 (tw_cpu/simd.h
kPairRows): layer_norm and rms_norm at x86-64-v3 with block_M 3 (a pair and a lone row per block)
bit for bit against block_M 2 (pairs only) in the rows of full blocks, and against float64.
Correctness only: no timing."""
import re

import numpy as np
import pytest

from test_cpu_exp_chunk import softmax, softmax_plain  # (examples/ on sys.path)
from test_cpu_rows import KERNELS as ROWS, _check, _inputs
from tw_test_util import avx2_child_npz

N = 100
M = 19  # two full blocks of 8 rows (the row pipeline) and a tail block of 3 (the statements as written)
KERNELS = {"softmax": softmax.softmax, "softmax_plain": softmax_plain}


def inputs():
    return (np.random.default_rng(34).standard_normal((M, N)) * 3).astype(np.float32)


NORM_M, NORM_N = 13, 301  # 301 columns: full chunks, an unaligned tail; 13 rows: partial last blocks


def child_main(path):
    x = inputs()
    ks = {name: fn(N) for name, fn in KERNELS.items()}
    out = {name: k(x) for name, k in ks.items()}
    out.update({name + "_src": np.array(k.get_kernel_source()) for name, k in ks.items()})
    for name in ("rms_norm", "layer_norm"):
        xn, ws = _inputs(name, NORM_M, NORM_N, "float32", seed=34)
        for bm in (2, 3):
            k = ROWS[name][0](NORM_N, block_M=bm)
            out[f"{name}_{bm}"] = k(xn, *ws)
            out[f"{name}_{bm}_src"] = np.array(k.get_kernel_source())
    np.savez(path, **out)


@pytest.fixture(scope="module")
def avx2(tmp_path_factory):
    path = avx2_child_npz(tmp_path_factory.mktemp("avx2rows34"), "test_avx2rows34_s34")
    with np.load(path) as f:
        names = list(KERNELS) + [f"{n}_{bm}" for n in ("rms_norm", "layer_norm") for bm in (2, 3)]
        return {name: (f[name], str(f[name + "_src"])) for name in names}


def test_sub_chunks_sum_as_whole_chunks_on_avx2(avx2):
    for name in KERNELS:
        src = avx2[name][1]
        subs = src.count("for (int64_t tw_u = 0; tw_u < tw_jn; tw_u += 4 * tw_cpu::simd::kVF)")
        calls = len(re.findall(r"tw_cpu::exp(?:_nonpos)?_chunk\(tw_cu, tw_a, tw_jn\);", src))
        # softmax: the pipeline's exp pass and the tail block's map + sum, each by sub-chunks
        assert (subs, calls) == ((0, 0) if name.endswith("_plain") else (2, 2)), (name, subs, calls)
    a, b = avx2["softmax"][0], avx2["softmax_plain"][0]
    assert np.isfinite(a).all()
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    # the data tell summation orders apart: float32 row sums of their exp values in sequential and in
    # pairwise order differ in some rows
    x = inputs().astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True)).astype(np.float32)
    seq = np.array([np.cumsum(r, dtype=np.float32)[-1] for r in e])
    assert not np.array_equal(seq, e.sum(axis=1, dtype=np.float32))


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm"])
def test_norm_row_pairs_on_avx2(name, avx2):
    x, ws = _inputs(name, NORM_M, NORM_N, "float32", seed=34)
    for bm in (2, 3):
        y, src = avx2[f"{name}_{bm}"]
        assert "if constexpr (tw_cpu::simd::kPairRows)" in src and "tw_out1" in src, bm  # the pair form
        _check(name, y, x, ws, "float32")
    n = NORM_M // 3 * 3  # the rows of full blocks on both sides (a partial block runs the statements)
    a, b = avx2[f"{name}_3"][0][:n], avx2[f"{name}_2"][0][:n]
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
