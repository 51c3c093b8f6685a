"""Kernels written from the docs alone that came out wrong (or crashed) on Ascend while the cpu
target was right (issue 10, "silent wrong answers and crashes"). Each runs on cpu and on
ascend910b (the 910B simulator with the checker on: zero reports) against a float64 numpy
reference, in fp32 and, where the kernel computes, fp16 and bf16, on odd shapes.

- Tails on the Vector side: a GM -> UB tile that crosses the end of a tensor reads zeros there
  (docs/language.md "Tails") even after its AIV ran an earlier block with data in the tile.
- The simulator models DataCopyPad's dummy bytes (up to the next 32 B of each row) as garbage,
  so a kernel that relies on them is caught; it reports negative sizes instead of crashing.
- A second serial loop reducing a wide tile used a scratch tile allocated in the first loop.
- Copies whose origin lies past the end of a tensor are clipped (no-ops), as on cpu.
- An empty dimension (M = 0) launches nothing.
- Errors for portable kernels speak of the portable construct and offer an alternative."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import layer_norm  # noqa: E402
from tilewright.testing import TOLERANCES, np_dtype, randn  # noqa: E402
from ascend_util import TARGET, assert_close, run_checked  # noqa: E402
from tw_test_util import marked_line  # noqa: E402

THIS_FILE = __file__


def where(marker):
    """Line number of the line of this file with the comment `# @marker`."""
    return marked_line(THIS_FILE, "@" + marker)[0]


def on_both(make, *inputs):
    """The kernel's outputs on cpu and on Ascend (simulator, checker on, no reports)."""
    return make("cpu")(*inputs), run_checked(make(TARGET), *inputs)


# ---- 1. tails on the Vector side -------------------------------------------------------------

