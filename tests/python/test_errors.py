"""Negative tests: every user error is a TilewrightError that says what is wrong (message), where
(file, line, column of the user's kernel source, with the source line and a caret in str(e)) and,
where there is one, how to fix it (hint).

Expected lines are found with marker comments (``# @NAME`` at the end of a line of this file), so
editing the file does not break the tests."""
import ctypes

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

THIS_FILE = __file__

from tw_test_util import marked_line, unchecked_code_only  # noqa: E402


def where(marker):
    """(line number, source line) of the line of this file with the comment `# marker`."""
    return marked_line(THIS_FILE, marker)


def check(exc_info, message, marker, caret_at=None, hint=None):
    """The error's message contains `message`; it points at the line marked `marker` of this file,
    at the column where `caret_at` starts (if given); str(e) shows that line and a caret under it."""
    e = exc_info.value
    assert isinstance(e, TilewrightError)
    assert message in e.message, e.message
    line, src = where(marker)
    assert e.file == THIS_FILE, str(e)
    assert e.line == line, str(e)
    if caret_at is not None:
        assert e.col == src.index(caret_at) + 1, str(e)
    lines = str(e).splitlines()
    col = f":{e.col}" if e.col > 0 else ""       # col 0: known line, unknown column
    assert lines[0].startswith(f"{THIS_FILE}:{line}{col}: error: "), lines[0]
    assert message in lines[0]
    assert lines[1] == "    " + src
    assert lines[2] == "    " + " " * max(e.col - 1, 0) + "^"
    if hint is not None:
        assert hint in e.hint, e.hint
        assert f"  hint: {e.hint}" in str(e)
    return e


# ---------------------------------------------------------------------------------------------
# Argument errors at call time: they point at the kernel definition (the `def` line)

M = T.symbolic("M")


@tw.jit(out_idx=[-1])
def add_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), s: T.int32, C: T.Tensor((M, N), "float32")):  # @KDEF
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            for i, j in T.Parallel(8, N):
                C[bx * 8 + i, j] = A[bx * 8 + i, j] + B[bx * 8 + i, j] * T.cast(s, "float32")

    return main


@pytest.fixture(scope="module")
def kern():
    return add_kernel(4)


A = np.ones((16, 4), np.float32)


def call_error(kern, *args):
    """Argument errors point at the call (the mistake), not at the kernel's definition."""
    with pytest.raises(TilewrightError) as ei:
        kern(*args)  # @CALL
    assert "kernel 'main' is defined at " in ei.value.message
    return ei


def test_call_sanity(kern):
    np.testing.assert_array_equal(kern(A, A, 2), np.full((16, 4), 3, np.float32))


def test_wrong_input_shape(kern):
    ei = call_error(kern, A, np.ones((16, 5), np.float32), 1)
    check(ei, "argument 'B' of kernel 'main' must have shape (M, 4), got (16, 5) (dimension 1 should be 4)",
          "@CALL")


def test_wrong_rank(kern):
    ei = call_error(kern, A.reshape(64), A, 1)
    check(ei, "argument 'A' of kernel 'main' must have 2 dimension(s) (M, 4), got shape (64,)", "@CALL")


def test_wrong_dtype(kern):
    ei = call_error(kern, A, A.astype(np.float64), 1)
    check(ei, "argument 'B' of kernel 'main' must have dtype float32, got float64", "@CALL",
          hint='astype("float32")')
    ei = call_error(kern, A.astype(ml_dtypes.bfloat16), A, 1)
    check(ei, "argument 'A' of kernel 'main' must have dtype float32, got bfloat16", "@CALL")


def test_unsupported_array_dtype(kern):
    ei = call_error(kern, A.astype(np.complex64), A, 1)
    check(ei, "argument 0 ('A') of kernel 'main': unsupported array dtype", "@CALL", hint="supported: float16")


def test_non_contiguous_input(kern):
    # a Kernel copies a strided numpy view (docs/workflow.md); the runtime itself still rejects one
    wide = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    np.testing.assert_array_equal(kern(A, wide[:, ::2], 1), A + wide[:, ::2])
    with pytest.raises(TilewrightError) as ei:  # the runtime's own check, located at the kernel's def
        kern._exe(A, wide[:, ::2], 1)
    check(ei, "argument 'B' of kernel 'main' is not contiguous (strides (8, 2) elements for shape (16, 4))",
          "@KDEF", hint="ascontiguousarray")


