"""Findings of the session 23 fuzzer run (h-fuzz11, /work/fuzz11-findings.md): the sixteenth stream's
LLM-kernel forms (tests/python/fuzz/llm.py), each reduced and checked on cpu and on ascend910b
(simulator, checker on) against float64. An open finding is a strict xfail: when its fix lands the
test passes, and the xfail and its KNOWN_BUGS entry (fuzz/known.py) must go."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import run_checked
from fuzz import runner


def _index_mask(dt, runtime):
    """x = A's 4 x 8 block in a `dt` tile; rows at or past the bound set to 0 by an index mask."""
    @T.prim_func
    def k(A: T.Tensor((4, 8), "float32"), Lens: T.Tensor((1,), "int32"), O: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 8), dt)
            n = Lens[0]
            T.copy(A[0, 0], x)
            for i, c in T.Parallel(4, 8):
                if runtime:
                    x[i, c] = T.where(i < n, x[i, c], 0.0)
                else:
                    x[i, c] = T.where(i < 3, x[i, c], 0.0)
            T.copy(x, O[0, 0])
    return k


def _f1_check(target, dt, runtime):
    a = (np.arange(32, dtype=np.float32).reshape(4, 8) - 16) / 4
    k = tw.compile(_index_mask(dt, runtime), target=target, out_idx=[-1])
    args = (a, np.array([3], np.int32))
    got = np.asarray(k(*args) if target == "cpu" else run_checked(k, *args), np.float64)
    ref = np.where(np.arange(4)[:, None] < 3, a.astype(np.float64), 0.0)   # exact in bfloat16
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("runtime", [False, True], ids=["constant_bound", "runtime_bound"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_f1_index_mask_cpu(dt, runtime):
    _f1_check("cpu", dt, runtime)


def test_f1_index_mask_float16_ascend():
    _f1_check("ascend910b", "float16", True)


# fuzz11 F1 (fixed by h-ascbf11): an index mask on a bfloat16 tile was 'no bfloat16 arithmetic' on ascend910b.
@pytest.mark.parametrize("runtime", [False, True], ids=["constant_bound", "runtime_bound"])
def test_f1_index_mask_bfloat16_ascend(runtime):
    _f1_check("ascend910b", "bfloat16", runtime)


# F2: the reduced description of seed 192 of the llm stream (a two-gemm attention chain)
F2 = {"seed": 192, "kind": "llm", "llm": "attn", "sym": False, "loop": "serial", "dt_in": "bfloat16",
      "dt_out": "float32", "dt_tile": "float32", "stages": 3, "bm": 16, "bn": 16, "mask": "none", "hide": "-inf",
      "init": "lowest", "exp": "exp", "final": "where", "scale": 1.0, "M": 32, "N": 31, "D": 16}


def _f2_status(target, **kw):
    status, detail = runner.run_target(dict(F2, **kw), target, runner.Compiled())
    assert status == "ok", detail


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_f2_attention_chain_cpu(dt):
    _f2_status("cpu", dt_in=dt)


@pytest.mark.parametrize("M,N", [(32, 16), (1, 17)])
def test_f2_attention_chain_bfloat16_one_key_block_ascend(M, N):
    _f2_status("ascend910b", M=M, N=N)


def test_f2_attention_chain_float16_ascend():
    _f2_status("ascend910b", dt_in="float16")


# fuzz11 F2 (fixed by h-ascbf11): bfloat16 two-gemm attention over two or more key blocks was wrong beyond
# rounding on ascend910b (the looped score hand-off went through GM in bfloat16).
def test_f2_attention_chain_bfloat16_ascend():
    _f2_status("ascend910b")
