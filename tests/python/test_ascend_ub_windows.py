"""Windows of UB tiles that do not sit on 32 B blocks (session 15's differential hunt, kernels written
from docs/language.md with odd offsets and widths). On Ascend every UB operand of a DataCopyPad or a
Vector instruction starts on a 32 B block, and a GM -> UB DataCopyPad writes each row up to the next
32 B boundary:

- a load into a window that ends inside a 32 B block of a wider tile (`T.copy(A[3:20, 5:70],
  t[0:17, 0:65])` of an 80-column float32 tile) overwrote columns 65..71 of every row with
  DataCopyPad's dummy bytes: a silent wrong answer after a `T.fill(t, 0)`. Now the load lands in a
  tile of the window's shape and a vector copy (exact masks) moves it into the window
  (convert_copies); a window of more non-unit dims (3-D, 4-D) is staged one 2-D slice at a time
  (a located error until session 16);
- a store from a window starting inside a block (`t[2:19, 7:40]`) and a map reading a column shift
  that is not a whole block (rope's `x[i, j + half]` with half = 65) were simulator reports
  (misaligned) at run time; now located errors at compile time naming the alternative.

Each working form runs on cpu and on ascend910b (simulator, checker on: no reports) against numpy."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import rope  # noqa: E402
from ascend_util import TARGET, assert_close, run_checked  # noqa: E402
from tw_test_util import by_size, marked_line  # noqa: E402

THIS_FILE = __file__


def where(marker):
    return marked_line(THIS_FILE, "@" + marker)[0]


def compile_error(kernel, out_idx=(-1,)):
    with pytest.raises(TilewrightError) as e:
        tw.compile(kernel, target=TARGET, out_idx=list(out_idx))
    return str(e.value)


def window_load(M, N, r0, r1, c0, c1, tm, tn, dtype):
    """B = a tm x tn tile filled with -1, then A[r0:r1, c0:c1] copied into its top-left corner."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((tm, tn), dtype)):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((tm, tn), dtype)
            T.fill(t, -1)
            T.copy(A[r0:r1, c0:c1], t[0:r1 - r0, 0:c1 - c0])  # @load
            T.copy(t, B)
    return main