def test_wrong_number_of_arguments(kern):
    ei = call_error(kern, A)
    check(ei, "kernel 'main' takes 3 argument(s) (A, B, s), got 1", "@CALL",
          hint="outputs are allocated and returned")
    ei = call_error(kern, A, A, 1, np.zeros((16, 4), np.float32))   # passing the output too
    check(ei, "kernel 'main' takes 3 argument(s) (A, B, s), got 4", "@CALL")


def test_scalar_passed_for_tensor(kern):
    ei = call_error(kern, A, 3.0, 1)
    check(ei, "argument 'B' of kernel 'main' is a tensor float32(M, 4), got a scalar", "@CALL", hint="numpy array")


def test_array_or_float_passed_for_int_scalar(kern):
    ei = call_error(kern, A, A, A)
    check(ei, "argument 's' of kernel 'main' is a scalar of type int32, got an array", "@CALL")
    ei = call_error(kern, A, A, 2.5)
    check(ei, "argument 's' of kernel 'main' is an integer (int32), got a float", "@CALL", hint="pass an int")


def test_shape_variables_disagree(kern):
    ei = call_error(kern, A, np.ones((8, 4), np.float32), 1)
    e = check(ei, "argument 'B' of kernel 'main' has shape (8, 4), but dimension 0 is 'M', already bound to 16 "
                  "by an earlier argument", "@CALL")
    assert "'M'" in e.hint


def test_object_without_dlpack(kern):
    ei = call_error(kern, A, object(), 1)
    check(ei, "argument 1 ('B') of kernel 'main': cannot use an object of type 'object' as a kernel argument",
          "@CALL", hint="__dlpack__")
    ei = call_error(kern, [[1.0] * 4] * 16, A, 1)     # a nested list is not an array either
    check(ei, "cannot use an object of type 'list'", "@CALL")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class FakeDeviceArray:
    """A float32 array that claims (in __dlpack_device__ *and* in its DLPack capsule) to live on
    `device` — (2, 0) is CUDA device 0. Its data pointer is host memory, so nothing crashes if a
    consumer wrongly accepts it."""

    def __init__(self, arr, device):
        assert arr.dtype == np.float32 and arr.flags.c_contiguous
        self.arr = arr
        self.device = device
        self._shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        self._mt = _DLManagedTensor()
        t = self._mt.dl_tensor
        t.data = arr.ctypes.data
        t.device = _DLDevice(*device)
        t.ndim = arr.ndim
        t.dtype = _DLDataType(2, 32, 1)  # kDLFloat, 32 bits
        t.shape = self._shape
        t.strides = None
        t.byte_offset = 0
        self._mt.deleter = None

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._mt), b"dltensor", None)


def test_device_mismatch(kern):
    # control: the same hand-made capsule on the CPU (device type 1) is accepted
    out = kern(FakeDeviceArray(A, (1, 0)), A, 1)
    np.testing.assert_array_equal(out, np.full((16, 4), 2, np.float32))
    ei = call_error(kern, FakeDeviceArray(A, (2, 0)), A, 1)
    check(ei, "argument 'A' of kernel 'main' is on device cuda:0 (DLPack device type 2), but target 'cpu' runs on host memory",
          "@CALL", hint="move the array to the CPU")
    # Note: an object whose __dlpack_device__ says (2, 0) but whose capsule (numpy's) says CPU is
    # accepted: the capsule is what the runtime reads.


def test_int_scalar_out_of_range(kern):
    ei = call_error(kern, A, A, 2 ** 40)
    check(ei, "argument 's' of kernel 'main'", "@CALL")


def test_numpy_scalar_accepted_for_scalar_param(kern):
    np.testing.assert_array_equal(kern(A, A, np.int32(2)), np.full((16, 4), 3, np.float32))


# ---------------------------------------------------------------------------------------------
# Compile-time errors: target


def make_small():
    @T.prim_func
    def small(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):  # @SMALL
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i]  # @MAP
    return small


def test_unknown_target_lists_valid_targets():
    with pytest.raises(TilewrightError) as ei:
        tw.compile(make_small(), target="gpu", out_idx=[-1])  # @GPU
    e = ei.value
    assert e.message == "unknown target 'gpu'; did you mean 'cpu'?"
    for name in ("cpu", "ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4"):
        assert name in e.hint
    assert "ascend910b -> ascend910b2" in e.hint
    # a target name is not part of the kernel source: the error is at the call that names it (api34 F3;
    # it had no location before)
    assert (e.file, e.line) == (THIS_FILE, where("@GPU")[0]) and "tw.compile(make_small()" in e.source_line


