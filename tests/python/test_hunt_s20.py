"""Session 20's odd-shape hunt (h-hunt8, docs/testing.md "Session 20: ... (h-hunt8)"): the defects it
found, each as a minimal test against float64 numpy (and cpu against ascend910b, simulator with
its checker on). Each was a strict xfail until its fix landed the same session (h-gemmclip8,
h-ascendk8, h-maskfix8); they now guard the fixes."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import masked_attention as ma  # noqa: E402
from ascend_util import TARGET, exact_values, run_checked  # noqa: E402


def _child(tmp_path, source, checked=False, own_cache=None):
    """Runs `source` in a child process (a crash is its exit status), with TW_BOUNDS_CHECK=1 when
    `checked` (read once per process), on the suite's disk cache (tw_test_util.suite_cache_dir: the
    gemm runtime library is not compiled again) or, `own_cache` (the tmp_path_factory), a fresh one
    holding only a copy of the gemm runtime library (tw_test_util.seed_gemm_runtime)."""
    from tw_test_util import seed_gemm_runtime, suite_cache_dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "cache") if own_cache else suite_cache_dir(tmp_path)
    if own_cache:
        seed_gemm_runtime(tmp_path / "cache", own_cache)
    if checked:
        env["TW_BOUNDS_CHECK"] = "1"
    (tmp_path / "child.py").write_text(source)
    return subprocess.run([sys.executable, str(tmp_path / "child.py")], env=env, capture_output=True, text=True,
                          timeout=900, cwd=str(ROOT))


# ---------------------------------------------------------------------------------------------
# examples/masked_attention.py: a sliding window with a mask tensor when seq_q > seq_kv.
# The first key block of query block bx is lo = max(bx * block_M - window + 1, 0) // block_N,
# which passes ceil(seq_kv / block_N) when the query blocks reach past the keys; KvPos[bx, lo]
# (line `first = KvPos[bx, lo]`) then indexes past KvPos's last column, and the compiler rejects
# the kernel ("index lo of 'KvPos' reaches 2, outside dimension 1 of size 2"). Those query rows
# see no key (window): the output there is 0. Without a mask tensor the same shapes run.

@pytest.mark.parametrize("mask", ["bool", "additive"])
def test_window_with_a_mask_tensor_and_more_queries_than_keys(mask):
    out, ref = ma.run(1, 2, 1, 33, 16, 8, window=1, mask=mask, block_M=16, block_N=16)
    assert_close(out, ref)


@pytest.mark.parametrize("sq,skv,window", [(33, 16, 1), (65, 2, 33), (40, 17, 3)])
def test_window_without_a_mask_tensor_and_more_queries_than_keys(sq, skv, window):
    out, ref = ma.run(1, 2, 1, sq, skv, 8, window=window, block_M=16, block_N=16)
    assert_close(out, ref)


# ---------------------------------------------------------------------------------------------
# examples/masked_attention.py in checked mode (TW_BOUNDS_CHECK=1), two broken band promises on
# valid inputs (both results are right unchecked: the values involved are never stored):
# - a key block whose mask band (Bands, from block_bands) and causal / window band do not meet
#   gives d_lo > d_hi: "gemm c_band=(-2, -15) ... has lo > hi" at the Q K^T gemm (the block is
#   listed because the mask shows an element in rows that causal hides);
# - a block the mask shows whole (Blocks = 2, the branch without mask work) in the last query
#   block, with rows past seq_q: that branch does not hide the rows past seq_q (the partial
#   branch does, since session 19), so their scores outside the c_band (NaN in checked mode)
#   reach P: "gemm a_band=(-1, 1) ... is broken: op(A)[2, 0] ('acc_s') is nan" at the P V gemm.

ATT_CHILD = '''
import sys
import numpy as np
sys.path.insert(0, "examples")
import masked_attention as ma
import tilewright as tw
from tilewright.testing import assert_close


def full_mask(sq, skv, d):
    q, k, v, _ = ma.inputs(1, 1, 1, sq, skv, d)
    mask = np.ones((sq, skv), bool)
    kern = ma.attention_prefill(1, 1, 1, sq, skv, d, "BHSD", False, None, "bool", False)
    out = kern(q, k, v, mask, *ma.prefill_blocks(mask), np.array([skv], np.int32))
    assert_close(out, ma.reference(q, k, v, mask))


for name, run in [("empty band", lambda: assert_close(*ma.run(1, 1, 1, 3, 32, 16, causal=True, mask="bool",
                                                               block_M=32, block_N=16))),
                  ("full block, rows past seq_q", lambda: full_mask(2, 1, 16))]:
    try:
        run()
        print("OK", name)
    except tw.TilewrightError as e:
        print("ERR", name, e.message)
'''


def test_band_promises_of_masked_attention_in_checked_mode(tmp_path):
    p = _child(tmp_path, checked=True, source=ATT_CHILD)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-2:] == ["OK empty band", "OK full block, rows past seq_q"], p.stdout


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_band_promise_cases_unchecked(target):
    out, ref = ma.run(1, 1, 1, 3, 32, 16, causal=True, mask="bool", block_M=32, block_N=16, target=target)
    assert_close(out, ref)
    q, k, v, _ = ma.inputs(1, 1, 1, 2, 1, 16)
    mask = np.ones((2, 1), bool)
    kern = ma.attention_prefill(1, 1, 1, 2, 1, 16, "BHSD", False, None, "bool", False, target=target)
    args = (q, k, v, mask, *ma.prefill_blocks(mask, target=target), np.array([1], np.int32))
    out = kern(*args) if target == "cpu" else run_checked(kern, *args)
    assert_close(out, ma.reference(q, k, v, mask))


# ---------------------------------------------------------------------------------------------
# T.gemm with operands straight from global tensors (docs/language.md T.gemm), in a user's K
# loop of 128-wide slices where K is not a multiple of 128: the last slice reaches past the
# tensor's K. ascend910b stages the operands with T.copy semantics (outside the tensor reads as
# 0) and gives the exact product; cpu passes the slice's pointer to the gemm unclipped
# (src/target/cpu/codegen.cpp emit_gemm: "gemm does not clip", global regions unchecked), so it
# reads the next rows of A and memory past B's end: wrong values or NaN, silently, and
# TW_BOUNDS_CHECK=1 does not report it. Fixed by h-gemmclip8: cpu clips such a region at run time
# (tests/python/test_gemm_global_clip.py).

def _gemm_k_loop(M, N, K, bk, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for ko in T.serial(T.ceildiv(K, bk)):
                T.gemm(A[0:M, ko * bk:(ko + 1) * bk], B[ko * bk:(ko + 1) * bk, 0:N], c)
            T.copy(c, C)
    return main


def _k_loop_inputs(M, N, K, dtype):
    rng = np.random.default_rng(0)
    return exact_values((M, K), dtype, rng), exact_values((K, N), dtype, rng)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gemm_global_k_tail_on_ascend(dtype):
    a, b = _k_loop_inputs(16, 16, 200, dtype)
    out = run_checked(tw.compile(_gemm_k_loop(16, 16, 200, 128, dtype), target=TARGET, out_idx=[2]), a, b)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gemm_global_k_tail_on_cpu(dtype):
    a, b = _k_loop_inputs(16, 16, 200, dtype)
    # B's rows past K as NaN in the same allocation, so a read past the tensor shows
    bb = np.full((256, 16), np.nan, b.dtype)
    bb[:200] = b
    out = tw.compile(_gemm_k_loop(16, 16, 200, 128, dtype), out_idx=[2])(a, bb[:200])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64))


# ---------------------------------------------------------------------------------------------
# T.gemm on global tensors on ascend910b, a whole K of 600 in one gemm (no user K loop), 32 x 16
# blocks of float16 / bfloat16: stage_gemm_operands keeps all of K in L1 (its staged tiles,
# (32 + 16) * 600 * 2 B, fit kStageBytes = 64 KiB), and expand_gemm then needs an L0 K step that
# is a multiple of 16 and divides 600 (none does) while all of K does not fit L0A twice: "no K
# step fits two L0A tiles of 32 rows and two L0B tiles of 16 columns", with a hint to use smaller
# blocks (smaller blocks fail the same way; 32 x 32, K = 1000 or float32 run). The same with
# float32, K = 200 and 16 x 64 blocks (staged (16 + 64) * 200 * 4 B < 64 KiB; two L0B tiles of
# 208 x 64 float32 do not fit 64 KiB, and no multiple of 16 divides 200). cpu runs them.
# Fixed by h-ascendk8 (session 20): expand_gemm takes the largest multiple of 16 that fits and a
# shorter last step (512 + 88, 128 + 72); more cases in test_ascend_gemm_global.py.

def _gemm_whole_k(M, N, K, bm, bn, dtype, tb):
    bsh = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(bsh, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            c = T.alloc_fragment((bm, bn), "float32")
            if tb:
                T.gemm(A[by * bm:(by + 1) * bm, 0:K], B[bx * bn:(bx + 1) * bn, 0:K], c, transpose_B=True,
                       clear_accum=True)
            else:
                T.gemm(A[by * bm:(by + 1) * bm, 0:K], B[0:K, bx * bn:(bx + 1) * bn], c, clear_accum=True)
            T.copy(c, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return main


def _whole_k_case(M, N, K, bm, bn, dtype, tb, target):
    rng = np.random.default_rng(1)
    a = exact_values((M, K), dtype, rng)
    opb = exact_values((K, N), dtype, rng)
    b = np.ascontiguousarray(opb.T) if tb else opb
    kern = tw.compile(_gemm_whole_k(M, N, K, bm, bn, dtype, tb), target=target, out_idx=[2])
    out = kern(a, b) if target == "cpu" else run_checked(kern, a, b)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ opb.astype(np.float64))


@pytest.mark.parametrize("args", [(33, 15, 600, 32, 32, "float16", True), (33, 15, 1000, 32, 16, "float16", True),
                                  (33, 15, 600, 32, 16, "float32", True)])
@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_gemm_global_whole_k_runs(args, target):
    _whole_k_case(*args, target)


@pytest.mark.parametrize("args", [(33, 15, 600, 32, 16, "float16", True), (33, 15, 600, 16, 32, "bfloat16", False),
                                  (33, 3, 200, 16, 64, "float32", True)])
def test_gemm_global_whole_k_without_an_l0_step_on_ascend(args):
    _whole_k_case(*args, TARGET)


# ---------------------------------------------------------------------------------------------
# @tw.autotune over examples/masked_attention.py's attention_prefill with a mask tensor, as
# docs/workflow.md shows it: the tuner times every configuration on kernel.example_inputs()
# (autotune.py: cpu timing phase), whose int32 tensors are random in [-8, 8). The kernel reads
# its block tables (KvPos, KvIdx, Blocks) as indices, so the timing run reads far outside them:
# the process dies of SIGSEGV (with TW_BOUNDS_CHECK=1: "index -6 is out of bounds for dimension 1
# of 'KvIdx'"). paged_decode's block tables are read the same way (out of bounds when a random
# context length passes the table; no crash seen). Expected: the tuner times on inputs that are
# valid for the kernel (inputs the caller gives), or reports a TilewrightError; never a crash.
# Fixed by h-maskfix8: `inputs=fn(kernel, **params)` gives the timing inputs; without it a kernel
# with an int32 / int64 input is a TilewrightError naming the inputs and the fix.

TUNE_CHILD = '''
import sys
import numpy as np
sys.path.insert(0, "examples")
import masked_attention as ma
import tilewright as tw
configs = [tw.Config(block_M=16, block_N=16), tw.Config(block_M=32, block_N=32)]
untuned = tw.autotune(configs=configs, key=["seq_q"], executor="inline", verbose=False)(ma.attention_prefill)
try:
    untuned(1, 2, 1, 40, 40, 16, "BHSD", False, None, "bool", False)
    print("NO ERROR")
except tw.TilewrightError as e:
    print("ERR", e.message.splitlines()[0], "|", e.hint)
tuned = tw.autotune(configs=configs, key=["seq_q"], executor="inline", verbose=False,
                    inputs=ma.tune_inputs)(ma.attention_prefill)
kern = tuned(1, 2, 1, 40, 40, 16, "BHSD", False, None, "bool", False)
cfg = tuned.best_config
q, k, v, rng = ma.inputs(1, 2, 1, 40, 40, 16)
mask = rng.random((40, 40)) < 0.7
out = kern(q, k, v, mask, *ma.prefill_blocks(mask, cfg["block_M"], cfg["block_N"]), np.array([40], np.int32))
tw.testing.assert_close(out, ma.reference(q, k, v, mask))
print("OK")
'''


def test_autotune_of_attention_with_a_mask_tensor_does_not_crash(tmp_path, tmp_path_factory):
    p = _child(tmp_path, TUNE_CHILD, own_cache=tmp_path_factory)   # a fresh tuning store: the tuner runs
    assert p.returncode == 0, f"exit status {p.returncode}: {p.stderr[-2000:]}"
    lines = p.stdout.strip().splitlines()
    assert lines[-1] == "OK", p.stdout
    assert lines[0].startswith("ERR autotune 'attention_prefill': the kernel's inputs 'Blocks', 'KvPos', 'KvIdx', "
                               "'Bands', 'Rects', 'KvLen' are integer") and "inputs=fn" in lines[0], p.stdout


# The same unclipped operand in the M direction: a whole-K gemm on a global slice
# A[by * bm:(by + 1) * bm, 0:K] whose rows pass the tensor's last row (M = 1, bm = 16) reads
# bm - 1 rows past the end of A. Here A ends at a guard page (PROT_NONE): the cpu kernel dies of
# SIGSEGV, with TW_BOUNDS_CHECK=1 too (numpy arrays of a few MiB end at unmapped memory just the
# same). ascend910b gives the product (tests above). Expected on cpu: the product (fixed by h-gemmclip8).

GUARD_CHILD = '''
import ctypes, mmap, sys
import numpy as np
import tilewright as tw
import tilewright.language as T
M, N, K, bm, bn = 1, 16, 1024, 16, 16


@T.prim_func
def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
    with T.Kernel(1, T.ceildiv(M, bm)) as (bx, by):
        c = T.alloc_fragment((bm, bn), "float32")
        T.gemm(A[by * bm:(by + 1) * bm, 0:K], B[0:K, 0:N], c, clear_accum=True)
        T.copy(c, C[by * bm:(by + 1) * bm, 0:N])


kern = tw.compile(main, out_idx=[2])
nbytes = M * K * 4
buf = mmap.mmap(-1, nbytes + mmap.PAGESIZE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(addr + nbytes), mmap.PAGESIZE, 0) == 0
a = np.frombuffer(buf, np.float32, count=M * K).reshape(M, K)
a[:] = np.arange(K) % 5 - 2
b = (np.arange(K * N).reshape(K, N) % 3 - 1).astype(np.float32)
out = kern(a, b)
print("OK" if np.array_equal(out, a.astype(np.float64) @ b) else "WRONG")
'''


def test_gemm_global_row_tail_on_cpu_at_a_guard_page(tmp_path):
    p = _child(tmp_path, GUARD_CHILD)
    assert p.returncode == 0, f"exit status {p.returncode}: {p.stderr[-2000:]}"
    assert p.stdout.strip().splitlines()[-1] == "OK", p.stdout


def test_gemm_global_row_tail_on_ascend():
    _whole_k_case(1, 16, 1024, 16, 16, "float32", False, TARGET)
