"""Session 30 (h-uninit, issue 13): the simulator reports on-chip bytes no instruction of the block
wrote when they reach GM (docs/ascend.md "Session 30: unwritten tile bytes reaching GM").

Session 29's hunt (F2): examples/rope.py with an odd head dim left the last column of its output
tile unwritten; cpu returned the stack array's stale values and ascend910b the simulator's 0x7B fill
(1.3e36), with no report on either. The example now rejects an odd dim; a kernel written without
that guard is now an `uninitialised read` report at its copy out on ascend910b. Kernels that write
what they copy out (a partial last block with tails, a tile zero-filled then partly written) run
without a report. One small shape per property; ascend910b only (the simulator, no g++ build).
Tolerances: float32 1e-5 / 1e-5 against float64 numpy (one multiply-add per element)."""
import pathlib
import sys

import numpy as np

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from tw_test_util import located  # noqa: E402

THIS = __file__


@tw.jit(out_idx=[-1])
def rope_no_guard(tokens, dim, block_M=8):
    """examples/rope.py's half-split rotation without the even-dim guard (tables per token)."""
    half = dim // 2

    @T.prim_func
    def main(X: T.Tensor((tokens, dim), "float32"), Cos: T.Tensor((tokens, half), "float32"),
             Sin: T.Tensor((tokens, half), "float32"), Y: T.Tensor((tokens, dim), "float32")):
        with T.Kernel(T.ceildiv(tokens, block_M)) as bx:
            x = T.alloc_fragment((block_M, dim), "float32")
            y = T.alloc_fragment((block_M, dim), "float32")
            c = T.alloc_fragment((block_M, half), "float32")
            s = T.alloc_fragment((block_M, half), "float32")
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x)
            T.copy(Cos[bx * block_M:(bx + 1) * block_M, :], c)
            T.copy(Sin[bx * block_M:(bx + 1) * block_M, :], s)
            for i, j in T.Parallel(block_M, half):
                a = x[i, j]
                b = x[i, j + half]
                y[i, j] = a * c[i, j] - b * s[i, j]
                y[i, j + half] = b * c[i, j] + a * s[i, j]
            T.copy(y, Y[bx * block_M:(bx + 1) * block_M, :])  # uninit-rope

    return main


def test_odd_head_dim_column_never_written_is_reported_at_the_copy_out():
    # dim 17: the rotation writes columns 0..15, column 16 of y is never written
    tokens, dim = 8, 17
    rng = np.random.default_rng(30)
    x = rng.standard_normal((tokens, dim)).astype(np.float32)
    cs = rng.standard_normal((tokens, dim // 2)).astype(np.float32)
    k = rope_no_guard(tokens, dim, target=TARGET)
    located(lambda: k(x, cs, cs), THIS, "uninit-rope", "uninitialised read",
            "that no instruction of this block wrote out to GM tensor Y", "tile y", "element(s) [16, 17)",
            "write every element of y before copying it out, or copy out only the written part")


@tw.jit(out_idx=[-1])
def scale_tail(M, N, block_M=8, block_N=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(X[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = x[i, j] * 3.0 + 1.0
            T.copy(x, Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return main


def test_partial_last_blocks_with_tails_are_not_reported():
    # 13 x 21: the last row block has 5 rows, the last column block 5 columns (DataCopyPad tails)
    M, N = 13, 21
    x = np.random.default_rng(31).standard_normal((M, N)).astype(np.float32)
    y = run_checked(scale_tail(M, N, target=TARGET), x)
    tw.testing.assert_close(np.asarray(y, np.float64), x.astype(np.float64) * 3.0 + 1.0, atol=1e-5, rtol=1e-5)


@tw.jit(out_idx=[-1])
def fill_then_part(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            T.fill(y, 0.0)
            for i, j in T.Parallel(M, N - 1):
                y[i, j] = x[i, j] * 2.0
            T.copy(y, Y)

    return main


def test_zero_filled_tile_partly_written_is_not_reported():
    M, N = 4, 9
    x = np.random.default_rng(32).standard_normal((M, N)).astype(np.float32)
    y = run_checked(fill_then_part(M, N, target=TARGET), x)
    ref = np.zeros((M, N))
    ref[:, :N - 1] = x[:, :N - 1].astype(np.float64) * 2.0
    tw.testing.assert_close(np.asarray(y, np.float64), ref, atol=1e-5, rtol=1e-5)