def nd_window_load(lead, S, D, M, cols, dtype, four_d):
    """B = a (lead, M, 80) tile filled with 3, then X's (lead, M, cols) window at rows bs * M - 3
    (before row 0 in the first block, past the end in the last) copied into its columns 0..cols."""
    shape = (lead, S, 2, D) if four_d else (lead, S, D)

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), B: T.Tensor((T.ceildiv(S, M) * lead, M, 80), dtype)):
        with T.Kernel(T.ceildiv(S, M)) as bs:
            t = T.alloc_fragment((lead, M, 80), dtype)
            T.fill(t, 3)
            if four_d:  # a vLLM-like (blocks, tokens, heads, dim) cache: head 1 of each block
                T.copy(X[0:lead, bs * M - 3:bs * M - 3 + M, 1, 0:cols], t[:, :, 0:cols])  # @load3d
            else:
                T.copy(X[0:lead, bs * M - 3:bs * M - 3 + M, 0:cols], t[:, :, 0:cols])
            T.copy(t, B[bs * lead:(bs + 1) * lead, :, :])
    return main


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8"])
@pytest.mark.parametrize("four_d", [False, True])
def test_nd_load_windows_ending_inside_a_32_byte_block(four_d, dtype):
    # the window (2, 8, 65) ends inside a block of the 80-column tile: staged one 2-D slice at a
    # time (session 15 left it a located error); rows before 0 and past S read 0, columns 65.. keep 3
    lead, S, D, M, cols = 2, 19, 70, 8, 65
    shape = (lead, S, 2, D) if four_d else (lead, S, D)
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 113 + 1).astype(tw.testing.np_dtype(dtype))
    src = x[:, :, 1, :] if four_d else x
    nb = -(-S // M)
    ref = np.full((nb * lead, M, 80), 3.0)
    for bs in range(nb):
        for r in range(M):
            s = bs * M - 3 + r
            ref[bs * lead:(bs + 1) * lead, r, :cols] = src[:, s, :cols] if 0 <= s < S else 0
    k = nd_window_load(lead, S, D, M, cols, dtype, four_d)
    cpu = tw.compile(k, target="cpu", out_idx=[-1])(x)
    npu = run_checked(tw.compile(k, target=TARGET, out_idx=[-1]), x)
    assert_close(cpu, ref, (0, 0), "cpu")
    assert_close(npu, ref, (0, 0), "ascend")


STAGED = (40, 80, 3, 20, 5, 70, 32, 80)


# Every window in float32, float16 and int8; int32 (float32's size) and bfloat16 (float16's) in the
# staged one only (tw_test_util.by_size: the copies move bytes, so what a window checks depends on the
# element size; session 29, h-ci: 25 -> 17 cases)
@pytest.mark.parametrize("M,N,r0,r1,c0,c1,tm,tn,dtype", by_size([
    STAGED,                            # ends at column 65, inside a block: staged, columns 65.. kept
    (40, 80, 3, 20, 5, 69, 32, 80),    # ends at column 64: a block boundary in every dtype
    (40, 80, 3, 20, 5, 70, 17, 65),    # ends at the tile's last column (the rest is row padding)
    (33, 17, 1, 2, 3, 4, 1, 1),        # one element
    (33, 17, 7, 33, 1, 17, 26, 16),    # whole rows of the tile
], ["float32", "float16", "int32", "int8", "bfloat16"], {"int32": STAGED, "bfloat16": STAGED}))
def test_window_loads_that_keep_the_rest_of_the_tile(M, N, r0, r1, c0, c1, tm, tn, dtype):
    shape = (M, N, r0, r1, c0, c1, tm, tn)
    a = np.random.default_rng(0).integers(-50, 50, (M, N)).astype(tw.testing.np_dtype(dtype))
    ref = np.full((tm, tn), -1.0)
    ref[:r1 - r0, :c1 - c0] = a[r0:r1, c0:c1]
    k = window_load(*shape, dtype)
    cpu = tw.compile(k, target="cpu", out_idx=[-1])(a)
    npu = run_checked(tw.compile(k, target=TARGET, out_idx=[-1]), a)
    assert_close(cpu, ref, (0, 0), "cpu")
    assert_close(npu, ref, (0, 0), "ascend")


def test_window_loads_in_a_row_loop_and_with_a_run_time_row_count():
    @T.prim_func
    def main(A: T.Tensor((16, 80), "float16"), n: T.int32, B: T.Tensor((16, 96), "float16")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((16, 96), "float16")
            T.fill(t, 3)
            for r in T.serial(2):
                T.copy(A[r * 4:(r + 1) * 4, 1:66], t[r * 4:(r + 1) * 4, 0:65])
            cnt = T.min(8, n)
            T.copy(A[0:cnt, 0:65], t[8:16, 0:65])   # rows past cnt read as 0
            T.copy(t, B)
    a = np.random.default_rng(3).integers(-50, 50, (16, 80)).astype(np.float16)
    ref = np.full((16, 96), 3.0)
    ref[:8, :65] = a[:8, 1:66]
    ref[8:13, :65] = a[0:5, :65]
    ref[13:, :65] = 0
    cpu = tw.compile(main, target="cpu", out_idx=[-1])(a, 5)
    npu = run_checked(tw.compile(main, target=TARGET, out_idx=[-1]), a, 5)
    assert_close(cpu, ref, (0, 0), "cpu")
    assert_close(npu, ref, (0, 0), "ascend")


def window_store(tr, tc, h, w, dtype):
    """B[3:3 + h, 5:5 + w] = rows tr.., columns tc.. of a 32 x 80 tile of A (the rest of B kept)."""
    @T.prim_func
    def main(A: T.Tensor((32, 80), dtype), B: T.Tensor((40, 80), dtype)):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((32, 80), dtype)
            T.copy(A, t)
            T.copy(t[tr:tr + h, tc:tc + w], B[3:3 + h, 5:5 + w])  # @store
    return main


def test_store_from_a_window_starting_inside_a_32_byte_block_is_an_error():
    msg = compile_error(window_store(2, 7, 17, 33, "float32"), out_idx=())
    assert f":{where('store')}:" in msg, msg
    assert "copy UB->GM from t[2:+17, 7:+33]: the window starts 668 bytes into tile 't', not on a 32 B block" in msg


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_store_from_a_window_starting_on_a_block(dtype):
    a = np.random.default_rng(1).integers(-50, 50, (32, 80)).astype(dtype)
    tc = 8 if dtype == "float32" else 16
    ref = np.full((40, 80), 7.0)
    ref[3:20, 5:38] = a[2:19, tc:tc + 33]
    k = window_store(2, tc, 17, 33, dtype)
    b_cpu, b_npu = np.full((40, 80), 7, dtype), np.full((40, 80), 7, dtype)
    tw.compile(k, target="cpu", out_idx=[])(a, b_cpu)
    run_checked(tw.compile(k, target=TARGET, out_idx=[]), a, b_npu)
    assert_close(b_cpu, ref, (0, 0), "cpu")
    assert_close(b_npu, ref, (0, 0), "ascend")


def test_map_reading_a_column_shift_off_a_32_byte_block_is_an_error():
    # examples/rope.py's half-split form with head dim 130: x[i, j + 65] starts 260 B into a row
    with pytest.raises(TilewrightError) as e:
        rope.rope(33, 2, 130, 100, False, block_M=8, target=TARGET)
    msg = str(e.value)
    assert "rope.py:" in msg
    assert "which starts 4 bytes into a 32 B block of UB" in msg, msg
    assert "shift by a multiple of 8 columns (float32)" in msg


@pytest.mark.parametrize("dim", [16, 80])
def test_rope_half_split_on_a_block(dim):
    rng = np.random.default_rng(2)
    cos, sin = rope.tables(100, dim)
    pos = rng.integers(0, 100, size=17).astype(np.int32)
    x = rng.standard_normal((17, 3, dim)).astype(np.float32)
    ref = rope.reference(x, cos, sin, pos)
    cpu = rope.rope(17, 3, dim, 100, False, block_M=8, target="cpu")(x, cos, sin, pos)
    npu = run_checked(rope.rope(17, 3, dim, 100, False, block_M=8, target=TARGET), x, cos, sin, pos)
    assert_close(cpu, ref, (1e-5, 1e-5), "cpu")
    assert_close(npu, ref, (1e-5, 1e-5), "ascend")