@pytest.mark.parametrize("target", ["ascend910b1", "ascend910b", "ascend910b4"])
def test_portable_kernel_on_ascend_element_map_on_global(target):
    """A portable kernel compiles for Ascend: an element map written straight into a global tensor
    runs there (the automatic pipeline stages it through UB tiles, stage_global_maps; it was an
    error at the line until h-gmmap33)."""
    a = np.arange(8, dtype=np.float32)
    prof = tw.compile(make_small(), target=target, out_idx=[-1]).profile(a)
    assert prof["reports"] == [], prof["reports"]
    np.testing.assert_array_equal(prof.outputs, a)


# ---------------------------------------------------------------------------------------------
# Compile-time errors: tile ops (reported by the C++ verifier, located at the op)


def test_copy_region_into_transposed_tile():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((256, 256), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64, 128), "float32")
                T.copy(A[0:128, 0:64], s)  # @COPY
        tw.compile(k)
    check(ei, "copy shape mismatch: A[0:+128, 0:+64] is 128x64 but s[0:+64, 0:+128] is 64x128", "@COPY", "T.copy",
          hint="same shape")


def test_gemm_inconsistent_k():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((64, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # @GEMMK
        tw.compile(k)
    check(ei, "gemm shape mismatch: K differs (32 vs 64)", "@GEMMK", "T.gemm", hint="trans_a/trans_b")


def test_gemm_transpose_makes_k_inconsistent():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 32), "float32")
                b = T.alloc_shared((32, 64), "float32")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c, transpose_B=True)  # @GEMMT
        tw.compile(k)
    check(ei, "gemm shape mismatch", "@GEMMT", "T.gemm")


@pytest.mark.parametrize("acc", ["float16", "int32"])
def test_gemm_accumulator_wrong_dtype(acc):
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 64), "float16")
                b = T.alloc_shared((64, 64), "float16")
                c = T.alloc_fragment((64, 64), acc)
                T.gemm(a, b, c)  # @GEMMACC
        tw.compile(k)
    check(ei, f"gemm: accumulator 'c' is {acc} but float16 inputs accumulate in float32", "@GEMMACC", "T.gemm",
          hint="allocate C as float32")


def test_reduce_wrong_destination_shape():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((64, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 32), "float32")
                d = T.alloc_fragment((32,), "float32")
                T.reduce_sum(a, d, dim=1)  # @REDSHAPE
        tw.compile(k)
    check(ei, "T.reduce_sum: 'd' has shape (32,) but reducing 'a' (64, 32) over dim 1 gives (64,)", "@REDSHAPE",
          "T.reduce_sum")


def test_reduce_dim_out_of_range():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((64, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 32), "float32")
                d = T.alloc_fragment((64,), "float32")
                T.reduce_max(a, d, dim=2)  # @REDDIM
    check(ei, "T.reduce_max: dim 2 is out of range for the 2-D buffer 'a'", "@REDDIM", "2)")


def test_grid_loop_writes_overlapping_tiles():
    N, tile = 256, 128

    def overlapping(A: tw.Tensor((N,), "float32")):
        out = tw.output((N,), dtype="float32")
        for i in range(N // 64):  # @OVERLAP
            t = tw.load(A, (i * 64,), (tile,))
            tw.store(out, (i * 64,), t)
        return out
    with pytest.raises(TilewrightError) as ei:
        tw.compile(overlapping)
    check(ei, "loop 'i' cannot be a grid loop: iterations write overlapping tiles of 'out' (start i*64 advances by 64 "
              "but the tile is 128 elements long)", "@OVERLAP", "for i", hint="tile stride equal to the tile size")


def test_out_of_bounds_slice_of_tile_buffer():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((256, 256), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 32), "float32")
                T.copy(A[0, 0], a[0:64, 16:48])  # @OOBSLICE
        tw.compile(k)
    check(ei, "copy: region a[0:+64, 16:+32] is out of bounds of fragment buffer 'a' (64x32): dim 1 covers 16..48 "
              "but the size is 32", "@OOBSLICE", "T.copy", hint="only global buffers may be accessed partially")


