"""Scalar reads of GM tensors (issue 13, the block table of paged-KV attention) on cpu and ascend910b.

A let, a loop bound, an if condition, the start of a copy's region or a T.Parallel map may read one
element of a tensor parameter (`page = tables[b, j]`, `T.ceildiv(lens[b], 16)`, `mean[b]`). On Ascend
each core's scalar unit reads it with GlobalTensor::GetValue (the Ascend program's ScalarLoad on
pipe S); inside a map the value is read once before it and used as a scalar operand. Tensors the
kernel writes cannot be read that way (the scalar DataCache does not see DMA writes): a located
error. Every result is compared with numpy (exact for copies, float64 references otherwise) with
fixed seeds; the shapes include tails (5 x 12 pages, 13 columns), one-element tables and empty
sequences. Simulated results are a model's, not measurements on an NPU."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

from ascend_util import TARGET, run_checked
from tw_test_util import marked_line

TARGETS = ["cpu", TARGET]


def run(kernel, target, *args):
    return kernel(*args) if target == "cpu" else run_checked(kernel, *args)


# ---- block-table gather: for each (b, j): page = tables[b, j]; out[b, j] = cache[page] ----------

def gather_kernel(ns, mb, nb, bs, D, table_dtype, inline_index):
    @T.prim_func
    def gather(cache: T.Tensor((nb, bs, D), "float32"), tables: T.Tensor((ns, mb), table_dtype),
               out: T.Tensor((ns, mb, bs, D), "float32")):
        with T.Kernel(mb, ns) as (j, b):
            t = T.alloc_shared((bs, D), "float32")
            if inline_index:
                T.copy(cache[tables[b, j], :, :], t)
            else:
                page = tables[b, j]
                T.copy(cache[page, :, :], t)
            T.copy(t, out[b, j, :, :])
    return gather


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("table_dtype", ["int32", "int64"])
@pytest.mark.parametrize("ns,mb,nb,bs,D,inline_index", [
    (3, 4, 17, 16, 32, False),
    (2, 3, 9, 5, 12, True),   # a 5 x 12 page: row and column tails
    (1, 1, 1, 1, 1, False),   # one page of one element
])
def test_block_table_gather(target, table_dtype, ns, mb, nb, bs, D, inline_index):
    rng = np.random.default_rng(1)
    cache = rng.standard_normal((nb, bs, D)).astype(np.float32)
    tables = rng.integers(0, nb, size=(ns, mb)).astype(table_dtype)
    k = tw.compile(gather_kernel(ns, mb, nb, bs, D, table_dtype, inline_index), out_idx=[2], target=target)
    np.testing.assert_array_equal(run(k, target, cache, tables), cache[tables])


def test_gather_prints_get_value():
    k = tw.compile(gather_kernel(3, 4, 17, 16, 32, "int32", False), out_idx=[2], target=TARGET)
    src = k.get_source()
    assert "tables_gm.GetValue(" in src, src
    assert "ScalarLoad page <- tables[" in k.get_ir("select_instructions")


# ---- a per-block scalar read inside a map (batch norm style) ------------------------------------

def normalize_kernel(B, R, C):
    @T.prim_func
    def normalize(X: T.Tensor((B, R, C), "float32"), mean: T.Tensor((B,), "float32"),
                  scale: T.Tensor((B,), "float32"), O: T.Tensor((B, R, C), "float32")):
        with T.Kernel(B) as b:
            x = T.alloc_fragment((R, C), "float32")
            y = T.alloc_fragment((R, C), "float32")
            T.copy(X[b, :, :], x)
            for i, c in T.Parallel(R, C):
                y[i, c] = (x[i, c] - mean[b]) * scale[b]
            T.copy(y, O[b, :, :])
    return normalize


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("B,R,C", [(4, 8, 64), (3, 5, 13), (1, 1, 1)])
def test_per_block_scalar_in_map(target, B, R, C):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((B, R, C)).astype(np.float32)
    mean = rng.standard_normal(B).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, B).astype(np.float32)
    k = tw.compile(normalize_kernel(B, R, C), out_idx=[3], target=target)
    ref = (X.astype(np.float64) - mean[:, None, None]) * scale[:, None, None]
    np.testing.assert_allclose(run(k, target, X, mean, scale), ref, atol=1e-6, rtol=1e-6)


# ---- a loop bound and an if condition read from GM ----------------------------------------------

def chunk_sum_kernel(B, L, S):
    @T.prim_func
    def chunk_sum(X: T.Tensor((B, L), "float32"), lens: T.Tensor((B,), "int32"),
                  flags: T.Tensor((B,), "int32"), O: T.Tensor((B, S), "float32")):
        with T.Kernel(B) as b:
            t = T.alloc_fragment((S,), "float32")
            acc = T.alloc_fragment((S,), "float32")
            T.fill(acc, 0)
            for j in T.serial(T.ceildiv(lens[b], S)):
                T.copy(X[b, j * S:(j + 1) * S], t)
                for i in T.Parallel(S):
                    acc[i] = acc[i] + t[i]
            if flags[b] > 0:
                for i in T.Parallel(S):
                    acc[i] = acc[i] * 2.0
            T.copy(acc, O[b, :])
    return chunk_sum


@pytest.mark.parametrize("target", TARGETS)
def test_loop_bound_and_condition_from_gm(target):
    B, S, L = 5, 16, 48
    rng = np.random.default_rng(3)
    X = rng.standard_normal((B, L)).astype(np.float32)
    lens = np.array([0, 1, 16, 17, 48], np.int32)      # no chunk, one partial, one whole, two, all
    flags = np.array([1, 0, 1, 0, 0], np.int32)
    k = tw.compile(chunk_sum_kernel(B, L, S), out_idx=[3], target=target)
    ref = np.zeros((B, S))
    for b in range(B):
        for j in range(-(-int(lens[b]) // S)):
            ref[b] += X[b, j * S:(j + 1) * S]
        ref[b] *= 2.0 if flags[b] > 0 else 1.0
    np.testing.assert_allclose(run(k, target, X, lens, flags), ref, atol=1e-5, rtol=1e-6)


# ---- Cube + Vector: each core reads the page itself ---------------------------------------------

def paged_scores_kernel(ns, mb, nb, bs, D):
    @T.prim_func
    def paged_scores(Q: T.Tensor((ns, 16, D), "float16"), K: T.Tensor((nb, bs, D), "float16"),
                     tables: T.Tensor((ns, mb), "int32"), S: T.Tensor((ns, mb, 16, bs), "float32")):
        with T.Kernel(mb, ns) as (j, b):
            q = T.alloc_shared((16, D), "float16")
            k = T.alloc_shared((bs, D), "float16")
            s = T.alloc_fragment((16, bs), "float32")
            page = tables[b, j]
            T.copy(Q[b, :, :], q)
            T.copy(K[page, :, :], k)
            T.gemm(q, k, s, transpose_B=True, clear_accum=True)
            for i, c in T.Parallel(16, bs):
                s[i, c] = s[i, c] * 0.5
            T.copy(s, S[b, j, :, :])
    return paged_scores


@pytest.mark.parametrize("target", TARGETS)
def test_page_read_in_cube_vector_kernel(target):
    ns, mb, nb, bs, D = 2, 3, 7, 16, 32
    rng = np.random.default_rng(4)
    Q = rng.standard_normal((ns, 16, D)).astype(np.float16)
    K = rng.standard_normal((nb, bs, D)).astype(np.float16)
    tables = rng.permutation(nb)[:ns * mb].reshape(ns, mb).astype(np.int32)
    k = tw.compile(paged_scores_kernel(ns, mb, nb, bs, D), out_idx=[3], target=target)
    ref = np.einsum("bqd,bjkd->bjqk", Q.astype(np.float64), K.astype(np.float64)[tables]) * 0.5
    np.testing.assert_allclose(run(k, target, Q, K, tables), ref, atol=1e-3, rtol=1e-3)
    if target == TARGET:  # the AIC and the AIV each read the page
        assert k.get_source().count("tables_gm.GetValue(") == 2


# ---- what stays an error -------------------------------------------------------------------------

def test_scalar_read_of_written_tensor_is_located_error():
    @T.prim_func
    def bad(A: T.Tensor((4, 8), "float32"), idx: T.Tensor((4,), "int32"), O: T.Tensor((4, 8), "float32")):
        with T.Kernel(4) as b:
            t = T.alloc_fragment((8,), "float32")
            ti = T.alloc_fragment((4,), "int32")
            T.copy(idx, ti)
            T.copy(ti, idx)  # the kernel writes idx
            r = idx[b]  # @stale-read
            T.copy(A[r, :], t)
            T.copy(t, O[b, :])
    with pytest.raises(TilewrightError) as e:
        tw.compile(bad, target=TARGET)
    msg = str(e.value)
    assert "but the kernel also writes 'idx'" in msg and "DataCache" in msg, msg
    assert f"test_gm_scalar_reads.py:{marked_line(__file__, '@stale-read')[0]}:" in msg, msg


def test_tile_scalar_read_in_cube_vector_kernel_names_the_tensor_fix():
    @T.prim_func
    def bad(Q: T.Tensor((16, 32), "float16"), K: T.Tensor((4, 16, 32), "float16"),
            tables: T.Tensor((4,), "int32"), S: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as b:
            q = T.alloc_shared((16, 32), "float16")
            k = T.alloc_shared((16, 32), "float16")
            s = T.alloc_fragment((16, 16), "float32")
            ti = T.alloc_fragment((4,), "int32")
            T.copy(tables[0:4], ti)
            page = ti[1]
            T.copy(Q, q)
            T.copy(K[page, :, :], k)
            T.gemm(q, k, s, transpose_B=True, clear_accum=True)
            T.copy(s, S)
    with pytest.raises(TilewrightError) as e:
        tw.compile(bad, target=TARGET)
    msg = str(e.value)
    assert "of tile 'ti'" in msg and "read the value from the GM tensor" in msg, msg



# ---- examples/moe.py's combine: a copy region indexed by Slot[t, kk], a map scaled by Weights[t, kk] --

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tokens,ffn,top_k,n_rows", [(7, 80, 2, 32), (1, 1, 1, 1), (5, 300, 3, 40)])
def test_moe_combine_example(target, tokens, ffn, top_k, n_rows):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "moe.py"
    spec = importlib.util.spec_from_file_location("moe_example", path)
    moe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(moe)
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((n_rows, ffn)).astype(np.float32)
    slot = rng.integers(0, n_rows, size=(tokens, top_k)).astype(np.int32)
    weights = rng.uniform(0, 1, (tokens, top_k)).astype(np.float32)
    k = moe.combine(tokens, ffn, top_k, n_rows, target=target)
    ref = np.einsum("tk,tkf->tf", weights.astype(np.float64), Y.astype(np.float64)[slot])
    np.testing.assert_allclose(run(k, target, Y, slot, weights), ref, atol=1e-5, rtol=1e-5)
