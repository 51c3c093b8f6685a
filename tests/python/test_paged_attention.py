"""examples/paged_attention.py: paged-KV-cache decode attention (vLLM layout, GQA/MQA) and its
split-KV variant against a float64 reference over the gathered pages, on odd shapes: one-token and
page-boundary contexts, MQA / GQA / MHA, head dims that are not powers of two, block sizes 1-16,
more splits than pages (empty splits), each dtype with the testing module's tolerance."""
import pathlib
import re
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import paged_attention as pa  # noqa: E402
from tw_test_util import bounds_checked, unchecked_code_only

# (num_seqs, num_heads, num_kv_heads, head_dim, block_size, max_context, context lengths or None)
SHAPES = [
    (3, 8, 2, 64, 16, 300, None),           # GQA, random lengths
    (4, 4, 1, 40, 8, 33, [1, 8, 9, 33]),     # MQA; one token, exactly one page, one past, the maximum
    (2, 3, 3, 16, 5, 17, [17, 5]),           # MHA (group 1); page size 5, last page partly used
    (1, 2, 1, 128, 16, 16, [16]),            # one full page
    (2, 2, 2, 8, 1, 7, [7, 1]),              # one token per page
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:6])))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_paged_decode_matches_reference(shape, dtype):
    *dims, lens = shape
    inputs, out = pa.run(*dims, dtype=dtype, lens=lens)
    assert out.shape == inputs[0].shape and out.dtype == inputs[0].dtype
    assert_close(out, pa.reference(*inputs))


@pytest.mark.parametrize("num_splits", [1, 2, 3, 8])
@pytest.mark.parametrize("shape", SHAPES[:3], ids=lambda s: "x".join(map(str, s[:6])))
def test_paged_decode_split_kv_matches_reference(shape, num_splits):
    # 8 splits of 2-5 pages: most splits of the short sequences are empty (output 0, weight 0)
    *dims, lens = shape
    inputs, out = pa.run(*dims, num_splits=num_splits, lens=lens)
    assert_close(out, pa.reference(*inputs))


def test_paged_decode_split_kv_bfloat16():
    inputs, out = pa.run(3, 8, 2, 64, 16, 300, dtype="bfloat16", num_splits=4, seed=3)
    assert_close(out, pa.reference(*inputs))