def test_out_of_bounds_constant_index_of_tile_buffer():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((256, 256), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 32), "float32")
                for i in T.Parallel(64):
                    a[i, 40] = 1.0  # @OOBIDX
        tw.compile(k)
    check(ei, "out of bounds", "@OOBIDX")


# ---------------------------------------------------------------------------------------------
# Compile-time errors: the front end (raised when @T.prim_func parses the function)


def test_unsupported_syntax_while():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                i = 0
                while i < 4:  # @WHILE
                    A[i] = 0
    check(ei, "unsupported statement 'while' in a kernel", "@WHILE", "while", hint="for loop")


def test_unknown_T_function():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(16):
                    A[i] = T.softplus(A[i])  # @UNKNOWNFN
    check(ei, "unknown function T.softplus", "@UNKNOWNFN", "T.softplus")


def test_non_constant_tile_shape():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32"), n: T.int32):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((n, 16), "float32")  # @NONCONST
    e = check(ei, "must be a compile-time constant", "@NONCONST", "n, 16")
    assert e.hint


def test_assign_to_loop_variable():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(16):
                    i = i + 1  # @LOOPVAR
                    A[i] = 0
    check(ei, "cannot assign to loop variable 'i'", "@LOOPVAR", "i = i + 1")


def test_assign_to_block_index():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(4) as bx:
                bx = 2  # @BLOCKVAR
                A[bx] = 0
    check(ei, "cannot assign to", "@BLOCKVAR", "bx = 2")


def test_unknown_dtype():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float33")):  # @DTYPE
            with T.Kernel(1) as bx:
                A[0] = 1
    check(ei, "unknown dtype 'float33'", "@DTYPE", hint="float16")


def test_grid_and_loop_arity():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(2, 2) as bx:  # @GRIDN
                A[0] = 1
    check(ei, "the grid has 2 dimension(s) but 1 block index name(s)", "@GRIDN", "bx")
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k2(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                for i, j in T.Parallel(16):  # @PARN
                    A[i] = 1
    check(ei, "the loop has 1 dimension(s) but 2 loop variable(s)", "@PARN", "i, j")


def test_float_floordiv_is_rejected():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(16):
                    A[i] = A[i] // 2.0  # @FDIV
        tw.compile(k)
    check(ei, "floordiv needs integer operands, got float32", "@FDIV", "A[i] // 2.0")


def test_T_copy_outside_kernel():
    with pytest.raises(TilewrightError) as ei:
        T.copy(np.zeros(4), np.zeros(4))  # @OUTSIDE
    check(ei, "T.copy can only be used inside a kernel", "@OUTSIDE", hint="@T.prim_func")
    with pytest.raises(TilewrightError) as ei:
        T.exp(1.0)  # @OUTSIDE2
    check(ei, "T.exp can only be used inside a kernel", "@OUTSIDE2")


# ---------------------------------------------------------------------------------------------
# API misuse without a source location


def test_api_misuse_messages():
    with pytest.raises(TilewrightError) as ei:
        make_small()(np.zeros(8, np.float32))
    assert "prim_func 'small' cannot be called directly" in ei.value.message and "tw.compile" in ei.value.hint
    with pytest.raises(TilewrightError) as ei:
        tw.compile(make_small(), out_idx=[5])
    assert "out_idx 5 is not a parameter index of 'small' (2 parameters)" in ei.value.message
    assert "[-2, 2)" in ei.value.hint

    @tw.jit
    def not_a_prim(n):
        return n
    with pytest.raises(TilewrightError, match="must return a @T.prim_func or a function written with tile loops, got 3"):
        not_a_prim(3)
    with pytest.raises(TilewrightError) as ei:
        tw.compile(42)
    assert ei.value.message == "cannot compile 42" and "@T.prim_func" in ei.value.hint


@unchecked_code_only
def test_tiles_too_big_for_a_block():
    """Tiles live on the stack of the thread running a block: over 48 MiB is a compile-time error
    naming the allocation that goes over."""
    @T.prim_func
    def huge(A: T.Tensor((4096, 4096), "float32"), B: T.Tensor((4096, 4096), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((4096, 4096), "float32")  # @HUGE
            T.copy(A, t)
            T.copy(t, B)
    with pytest.raises(TilewrightError) as ei:
        tw.compile(huge, out_idx=[-1])
    check(ei, "need 64 MiB per block, more than the cpu target's 48 MiB", "@HUGE", "T.alloc_fragment",
          hint="smaller block sizes")