def column_sums(M, N, bm, bn, dtype, target):
    """Y[by, bx, i] = sum of row i of the bm x bn tile (by, bx) of X: one block per tile."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((T.ceildiv(M, bm), T.ceildiv(N, bn), bm), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            t = T.alloc_fragment((bm, bn), dtype)
            f = T.alloc_fragment((bm, bn), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[by * bm, bx * bn], t)
            T.copy(t, f)
            T.reduce_sum(f, s, dim=1)
            T.copy(s, Y[by, bx, 0])
    return tw.compile(main, target=target, out_idx=[-1])


def column_sums_reference(x, bm, bn):
    M, N = x.shape
    xp = np.zeros((-(-M // bm) * bm, -(-N // bn) * bn))
    xp[:M, :N] = x.astype(np.float64)
    return xp.reshape(xp.shape[0] // bm, bm, xp.shape[1] // bn, bn).sum(axis=3).transpose(0, 2, 1)


def test_tail_tile_reads_zeros_after_an_earlier_block():
    # the kernel: all ones, 8 x 6428, one block per 64 columns: the last block sums
    # 28 columns (it summed 64: the UB still held the previous block's ones)
    x = np.ones((8, 6428), np.float32)
    cpu, npu = on_both(lambda tg: column_sums(8, 6428, 8, 64, "float32", tg), x)
    ref = column_sums_reference(x, 8, 64)
    assert ref[0, -1, 0] == 28
    assert np.array_equal(cpu, ref) and np.array_equal(npu, ref)


@pytest.mark.parametrize("M,N,bm,bn,dtype", [
    (37, 301, 8, 64, "float32"),    # tails in both dims, rows not whole 32 B
    (21, 300, 16, 128, "float16"),
    (19, 150, 8, 64, "bfloat16"),
    (1, 5, 8, 64, "float32"),       # 1-row tensor, tile larger than the tensor
    (70, 1, 16, 8, "float32"),      # one column
])
def test_tail_tiles_in_both_dims(M, N, bm, bn, dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((M, N)) + 2.0).astype(np_dtype(dtype))
    cpu, npu = on_both(lambda tg: column_sums(M, N, bm, bn, dtype, tg), x)
    ref = column_sums_reference(x, bm, bn)
    tol = (1e-4 * bn, 1e-5) if dtype == "float32" else (2e-3 * bn, 1e-3)
    assert_close(cpu, ref, tol, "cpu")
    assert_close(npu, ref, tol, "ascend")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_layer_norm_block_64_on_270x270(dtype):
    # block_M = 64 leaves 14 valid rows in the last block: its mean and variance used the
    # previous block's rows (off by 0.4)
    rng = np.random.default_rng(0)
    x = randn((270, 270), dtype, seed=rng, scale=2.0)
    w = randn((270,), dtype, seed=rng)
    b = randn((270,), dtype, seed=rng)
    ref = layer_norm.reference(x, w, b)
    cpu, npu = on_both(lambda tg: layer_norm.layer_norm(270, block_M=64, dtype=dtype, target=tg), x, w, b)
    assert_close(cpu, ref, TOLERANCES[dtype], f"cpu layer_norm {dtype}")
    assert_close(npu, ref, TOLERANCES[dtype], f"ascend layer_norm {dtype}")


def test_tail_tile_in_a_loop_of_one_block():
    # the same AIV runs the loop: the second iteration's short tile must not keep the first's data
    M, N, bn = 4, 200, 128

    def make(target):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(1) as bx:
                t = T.alloc_fragment((M, bn), "float32")
                s = T.alloc_fragment((M,), "float32")
                acc = T.alloc_fragment((M,), "float32")
                T.fill(acc, 0.0)
                for k in T.serial(T.ceildiv(N, bn)):
                    T.copy(X[0, k * bn], t)
                    T.reduce_sum(t, s, dim=1)
                    for i in T.Parallel(M):
                        acc[i] = acc[i] + s[i]
                T.copy(acc, Y[0])
        return tw.compile(main, target=target, out_idx=[-1])

    x = np.random.default_rng(4).standard_normal((M, N)).astype(np.float32) + 1
    cpu, npu = on_both(make, x)
    ref = x.astype(np.float64).sum(axis=1)
    assert_close(cpu, ref, (1e-4, 1e-5), "cpu")
    assert_close(npu, ref, (1e-4, 1e-5), "ascend")


def expert_block_column_sums(M, N, bm):
    """Expert mode: Y[t, j] = sum over the rows of row block t of X[:, j] (bm rows a block, the
    last block short)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((T.ceildiv(M, bm), N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_UB((bm, N), "float32")
            s = T.alloc_UB((N,), "float32")
            with T.Scope("V"):
                T.set_flag("MTE3", "V", 0)
                for t in T.serial(T.ceildiv(M, bm)):
                    T.wait_flag("MTE3", "V", 0)
                    T.fill(x, 1.0)  # a short copy must not leave these ones behind
                    T.set_flag("V", "MTE2", 0)
                    T.wait_flag("V", "MTE2", 0)
                    T.copy(X[t * bm, 0], x)
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.reduce_sum(x, s, dim=0)
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(s, Y[t, 0])
                    T.set_flag("MTE3", "V", 0)
                T.wait_flag("MTE3", "V", 0)
    return tw.compile(main, target=TARGET, out_idx=[-1])


def test_expert_tail_rows_read_zeros():
    # 21 rows of 16 in blocks of 8: the copy of the last block reads 5 rows; the other 3 are
    # zeros (as on cpu), not the ones T.fill left there
    x = np.random.default_rng(7).standard_normal((21, 16)).astype(np.float32)
    k = expert_block_column_sums(21, 16, 8)
    assert "PipeBarrier<ALL>" in k.get_source("ascend_program")
    y = run_checked(k, x)
    xp = np.zeros((24, 16))
    xp[:21] = x
    assert_close(y, xp.reshape(3, 8, 16).sum(axis=1), (1e-5, 1e-5), "expert column sums")


def test_datacopypad_dummy_bytes_in_a_window_are_an_error():
    # rows of 3 floats (12 B) copied into the first 3 columns of an 8-wide UB tile (no tail):
    # DataCopyPad writes the rest of each 32 B block with unspecified bytes (the simulator writes
    # garbage), so summing the whole row (which assumes the T.fill zeros survived) would be wrong:
    # an error at the copy since session 21 (hunt9b F7; it was a silent wrong answer)
    def build():
        @T.prim_func
        def main(X: T.Tensor((8, 3), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_UB((8, 8), "float32")
                s = T.alloc_UB((8,), "float32")
                with T.Scope("V"):
                    T.fill(x, 0.0)
                    T.set_flag("V", "MTE2", 0)
                    T.wait_flag("V", "MTE2", 0)
                    T.copy(X[0:8, 0:3], x[:, 0:3])  # @DUMMY_WINDOW
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.reduce_sum(x, s, dim=1)
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(s, Y[0])
        return main

    with pytest.raises(TilewrightError) as e:
        tw.compile(build(), target=TARGET, out_idx=[-1])
    assert e.value.file == __file__ and e.value.line == marked_line(__file__, "@DUMMY_WINDOW")[0], e.value
    assert "columns 3:8 would hold garbage" in e.value.message, e.value.message


# ---- 3. two serial loops with a wide row reduction ------------------------------------------

def two_loops(target):
    @T.prim_func
    def main(X: T.Tensor((8, 1024), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8, 256), "float32")
            s = T.alloc_fragment((8,), "float32")
            a = T.alloc_fragment((8,), "float32")
            T.fill(a, 0.0)
            for k in range(2):
                T.copy(X[0, k * 256], t)
                T.reduce_sum(t, s, dim=1)
                for i in T.Parallel(8):
                    a[i] = a[i] + s[i]
            for k in range(2):
                T.copy(X[0, 512 + k * 256], t)
                T.reduce_sum(t, s, dim=1)
                for i in T.Parallel(8):
                    a[i] = a[i] + s[i]
            T.copy(a, Y[0])
    return tw.compile(main, target=target, out_idx=[-1])


def test_two_serial_loops_with_wide_reductions():
    x = np.random.default_rng(5).standard_normal((8, 1024)).astype(np.float32)
    cpu, npu = on_both(two_loops, x)
    ref = x.astype(np.float64).sum(axis=1)
    assert_close(cpu, ref, (1e-4, 1e-5), "cpu")
    assert_close(npu, ref, (1e-4, 1e-5), "ascend")


# ---- 4. copies whose origin lies past the end of a tensor -----------------------------------

def shifted_copy(col_in, col_out, target):
    """Y[rows of block bx, col_out:] = X[rows of block bx, col_in:] (8 x 64 tiles, 16 x 64 tensors);
    Y starts as the caller's array (not an output)."""
    @T.prim_func
    def main(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(2) as bx:
            t = T.alloc_fragment((8, 64), "float32")
            T.fill(t, 7.0)
            T.copy(X[bx * 8, col_in], t)
            T.copy(t, Y[bx * 8, col_out])
    return tw.compile(main, target=target)


@pytest.mark.parametrize("col_in,col_out", [(0, 65), (100, 0), (64, 0), (40, 0), (0, 40), (0, 64)])
def test_copies_past_the_end_are_clipped(col_in, col_out):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    y0 = rng.standard_normal((16, 64)).astype(np.float32)
    ref = y0.copy()
    tile = np.zeros((16, 64), np.float32)           # the tile after the load: zeros outside X
    n_in = max(0, min(64, 64 - col_in))
    tile[:, :n_in] = x[:, col_in:col_in + n_in]
    n_out = max(0, min(64, 64 - col_out))
    ref[:, col_out:col_out + n_out] = tile[:, :n_out]
    outs = []
    for target in ("cpu", TARGET):
        y = y0.copy()
        k = shifted_copy(col_in, col_out, target)
        if target == "cpu":
            k(x, y)
        else:
            prof = k.profile(x, y)                  # writes y in place, like the cpu call
            assert prof["reports"] == [], "\n".join(prof["reports"])
        outs.append(y)
    for y in outs:
        assert np.array_equal(y, ref)


# ---- 5. an empty dimension -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_empty_rows_launch_nothing(dtype):
    x = np.zeros((0, 270), np_dtype(dtype))
    w = np.ones((270,), np_dtype(dtype))
    for target in ("cpu", TARGET):
        y = layer_norm.layer_norm(270, dtype=dtype, target=target)(x, w, w)
        assert y.shape == (0, 270)
    prof = layer_norm.layer_norm(270, dtype=dtype, target=TARGET).profile(x, w, w)
    assert prof["reports"] == [] and prof["instructions"] == 0


# ---- 6. errors of portable kernels -----------------------------------------------------------

def compile_error(kernel):
    with pytest.raises(TilewrightError) as e:
        tw.compile(kernel, target=TARGET, out_idx=[-1])
    return str(e.value)


def test_element_store_runs_on_the_scalar_unit():
    # once an error naming the vector alternatives (below); now SetValue on the Vector core's scalar
    # unit (tests/python/test_ub_scalar.py has the rest)
    def make(target):
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
            with T.Kernel(1) as bx:
                t = T.alloc_fragment((8, 64), "float32")
                T.copy(X[0, 0], t)
                t[3, 5] = 1.0
                T.copy(t, Y[0, 0])
        return tw.compile(main, target=target, out_idx=[-1])
    x = np.full((8, 64), 5.0, np.float32)
    ref = x.copy()
    ref[3, 5] = 1.0
    cpu, npu = on_both(make, x)
    assert np.array_equal(cpu, ref) and np.array_equal(npu, ref)


def test_the_suggested_alternatives_to_an_element_store_work():
    def make(target):
        @T.prim_func
        def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
            with T.Kernel(1) as bx:
                t = T.alloc_fragment((8, 64), "float32")
                T.copy(X[0, 0], t)
                T.fill(t[2:3, :], 1.0)
                for i, j in T.Parallel(8, 64):
                    t[i, j] = T.if_then_else(i < 6, t[i, j], 3.0)
                T.copy(t, Y[0, 0])
        return tw.compile(main, target=target, out_idx=[-1])
    x = np.full((8, 64), 5.0, np.float32)
    ref = x.copy()
    ref[2] = 1.0
    ref[6:] = 3.0
    cpu, npu = on_both(make, x)
    assert np.array_equal(cpu, ref) and np.array_equal(npu, ref)


@pytest.mark.parametrize("form", ["let", "if"])
def test_scalar_read_of_a_tile_runs_on_the_scalar_unit(form):
    # once an error naming the GM tensor; now GetValue on the Vector core's scalar unit
    def make(target):
        if form == "let":
            @T.prim_func
            def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
                with T.Kernel(1) as bx:
                    t = T.alloc_fragment((8, 64), "float32")
                    T.copy(X[0, 0], t)
                    s = t[0, 0]
                    for i, j in T.Parallel(8, 64):
                        t[i, j] = t[i, j] * s
                    T.copy(t, Y[0, 0])
        else:
            @T.prim_func
            def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
                with T.Kernel(1) as bx:
                    t = T.alloc_fragment((8, 64), "float32")
                    T.copy(X[0, 0], t)
                    if t[0, 0] > 0:
                        T.fill(t, 1.0)
                    T.copy(t, Y[0, 0])
        return tw.compile(main, target=target, out_idx=[-1])
    for sign in (1.0, -1.0):
        x = sign * np.random.default_rng(7).uniform(0.5, 2.0, (8, 64)).astype(np.float32)
        ref = x.astype(np.float64) * x[0, 0] if form == "let" else (np.ones_like(x) if sign > 0 else x)
        cpu, npu = on_both(make, x)
        np.testing.assert_allclose(cpu, ref, rtol=1e-6)
        np.testing.assert_allclose(npu, ref, rtol=1e-6)


# ---- 2. a column of a tensor and a 1-D tile --------------------------------------------------

def test_column_into_a_1d_tile_is_a_clear_error():
    # it was lowered with the tile size as UB row stride: out-of-bounds UB writes, garbage
    @T.prim_func
    def main(X: T.Tensor((40, 3), "float32"), Y: T.Tensor((40, 3), "float32")):
        with T.Kernel(3) as bx:
            t = T.alloc_fragment((40,), "float32")
            T.copy(X[0:40, bx], t)  # @column
            for i in T.Parallel(40):
                t[i] = t[i] + 1.0
            T.copy(t, Y[0:40, bx])
    msg = compile_error(main)
    assert f":{where('column')}:" in msg
    assert "a column of a tensor cannot fill or come from a 1-D tile" in msg
    assert "declare the tile as a column, shape (40, 1)" in msg


def test_row_into_a_column_tile_is_a_clear_error():
    @T.prim_func
    def main(X: T.Tensor((40,), "float32"), Y: T.Tensor((40,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((40, 1), "float32")
            T.copy(X[0:40], t)  # @row
            T.copy(t, Y[0:40])
    msg = compile_error(main)
    assert f":{where('row')}:" in msg
    assert "a row of a tensor cannot fill or come from a column tile" in msg


def test_the_column_tile_alternative_works():
    def make(target):
        @T.prim_func
        def main(X: T.Tensor((37, 3), "float32"), Y: T.Tensor((37, 3), "float32")):
            with T.Kernel(3) as bx:
                t = T.alloc_fragment((40, 1), "float32")
                T.copy(X[0:40, bx:bx + 1], t)   # 3 rows past the end: zeros
                for i, j in T.Parallel(40, 1):
                    t[i, j] = t[i, j] * 2.0 + 1.0
                T.copy(t, Y[0:40, bx:bx + 1])
        return tw.compile(main, target=target, out_idx=[-1])
    x = np.random.default_rng(8).standard_normal((37, 3)).astype(np.float32)
    cpu, npu = on_both(make, x)
    ref = x.astype(np.float64) * 2 + 1
    assert_close(cpu, ref, (1e-6, 1e-6), "cpu")
    assert_close(npu, ref, (1e-6, 1e-6), "ascend")


def test_fill_of_a_window_off_a_32_byte_block_is_a_clear_error():
    # it compiled and the checker reported a misaligned Duplicate at run time
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8, 64), "float32")
            T.copy(X[0, 0], t)
            T.fill(t[3:4, 5:6], 1.0)  # @fill
            T.copy(t, Y[0, 0])
    msg = compile_error(main)
    assert f":{where('fill')}:" in msg
    assert "T.fill of t[3:+1, 5:+1]: the window starts 788 bytes into tile 't', not on a 32 B block" in msg
    assert "a multiple of 8 (float32)" in msg