def test_pages_outside_the_table_are_not_read():
    # Pages beyond a sequence's length hold NaN: the kernel must not read them (it walks only
    # ceil(len / block_size) pages and masks the tail of the last one).
    (q, kc, vc, bt, cl), _ = pa.run(2, 4, 2, 32, 8, 40, lens=[9, 40])
    kc, vc = kc.copy(), vc.copy()
    used = {int(p) for b, n in enumerate(cl) for p in bt[b, :-(-int(n) // 8)]}
    for blk in set(range(kc.shape[0])) - used:
        kc[blk] = np.nan
        vc[blk] = np.nan
    # token slots past the length inside the last used page of sequence 0 hold NaN too
    kc[bt[0, 1], 1:] = np.nan
    vc[bt[0, 1], 1:] = np.nan
    kern = pa.paged_decode(2, 4, 2, 32, kc.shape[0], 8, bt.shape[1])
    out = kern(q, kc, vc, bt, cl)
    kc_ref, vc_ref = np.nan_to_num(kc), np.nan_to_num(vc)
    assert np.isfinite(out).all()
    assert_close(out, pa.reference(q, kc_ref, vc_ref, bt, cl))


def test_matches_torch_sdpa_with_gqa():
    torch = pytest.importorskip("torch")
    (q, kc, vc, bt, cl), out = pa.run(2, 8, 2, 64, 16, 64, lens=[64, 37])
    F = torch.nn.functional
    for b in range(2):
        n = int(cl[b])
        pages = bt[b, :-(-n // 16)]
        k = torch.from_numpy(kc[pages].reshape(-1, 2, 64)[:n]).permute(1, 0, 2)   # (kv_heads, n, D)
        v = torch.from_numpy(vc[pages].reshape(-1, 2, 64)[:n]).permute(1, 0, 2)
        qb = torch.from_numpy(q[b]).unsqueeze(1)                                    # (heads, 1, D)
        ref = F.scaled_dot_product_attention(qb, k, v, enable_gqa=True).squeeze(1).numpy()
        assert_close(out[b], ref)


# ascend910b: tests/python/test_paged_attention_ascend.py


@pytest.mark.parametrize("num_splits", [None, 3])
def test_unused_block_table_entries_are_never_followed(num_splits):
    # The cpu target prefetches the next step's pages from the block table (prefetch_gathers):
    # entries past a sequence's pages hold garbage in vLLM (here huge and negative page numbers),
    # and neither the kernel nor its prefetches may follow them (a wrong read would be a crash or
    # a wrong output). 5 pages of 8 tokens per sequence at most, 1-5 of them used.
    (q, kc, vc, bt, cl), _ = pa.run(3, 4, 2, 32, 8, 40, lens=[3, 17, 40])
    bt = bt.copy()
    for b, n in enumerate(cl):
        bt[b, -(-int(n) // 8):] = [10**9, -(10**9), -1, 2**31 - 1, 7][:bt.shape[1] - (-(-int(n) // 8))]
    if num_splits is None:
        out = pa.paged_decode(3, 4, 2, 32, kc.shape[0], 8, bt.shape[1])(q, kc, vc, bt, cl)
    else:
        part, lse = pa.paged_decode_split(3, 4, 2, 32, kc.shape[0], 8, bt.shape[1], num_splits)(q, kc, vc, bt, cl)
        out = pa.combine_splits(3, 4, num_splits, 32)(part, lse)
    assert_close(out, pa.reference(q, kc, vc, bt, cl))


def test_cpu_prefetches_the_next_steps_pages():
    # the generated C++ requests the next step's pages (read from the block table) into L2
    kern = pa.paged_decode(2, 4, 2, 32, 11, 8, 5)
    src = kern.get_source("c++")
    assert "prefetched into L2 (prefetch_gathers)" in src
    assert src.count("__builtin_prefetch") == 2  # the K and the V page


def test_cpu_leaves_contiguous_pages_to_the_hardware_prefetcher():
    # one kv head, head_dim 128 fp32, page 16: a page is one contiguous 8 KiB run, which the
    # hardware prefetchers stream (prefetch_gathers' kStreamedRun): no software prefetch
    (q, kc, vc, bt, cl), _ = pa.run(2, 4, 1, 128, 16, 70, lens=[70, 17], seed=4)
    kern = pa.paged_decode(2, 4, 1, 128, kc.shape[0], 16, bt.shape[1])
    assert "__builtin_prefetch" not in kern.get_source("c++")
    assert_close(kern(q, kc, vc, bt, cl), pa.reference(q, kc, vc, bt, cl))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("heads", [(4, 2), (4, 1), (3, 3)], ids=["gqa", "mqa", "mha"])
def test_nan_past_the_context_at_page_edges(heads, dtype):
    # contexts 1, block_size - 1, block_size + 1 and a full step: the slots past each context
    # hold NaN, and the cpu kernel writes zeros only into the value rows past it (the mask map
    # keeps the other rows: tests/python/test_cpu_row_keep_map.py)
    nh, kvh, bs = *heads, 8
    lens = [1, bs - 1, bs + 1, 4 * bs]
    (q, kc, vc, bt, cl), _ = pa.run(4, nh, kvh, 24, bs, 4 * bs, dtype=dtype, lens=lens, seed=5)
    kc, vc = kc.copy(), vc.copy()
    for b, n in enumerate(lens):
        last = bt[b, (n - 1) // bs]
        kc[last, (n - 1) % bs + 1:] = np.nan
        vc[last, (n - 1) % bs + 1:] = np.nan
    kern = pa.paged_decode(4, nh, kvh, 24, kc.shape[0], bs, bt.shape[1], dtype)
    out = kern(q, kc, vc, bt, cl)
    assert np.isfinite(out.astype(np.float32)).all()
    assert_close(out, pa.reference(q, np.nan_to_num(kc), np.nan_to_num(vc), bt, cl))
    if not bounds_checked():  # checked code masks v by another route (the results above are the test there)
        assert "map keeping the rows of v where the condition holds" in kern.get_source("c++")


# paged_decode_pages: the cpu form (one program per sequence over all kv heads, whole pages)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:6])))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_paged_decode_pages_matches_reference(shape, dtype):
    *dims, lens = shape
    inputs, out = pa.run(*dims, dtype=dtype, lens=lens, pages=True)
    assert out.shape == inputs[0].shape and out.dtype == inputs[0].dtype
    assert_close(out, pa.reference(*inputs))


def check_pages_context_edges(dtype, pages_per_step, num_heads=8, num_kv_heads=2, head_dim=32):
    # contexts 1, 15, 16, 17 and 4095 of page 16 (256 pages, the last one partly used);
    # the block table is a shuffle of an odd number of blocks (make_inputs: 5 * 256 + 3) with the
    # cache's last block as the longest sequence's last page and second page (so a next-page
    # prefetch ends at the cache's end); the slots past each context and every block no sequence
    # uses hold NaN; the block table entries past a sequence's pages hold garbage page numbers
    # (never followed, prefetches included)
    lens = [1, 15, 16, 17, 4095]
    nh, kvh = num_heads, num_kv_heads
    q, kc, vc, bt, cl = pa.make_inputs(5, nh, kvh, head_dim, 16, 4095, dtype, seed=11, lens=lens)
    kc, vc, bt = kc.copy(), vc.copy(), bt.copy()
    last_block = kc.shape[0] - 1
    for j in (255, 1):
        where = np.argwhere(bt == last_block)
        if len(where):
            bt[tuple(where[0])] = bt[4, j]
        bt[4, j] = last_block
        last_block -= 1
    used = {int(p) for b, n in enumerate(lens) for p in bt[b, :-(-n // 16)]}
    for blk in set(range(kc.shape[0])) - used:
        kc[blk] = np.nan
        vc[blk] = np.nan
    for b, n in enumerate(lens):
        last = bt[b, (n - 1) // 16]
        kc[last, (n - 1) % 16 + 1:] = np.nan
        vc[last, (n - 1) % 16 + 1:] = np.nan
        garbage = [10**9, -(10**9), -1, 2**31 - 1] * bt.shape[1]
        bt[b, -(-n // 16):] = garbage[:bt.shape[1] - (-(-n // 16))]
    kern = pa.paged_decode_pages(5, nh, kvh, head_dim, kc.shape[0], 16, bt.shape[1], dtype, pages_per_step)
    out = kern(q, pa.page_view(kc), pa.page_view(vc), bt, cl)
    assert np.isfinite(out.astype(np.float32)).all()
    assert_close(out, pa.reference(q, np.nan_to_num(kc), np.nan_to_num(vc), bt, cl))
    return kern


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("pages_per_step", [1, 3, 4])
def test_paged_decode_pages_context_edges(dtype, pages_per_step):
    check_pages_context_edges(dtype, pages_per_step)  # GQA 8 / 2


@pytest.mark.parametrize("heads,dtype", [((4, 4), "float32"), ((4, 2), "float16"), ((6, 2), "bfloat16"),
                                         ((8, 1), "float16")], ids=["mha-G1", "gqa-G2", "gqa-G3", "mqa-G8"])
def test_paged_decode_pages_context_edges_per_group(heads, dtype):
    # the per-kv-head gemms have G = num_heads / num_kv_heads rows (1, 2, 3, 8: the gemm runtime's
    # small-M path, nothing packed) against one page read in place
    check_pages_context_edges(dtype, 4, *heads)


@pytest.mark.parametrize("heads,dtype,pages_per_step", [((8, 2), "bfloat16", 4), ((6, 2), "float16", 3),
                                                        ((8, 4), "bfloat16", 1), ((8, 2), "float32", 4),
                                                        ((6, 2), "float32", 1)],
                         ids=["gqa-G4", "gqa-G3", "gqa-pps1", "fp32-G4", "fp32-pps1"])
def test_paged_decode_pages_strip_prefetch_context_edges(heads, dtype, pages_per_step):
    # head_dim 128: a 16-bit page of 2-4 kv heads is 8-16 KiB, read in place by one gemm per kv
    # head of a 256-byte strip of each row; each call is passed its strip of the next page, which
    # it prefetches over its loops (prefetch_gathers @prefetch_slices, gemm.h next_b: the last page
    # of a step prefetches the next step's first, a sequence's last page nothing, garbage table
    # entries nothing; fp32 the page 4 ahead: a sequence's last 4 pages nothing)
    kern = check_pages_context_edges(dtype, pages_per_step, *heads, head_dim=128)
    src = kern.get_source("c++")
    assert src.count("/*next_b=*/") == 2  # the K and the V gemm


@unchecked_code_only
def test_paged_decode_pages_strip_prefetch_code():
    # where it is emitted and how it is bounded: the next table entry read only inside the table
    # (its index checked against the table's 5 columns), and only while the next page is one the
    # sequence has; the next page's pointer only set when the page lies inside the cache (300
    # blocks); the strip passed to each per-kv-head gemm call (next_b: null when there is no next
    # page), bfloat16 and float32 alike; not for a page one gemm reads whole (MQA), nor for a
    # cache that stays in L2 (13 blocks, 104 KiB)
    src = pa.paged_decode_pages(2, 8, 2, 128, 300, 16, 5, "bfloat16").get_source("c++")
    assert "k_nx = nullptr;" in src and "v_nx = nullptr;" in src
    assert "if ((((j * 4) + (jj + 1)) < pages)) {" in src
    assert "(0 <= ((j * 4) + (jj + 1)))) & (((j * 4) + (jj + 1)) < 5)" in src
    for t in "KV":  # the next K and V page: inside the cache
        assert re.search(r"if \(tw_s0 >= 0 && \(tw_s0 \+ 1\) <= 300\) \{\s*" + t.lower() + "_nx = " + t + r" \+ tw_sb;", src)
    assert "/*next_b=*/k_nx ? k_nx + (h * 128) : nullptr, /*next_ldb=*/k_nx_ld);" in src
    assert "/*next_b=*/v_nx ? v_nx + (h_1 * 128) : nullptr, /*next_ldb=*/v_nx_ld);" in src
    assert "__builtin_prefetch" not in src  # the gemm runtime prefetches
    f32 = pa.paged_decode_pages(2, 8, 2, 128, 300, 16, 5).get_source("c++")
    assert f32.count("/*next_b=*/") == 2  # float32: the target's lead (tw_cpu/simd.h kSliceLead32)
    lead = "(jj + tw_cpu::simd::kSliceLead32)"
    assert f"if ((((j * 4) + {lead}) < pages)) {{" in f32 and "(jj + 1)" not in f32
    assert f"(0 <= ((j * 4) + {lead}))) & (((j * 4) + {lead}) < 5)" in f32
    assert "next_b" not in pa.paged_decode_pages(2, 8, 1, 128, 300, 16, 5, "bfloat16").get_source("c++")
    assert "next_b" not in pa.paged_decode_pages(2, 8, 2, 128, 13, 16, 5, "bfloat16").get_source("c++")


def _int32_before_a_guard_page(a):
    # a copy of the int32 array a that ends where an inaccessible page begins: a read past its end
    # is a segmentation fault, not a silently wrong value
    import ctypes
    import mmap
    size = -(-a.nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
    m = mmap.mmap(-1, size + mmap.PAGESIZE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(addr + size, mmap.PAGESIZE, 0) == 0  # PROT_NONE
    out = np.frombuffer(m, dtype=np.int32, count=a.size, offset=size - a.nbytes).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_page_strip_prefetch_never_reads_past_the_block_table(dtype):
    # a page loop without an `if`: every table entry is a page, and the last iteration's next
    # index lies past the table (the last 4 iterations' for fp32, 4 pages ahead), which ends at an
    # inaccessible page; the table's read for the next page is guarded by its extent
    # (prefetch_gathers @prefetch_slices). The table holds the cache's last block too (its strips
    # end at the cache's end).
    import tilewright as tw
    import tilewright.language as T
    from tilewright.testing import randn

    S, KVH, MB, NB, G = 3, 2, 5, 300, 4  # a 2.3 MiB cache: more than stays in L2

    @T.prim_func
    def page_scores(Q: T.Tensor((S, KVH * G, 128), dtype), K: T.Tensor((NB, 16, KVH * 128), dtype),
                    BT: T.Tensor((S, MB), "int32"), Out: T.Tensor((S, KVH * G, 16), "float32")):
        with T.Kernel(S) as b:
            q = T.alloc_shared((KVH * G, 128), dtype)
            k = T.alloc_shared((16, KVH * 128), dtype)
            s = T.alloc_fragment((KVH * G, 16), "float32")
            T.copy(Q[b, :, :], q)
            T.fill(s, 0)
            for j in T.serial(MB):
                page = BT[b, j]
                T.copy(K[page, :, :], k)
                for h in T.serial(KVH):
                    T.gemm(q[h * G:(h + 1) * G, :], k[:, h * 128:(h + 1) * 128], s[h * G:(h + 1) * G, :],
                           transpose_B=True)
            T.copy(s, Out[b, :, :])

    kern = tw.compile(page_scores, out_idx=[3])
    assert kern.get_source("c++").count("/*next_b=*/") == 1
    rng = np.random.default_rng(7)
    q, kc = randn((S, KVH * G, 128), dtype, seed=rng), randn((NB, 16, KVH * 128), dtype, seed=rng)
    bt = rng.integers(0, NB, size=(S, MB)).astype(np.int32)
    bt[-1, -1] = bt[0, 0] = NB - 1
    guarded = _int32_before_a_guard_page(bt)
    out = kern(q, kc, guarded)
    qf, kf = q.astype(np.float64), kc.astype(np.float64)
    ref = np.zeros((S, KVH * G, 16))
    for b in range(S):
        for j in range(MB):
            for h in range(KVH):
                ref[b, h * G:(h + 1) * G] += qf[b, h * G:(h + 1) * G] @ kf[bt[b, j], :, h * 128:(h + 1) * 128].T
    assert_close(out, ref, atol=2e-2, rtol=1e-2)


def test_paged_decode_pages_reads_the_pages_in_place():
    # a page's K and V tiles are only read by the gemms: views of the cache (no copy on the fast
    # path), the value page's run-time extent replacing a mask pass over v; only a partly used
    # last page is copied (its rows past the length read as 0)
    src = pa.paged_decode_pages(2, 8, 2, 32, 2 * 5 + 3, 16, 5).get_source("c++")
    assert "elided: k is only read (by gemm), from K in place" in src
    assert "elided: v is only read (by gemm), from V in place" in src
    assert "map keeping the rows of v" not in src


def test_paged_decode_pages_agrees_with_the_per_head_kernel_and_torch():
    # the same inputs through both forms (vLLM's 4-D cache for paged_decode, its page view for
    # paged_decode_pages: no copy) and torch SDPA with enable_gqa on the gathered cache
    (q, kc, vc, bt, cl), out = pa.run(3, 8, 2, 64, 16, 200, lens=[200, 1, 33], pages=True, seed=2)
    assert np.shares_memory(pa.page_view(kc), kc)
    # a whole page is one contiguous run (16 x 2 x 64 fp32 = 8 KiB): left to the hardware
    # prefetchers (prefetch_gathers emits no software prefetch for it)
    src = pa.paged_decode_pages(3, 8, 2, 64, kc.shape[0], 16, bt.shape[1]).get_source("c++")
    assert "__builtin_prefetch" not in src
    per_head = pa.paged_decode(3, 8, 2, 64, kc.shape[0], 16, bt.shape[1])(q, kc, vc, bt, cl)
    assert_close(out, per_head)
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    for b in range(3):
        n = int(cl[b])
        pages = bt[b, :-(-n // 16)]
        k = torch.from_numpy(kc[pages].reshape(-1, 2, 64)[:n]).permute(1, 0, 2)
        v = torch.from_numpy(vc[pages].reshape(-1, 2, 64)[:n]).permute(1, 0, 2)
        ref = F.scaled_dot_product_attention(torch.from_numpy(q[b]).unsqueeze(1), k, v, enable_gqa=True)
        assert_close(out[b], ref.squeeze(1).numpy())
