"""Inputs that once crashed or hung the process (signals, host-compiler hangs, internal
exceptions) are Tilewright errors at the user's line, or have a defined result."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError, _C

from tw_test_util import assert_located, marked_line

THIS_FILE = __file__
PY = sys.executable


def line_of(marker):
    return marked_line(THIS_FILE, marker)[0]


def at(exc_info, marker, message):
    assert_located(exc_info, THIS_FILE, marker, message)


# ---------------------------------------------------------------------------------------------
# Integer division: constants are compile-time errors, run-time zeros have a defined result


def test_constant_division_by_zero_is_a_compile_error():
    @T.prim_func
    def div0(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i] // (bx - bx + 0)  # @div0
    with pytest.raises(TilewrightError) as ei:
        tw.compile(div0, out_idx=[-1])
    at(ei, "@div0", "integer division by zero")


def test_constant_folder_does_not_trap_on_int64_min_over_minus_one():
    @T.prim_func
    def fold(A: T.Tensor((8,), "int64"), B: T.Tensor((8,), "int64")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i] + (bx - bx + (-9223372036854775807 - 1)) // -1
    k = tw.compile(fold, out_idx=[-1])  # once SIGFPE in ir::as_const_int
    a = np.zeros(8, np.int64)
    assert (k(a) == np.iinfo(np.int64).min).all()  # wraps, documented


def test_runtime_integer_division_by_zero_is_defined():
    @T.prim_func
    def divmod_(A: T.Tensor((6,), "int64"), D: T.Tensor((6,), "int64"),
                Q: T.Tensor((6,), "int64"), R: T.Tensor((6,), "int64")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(6):
                Q[i] = A[i] // D[i]
                R[i] = A[i] % D[i]
    k = tw.compile(divmod_, out_idx=[2, 3])
    mn = np.iinfo(np.int64).min
    a = np.array([7, -7, 5, mn, mn, 9], np.int64)
    d = np.array([0, 0, 2, -1, 0, -2], np.int64)
    q, r = k(a, d)
    assert q.tolist() == [0, 0, 2, mn, 0, -5]
    assert r.tolist() == [7, -7, 1, 0, mn, -1]


def test_runtime_division_by_zero_shape_variable():
    n = T.symbolic("n")

    @T.prim_func
    def by_n(A: T.Tensor((n,), "int32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = (i + 3) // n + (i + 3) % n
    k = tw.compile(by_n, out_idx=[-1])
    assert k(np.zeros(0, np.int32)).tolist() == [3, 4, 5, 6]  # x // 0 == 0, x % 0 == x


# ---------------------------------------------------------------------------------------------
# Out-of-bounds accesses


def test_provably_out_of_bounds_store_is_a_compile_error():
    @T.prim_func
    def oob(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(4) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i + 1048576] = A[bx * 256 + i]  # @oob
    with pytest.raises(TilewrightError) as ei:
        tw.compile(oob, out_idx=[-1])
    at(ei, "@oob", "outside dimension 0 of size 1024")


def test_swapped_parallel_extents_over_a_tile_is_a_compile_error():
    @T.prim_func
    def swapped(A: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((32, 64), "float32")
            T.copy(A, t)
            for i, j in T.Parallel(64, 32):
                t[i, j] = t[i, j] * 2.0  # @swapped
            T.copy(t, B)
    with pytest.raises(TilewrightError) as ei:
        tw.compile(swapped, out_idx=[-1])
    at(ei, "@swapped", "of size 32")


def test_guarded_accesses_are_not_reported():
    @T.prim_func
    def guarded(A: T.Tensor((100,), "float32"), B: T.Tensor((100,), "float32")):
        with T.Kernel(4) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < 100:
                    B[bx * 32 + i] = A[bx * 32 + i] + 1.0
    k = tw.compile(guarded, out_idx=[-1])
    assert np.array_equal(k(np.arange(100, dtype=np.float32)), np.arange(100, dtype=np.float32) + 1)


BOUNDS_CHILD = textwrap.dedent("""
    import numpy as np
    import tilewright as tw
    import tilewright.language as T
    n = T.symbolic("n")

    @T.prim_func
    def runtime_oob(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                B[i] = A[i]  # @runtime_oob
    k = tw.compile(runtime_oob, out_idx=[-1])
    try:
        k(np.zeros(16, np.float32))
    except tw.TilewrightError as e:
        print("ERR", e.file, e.line, e.message)
    else:
        print("NOERROR")
""")


def _checked_child(tmp_path, name, source):
    """(script path, last line of stdout) of `source` run in a child with TW_BOUNDS_CHECK=1."""
    script = tmp_path / name
    script.write_text(source)
    from tw_test_util import suite_cache_dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_BOUNDS_CHECK": "1", "TW_CACHE_DIR": suite_cache_dir(tmp_path)})
    p = subprocess.run([PY, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return script, p.stdout.strip().splitlines()[-1]


def test_bounds_check_mode_turns_runtime_oob_into_located_error(tmp_path):
    script, out = _checked_child(tmp_path, "oob_child.py", BOUNDS_CHILD)
    line = [ln for ln in BOUNDS_CHILD.splitlines() if "@runtime_oob" in ln]
    want_line = BOUNDS_CHILD.splitlines().index(line[0]) + 1
    assert out.startswith(f"ERR {script} {want_line} index 16 is out of bounds for dimension 0 of 'A' (size 16)"), out


ROW_VIEW_CHILD = textwrap.dedent("""
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    @T.prim_func
    def rows(X: T.Tensor((37, 301), "float32"), Y: T.Tensor((37,), "float32")):
        with T.Kernel(T.ceildiv(37, 8)) as bx:
            x = T.alloc_fragment((8, 301), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.copy(X[bx * 8, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(8):
                s[i] = s[i] + x[i, 3]
            T.copy(s, Y[bx * 8])

    @T.prim_func
    def cols(X: T.Tensor((37, 301), "float32"), Y: T.Tensor((5, 301), "float32")):
        with T.Kernel(T.ceildiv(37, 8)) as bx:
            x = T.alloc_fragment((8, 301), "float32")
            c = T.alloc_fragment((301,), "float32")
            T.copy(X[bx * 8, 0], x)
            T.reduce_max(x, c, dim=0)
            T.copy(c, Y[bx, 0])
    x = np.random.default_rng(0).standard_normal((37, 301)).astype(np.float32)
    x64 = x.astype(np.float64)
    padded = np.concatenate([x64, np.zeros((3, 301))])  # the tail block's missing rows read 0
    got = [tw.compile(k, out_idx=[-1])(x).astype(np.float64) for k in (rows, cols)]
    want = [x64.sum(1) + x64[:, 3], padded.reshape(5, 8, 301).max(1)]
    print(" ".join("OK" if np.allclose(g, w, rtol=1e-5, atol=1e-4) else "BAD" for g, w in zip(got, want)))
""")


def test_bounds_check_mode_reads_in_place_tiles_correctly(tmp_path):
    """A tile filled by a copy and then only read is read from the source tensor in place; in
    checked mode every read goes through the tile's checked index, so the copy must fill it (it
    did not: the loads read an unwritten stack tile)."""
    _, out = _checked_child(tmp_path, "row_view_child.py", ROW_VIEW_CHILD)
    assert out == "OK OK", out


# ---------------------------------------------------------------------------------------------
# Sizes and limits: cheap checks before expensive work


def test_tile_whose_byte_size_wraps_is_an_error():
    @T.prim_func
    def huge(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((1099511627776, 1099511627776), "float32")  # @huge
            T.fill(t, 0.0)
    with pytest.raises(TilewrightError) as ei:
        tw.compile(huge)
    at(ei, "@huge", "is too large")


def test_huge_unroll_is_rejected_quickly():
    @T.prim_func
    def unrolled(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.unroll(10 ** 6):  # @unroll
                B[i % 8] = A[i % 8]
    with pytest.raises(TilewrightError) as ei:
        tw.compile(unrolled, out_idx=[-1])
    at(ei, "@unroll", "more than 1024")


def _staged(num_stages):
    @T.prim_func
    def staged(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((32, 128), "float16")
            for k in T.Pipelined(4, num_stages=num_stages):  # @stages
                T.copy(A[k * 32, 0], t)
                T.copy(t, B[k * 32, 0])
    return staged


def test_huge_num_stages_is_rejected_quickly():
    staged = _staged(100000)
    for target in ("cpu", "ascend910b"):
        with pytest.raises(TilewrightError) as ei:
            tw.compile(staged, out_idx=[-1], target=target)
        at(ei, "@stages", "num_stages=100000")


def test_num_stages_beyond_int32_is_a_located_error():
    # fuzz_mutate (campaign seed 11012): num_stages=2147483648 reached the IR builder and leaked
    # nanobind's TypeError (for_(): incompatible function arguments) when the kernel was parsed.
    with pytest.raises(TilewrightError) as ei:
        _staged(2147483648)
    at(ei, "@stages", "num_stages=2147483648 is out of range")


def test_huge_output_is_an_error_not_memory_error():
    n = T.symbolic("n")

    @T.prim_func
    def big(A: T.Tensor((n,), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1) as bx:
            B[0, 0] = A[0]
    k = tw.compile(big, out_idx=[-1])
    with pytest.raises(TilewrightError) as ei:
        k(np.zeros(1 << 20, np.float32))  # @hugeout: 2^20 x 2^20 float32 = 4 TiB
    at(ei, "@hugeout", "cannot allocate an output")


# ---------------------------------------------------------------------------------------------
# Internal exceptions that leaked


def test_integer_literal_beyond_int64_is_located():
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def big_int(A: T.Tensor((8,), "int64"), B: T.Tensor((8,), "int64")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    B[i] = A[i] + 9223372036854775808  # @bigint
    at(ei, "@bigint", "does not fit in 64 bits")


def test_non_string_target_is_an_error():
    @T.prim_func
    def tgt(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i]
    with pytest.raises(TilewrightError, match="target must be a target name"):
        tw.compile(tgt, out_idx=[-1], target=123)


def test_deeply_nested_expression_is_an_error():
    src = "import tilewright.language as T\n\n@T.prim_func\ndef deep(A: T.Tensor((8,), 'float32'), " \
          "B: T.Tensor((8,), 'float32')):\n    with T.Kernel(1) as bx:\n        for i in T.Parallel(8):\n" \
          "            B[i] = " + " + ".join(["A[i]"] * 900) + "\n"
    ns = {}
    path = os.path.join(os.path.dirname(THIS_FILE), "__deep_expr_tmp.py")
    with open(path, "w") as f:
        f.write(src)
    try:
        code = compile(src, path, "exec")
        with pytest.raises(TilewrightError, match="nested too deeply"):
            exec(code, ns)
    finally:
        os.unlink(path)


DEEP_IR_CHILD = textwrap.dedent("""
    import numpy as np
    from tilewright import _C, TilewrightError
    from tilewright.jit import Kernel
    ir = _C.ir
    x, one = ir.var("x", "int32"), ir.int_imm(1, "int32")
    e = x
    try:
        for n in range(100000):
            e = ir.binary("add", e, one, ("deep.py", 7, 3))
    except TilewrightError as err:
        print("EXPR", n, err.line, err.message)
    s = ir.seq([])
    try:
        for n in range(100000):
            s = ir.seq([s])
    except TilewrightError as err:
        print("STMT", n, err.message)
    try:
        ir.parse_kernel("kernel k() {\\n let a: int32 = " + "(" * 100000 + "1" + ")" * 100000 + "\\n}")
    except TilewrightError as err:
        print("TEXT", err.line, err.message)
    try:
        ir.parse_kernel("kernel k() {\\n" + "{" * 100000 + "}" * 100000 + "\\n}")
    except TilewrightError as err:
        print("BLOCKS", err.line, err.message)
    print("PRINTED", len(ir.print_expr(e)))
    # The tallest tree allowed compiles and runs: B[i] = ((A[i] * 0.5 + 1.0) * 0.5 + 1.0) ...
    A = ir.buffer("A", "float32", [ir.int_imm(8, "int32")], "global")
    B = ir.buffer("B", "float32", [ir.int_imm(8, "int32")], "global")
    t = ir.buffer("t", "float32", [ir.int_imm(8, "int32")], "fragment")
    i = ir.var("i", "int32")
    v = ir.load(t, [i])
    for n in range(492):
        v = ir.binary("add", ir.binary("mul", v, ir.float_imm(0.5)), ir.float_imm(1.0))
    body = ir.seq([ir.alloc(t), ir.copy(ir.full_region(A), ir.full_region(t)),
                   ir.for_(i, ir.int_imm(0, "int32"), ir.int_imm(8, "int32"), "parallel", 0, ir.store(t, [i], v)),
                   ir.copy(ir.full_region(t), ir.full_region(B))])
    a = np.arange(8, dtype=np.float32)
    want = a.copy()
    for n in range(492):
        want = want * np.float32(0.5) + np.float32(1.0)
    for target in ("cpu", "ascend910b"):
        k = Kernel(_C.compile(ir.kernel("tall", [(A, False), (B, True)], [], [], body), target))
        print("RAN", target, np.allclose(k(a), want, rtol=1e-6))
""")


def test_deep_ir_from_the_low_level_builder_is_an_error_not_a_stack_overflow(tmp_path):
    # A 100,000-deep expression or statement nest built through tilewright._C.ir (or written in
    # the text form) crashed the process (printing, compiling or freeing it recursed past the
    # stack). Run in a child so that a regression fails this test, not the test run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_CACHE_DIR": str(tmp_path / "cache")})
    p = subprocess.run([PY, "-c", DEEP_IR_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.splitlines()
    assert out[0] == "EXPR 999 7 the IR is nested more than 1000 levels deep here (an expression, or statements " \
                     "with the expressions in them)", out
    assert out[1].startswith("STMT 999 the IR is nested more than 1000 levels deep"), out
    assert out[2] == "TEXT 2 the text is nested more than 256 levels deep", out
    assert out[3] == "BLOCKS 2 the text is nested more than 256 levels deep", out
    assert out[4] == "PRINTED " + str(len("x" + " + 1" * 999)), out  # x + 1 + 1 ... (left-associative)
    assert out[5:] == ["RAN cpu True", "RAN ascend910b True"], out


def test_unhashable_jit_argument_is_an_error():
    @tw.jit(out_idx=[-1])
    def scaled(n, factor):
        @T.prim_func
        def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * factor
        return scale
    with pytest.raises(TilewrightError, match="cannot be a cache key"):
        scaled(8, {1, 2})


def test_low_level_builder_names_are_validated(tmp_path):
    ir = _C.ir
    A = ir.buffer("A", "float32", [ir.int_imm(8, "int32")], "global")
    for bad in ["k\nint evil;", "../../x", 'q"uote']:
        kern = ir.kernel(bad, [(A, False)], [], [], ir.seq([]))
        with pytest.raises(TilewrightError, match="is not an identifier"):
            _C.compile(kern, "cpu")


def test_dump_ir_cannot_write_outside_its_folder(tmp_path):
    code = textwrap.dedent("""
        from tilewright import _C, TilewrightError
        ir = _C.ir
        A = ir.buffer("A", "float32", [ir.int_imm(8, "int32")], "global")
        try:
            _C.compile(ir.kernel("../escape", [(A, False)], [], [], ir.seq([])), "cpu")
        except TilewrightError as e:
            print("ERR", e.message)
    """)
    dump = tmp_path / "dump"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_DUMP_IR": str(dump), "TW_CACHE_DIR": str(tmp_path / "cache")})
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "kernel name '../escape' is not an identifier" in p.stdout
    assert not [n for n in os.listdir(tmp_path) if n.startswith("escape")]


def test_grid_with_more_than_2_63_blocks_is_an_error():
    @T.prim_func
    def grid(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):  # @grid
        with T.Kernel(4611686018427387904, 4611686018427387904) as (bx, by):
            if bx < 1 and by < 1:
                B[0] = A[0]
    k = tw.compile(grid, out_idx=[-1])
    with pytest.raises(TilewrightError) as ei:
        k(np.ones(8, np.float32))  # @gridcall (once: the block count wrapped to 0 and nothing ran)
    at(ei, "@gridcall", "has more than 2^63 blocks")
    assert f"is defined at {THIS_FILE}:{line_of('@grid')}" in ei.value.message


# Found by `make fuzz` (fuzz_mutate, seed 777): a mutant's constant power overflowed a float and
# leaked Python's OverflowError; an integer one could run for minutes. Each is a located error.
@pytest.mark.parametrize("expr", ["2.0 ** 5000", "10 ** 100", "(-8.0) ** 0.5", "0.0 ** -1"])
def test_constant_power_out_of_range_is_a_located_error(expr):
    src = ("import tilewright.language as T\n"
           "@T.prim_func\n"
           "def p(A: T.Tensor((8,), 'float32'), B: T.Tensor((8,), 'float32')):\n"
           "    with T.Kernel(1) as bx:\n"
           "        for i in T.Parallel(8):\n"
           f"            B[i] = A[i] * ({expr})\n")
    import tempfile, importlib.util
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pow_kernel.py")
        with open(path, "w") as f:
            f.write(src)
        spec = importlib.util.spec_from_file_location("pow_kernel", path)
        mod = importlib.util.module_from_spec(spec)
        with pytest.raises(TilewrightError) as ei:  # the front end folds constants as it parses
            spec.loader.exec_module(mod)
            tw.compile(mod.p, out_idx=[-1])
    assert ei.value.line == 6 and "**" in ei.value.message


# Found by fuzz_mutate (seed 4242): a tensor dimension computed beyond int64 leaked nanobind's
# TypeError from ir.int_imm; it is a located error.
def test_tensor_dimension_beyond_int64_is_a_located_error():
    N = 2 ** 70
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def big(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                B[0] = A[0]
    assert "does not fit in 64 bits" in ei.value.message and ei.value.line > 0


# Found by fuzz_mutate (seed 4242, flash_attention): a tile shape computed beyond int64.
def test_tile_dimension_beyond_int64_is_a_located_error():
    B = 2 ** 64
    with pytest.raises(TilewrightError) as ei:
        @T.prim_func
        def big_tile(A: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                t = T.alloc_fragment((B,), "float32")  # @tile
                T.copy(A[0], t)
                T.copy(t, C[0])
    assert "does not fit in 64 bits" in ei.value.message and ei.value.line > 0


# ---------------------------------------------------------------------------------------------
# Session 18 hostile-input hunt (docs/testing.md): arguments a careless caller passes


@T.prim_func
def _doubled_in_place(A: T.Tensor((16,), "float32")):  # written in place: no output
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((16,), "float32")
        T.copy(A[0], a)
        for i in T.Parallel(16):
            a[i] = a[i] * 2.0
        T.copy(a, A[0])


@T.prim_func
def _axpy(X: T.Tensor(("M", 8), "float32"), alpha: T.float32, Y: T.Tensor(("M", 8), "float32")):
    with T.Kernel(T.ceildiv(T.symbolic("M"), 4)) as bx:
        x = T.alloc_fragment((4, 8), "float32")
        T.copy(X[bx * 4, 0], x)
        for i, j in T.Parallel(4, 8):
            x[i, j] = alpha * x[i, j] + 1.0
        T.copy(x, Y[bx * 4, 0])


@T.prim_func
def _add_int(A: T.Tensor((4,), "int32"), s: T.int32, B: T.Tensor((4,), "int32")):
    with T.Kernel(1) as bx:
        for i in T.serial(4):
            B[i] = A[i] + s


def test_in_place_argument_that_would_be_copied_is_an_error():
    """Strided and read-only arrays are copied before the call (the kernels take dense ones): for
    an input the kernel writes, the writes went to the copy and the caller's array was silently
    left unchanged. Now an error at the call; a dense writable array is still written."""
    k = tw.compile(_doubled_in_place)
    base = np.ones(32, np.float32)
    with pytest.raises(TilewrightError) as e:
        k(base[::2])  # @strided_in_place
    at(e, "@strided_in_place", "argument 0 ('A') of kernel '_doubled_in_place' is not contiguous, and the kernel "
                              "writes it in place")
    assert "numpy.ascontiguousarray" in e.value.hint
    assert (base == 1).all()
    ro = np.ones(16, np.float32)
    ro.setflags(write=False)
    with pytest.raises(TilewrightError) as e:
        k(ro)  # @read_only_in_place
    at(e, "@read_only_in_place", "is read-only, and the kernel writes it in place")
    with pytest.raises(TilewrightError, match="is not contiguous, and the kernel writes it in place"):
        k(np.broadcast_to(np.ones(1, np.float32), (16,)))
    dense = np.arange(16, dtype=np.float32)
    k(dense)
    assert np.array_equal(dense, 2 * np.arange(16, dtype=np.float32))


def test_in_place_torch_tensor_that_would_be_copied_is_an_error():
    torch = pytest.importorskip("torch")
    k = tw.compile(_doubled_in_place)
    t = torch.ones(32)
    with pytest.raises(TilewrightError, match="is not contiguous, and the kernel writes it in place"):
        k(t[::2])
    assert bool((t == 1).all())
    dense = torch.arange(16, dtype=torch.float32)
    k(dense)
    assert torch.equal(dense, 2 * torch.arange(16, dtype=torch.float32))


def test_read_only_and_strided_inputs_are_read():
    """A read-only input (numpy cannot export it by DLPack) was refused as "cannot use an object of
    type 'ndarray'"; inputs the kernel only reads are copied, whatever their layout."""
    k = tw.compile(_axpy, out_idx=[-1])
    x = np.arange(40, dtype=np.float32).reshape(5, 8)
    want = 2 * x + 1
    ro = x.copy()
    ro.setflags(write=False)
    for arg in (ro, np.frombuffer(x.tobytes(), np.float32).reshape(5, 8), np.asfortranarray(x),
                x[::-1][::-1], np.broadcast_to(x[:1], (5, 8))):
        got = k(arg, 2.0)
        assert np.array_equal(got, 2 * np.asarray(arg) + 1)
    assert k._written == frozenset()
    assert np.array_equal(k(x, 2.0), want)
    assert tw.compile(_doubled_in_place)._written == frozenset({0})


def test_zero_dim_arrays_and_tensors_are_scalars():
    """numpy.array(2.0) and torch.tensor(2.0) for a float scalar leaked a TypeError from their
    __index__ (and the first fix aborted the process inside nanobind for the tensor)."""
    k = tw.compile(_axpy, out_idx=[-1])
    x = np.ones((4, 8), np.float32)
    for alpha in (np.array(2.0), np.array(2.0, np.float32), np.float32(2.0), np.array(2)):
        assert np.array_equal(k(x, alpha), np.full((4, 8), 3.0, np.float32))
    ki = tw.compile(_add_int, out_idx=[-1])
    assert np.array_equal(ki(np.zeros(4, np.int32), np.array(3)), np.full(4, 3, np.int32))
    with pytest.raises(TilewrightError, match="is an integer .int32., got a float"):
        ki(np.zeros(4, np.int32), np.array(3.0))
    torch = pytest.importorskip("torch")
    assert np.array_equal(k(x, torch.tensor(2.0)), np.full((4, 8), 3.0, np.float32))
    assert np.array_equal(ki(np.zeros(4, np.int32), torch.tensor(3)), np.full(4, 3, np.int32))
    with pytest.raises(TilewrightError, match="is an integer .int32., got a float"):
        ki(np.zeros(4, np.int32), torch.tensor(3.0))


def test_keyword_arguments_to_a_kernel_are_an_error():
    k = tw.compile(_axpy, out_idx=[-1])
    with pytest.raises(TilewrightError) as e:
        k(np.ones((4, 8), np.float32), alpha=2.0)  # @kwargs_call
    at(e, "@kwargs_call", "kernel '_axpy' takes its arguments by position, got keyword argument(s) 'alpha'")
    assert "_axpy(X, alpha)" in e.value.hint


def test_array_that_refuses_dlpack_names_the_reason():
    k = tw.compile(_axpy, out_idx=[-1])
    with pytest.raises(TilewrightError, match="cannot use an object of type 'ndarray' as a kernel argument: .*byte order"):
        k(np.ones((4, 8), ">f4"), 2.0)


def test_odd_helper_arguments_are_errors():
    k = tw.compile(_axpy, out_idx=[-1])
    with pytest.raises(TilewrightError, match=r"get_ir\(\) takes a stage name"):
        k.get_ir(5)
    with pytest.raises(TilewrightError, match=r"clear_cache\(disk=...\) takes a bool"):
        tw.clear_cache(disk="no")
    with pytest.raises(TilewrightError, match="seed 'x' is not a random seed"):
        tw.testing.randn((2,), seed="x")
    for kwargs in ({"rep": float("inf")}, {"warmup": float("nan")}, {"rep": "5"}, {"rep": True}):
        with pytest.raises(TilewrightError, match="must be >= 0 and rep"):
            tw.do_bench(lambda: None, **kwargs)
    for q in (0.5, ["a"], [float("nan")], "0.5"):
        with pytest.raises(TilewrightError, match="must be a non-empty list of values in"):
            tw.do_bench(lambda: None, quantiles=q)
    assert tw.do_bench(lambda: None, rep=np.int64(2), warmup=np.float32(1)) >= 0


_ENV_CHILD = textwrap.dedent("""
    import sys
    import tilewright as tw
    import tilewright.language as T

    @T.prim_func
    def neg(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = -A[i]
    try:
        tw.compile(neg, out_idx=[-1])
        print("OK", tw.cache_info()["disk"]["dir"])
    except tw.TilewrightError as e:
        print("ERR", e.message)
""")


def _env_child(tmp_path, env_update, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update(env_update)
    script = tmp_path / "env_child.py"
    script.write_text(_ENV_CHILD)
    p = subprocess.run([PY, str(script)], env=env, capture_output=True, text=True, timeout=300, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


def test_dump_ir_naming_a_file_is_an_error(tmp_path):
    """TW_DUMP_IR naming a file leaked a std::filesystem exception (RuntimeError)."""
    (tmp_path / "afile").write_text("x")
    out = _env_child(tmp_path, {"TW_DUMP_IR": str(tmp_path / "afile"), "TW_CACHE_DIR": str(tmp_path / "c")}, tmp_path)
    assert out.startswith(f"ERR TW_DUMP_IR: cannot write the IR dump to '{tmp_path / 'afile'}/neg-"), out
    assert "Not a directory" in out, out


def test_relative_cache_dir_is_made_absolute(tmp_path):
    """TW_CACHE_DIR=-1 (a relative path starting with '-') reached g++ as an option and failed as
    an "internal compiler error"; a relative path is now made absolute when the environment is read
    (a later chdir does not move the cache either)."""
    out = _env_child(tmp_path, {"TW_CACHE_DIR": "-1", "TW_DUMP_IR": "-dump"}, tmp_path)
    assert out == f"OK {tmp_path / '-1' / 'kernels'}", out
    assert [p.name for p in (tmp_path / "-dump").iterdir()][0].startswith("neg-")


def test_register_torch_op_checks_its_arguments():
    """Bad op names leaked torch's parser errors (ValueError, RuntimeError), a non-kernel an
    AttributeError. (A kernel writing an input in place is registered as mutating it: test_torch.py.)"""
    pytest.importorskip("torch")
    k = tw.compile(_axpy, out_idx=[-1])
    for name in ("::axpy", "a::b::c", "r6::a-b", "axpy", 5):
        with pytest.raises(TilewrightError, match="is not 'namespace::op_name'"):
            tw.register_torch_op(name, k)
    with pytest.raises(TilewrightError, match="takes a compiled tilewright Kernel, got 5"):
        tw.register_torch_op("r6::five", 5)
    with pytest.raises(TilewrightError) as e:
        tw.register_torch_op("r6::reads_only", tw.compile(_reads_only))
    assert "has no output parameter and writes none of its inputs" in e.value.message
    assert "out_idx" in e.value.hint


@T.prim_func
def _reads_only(A: T.Tensor((4,), "float32")):  # no output, writes nothing
    with T.Kernel(1) as bx:
        a = T.alloc_fragment((4,), "float32")
        T.copy(A[0], a)


@tw.jit(out_idx=[-1])
def _scale_factory(n, block=8):
    @T.prim_func
    def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            a = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], a)
            for i in T.Parallel(block):
                a[i] = a[i] * 2.0
            T.copy(a, B[bx * block])
    return scale


@pytest.mark.parametrize("kwargs, message", [
    ({"configs": [5]}, "configs must be a list of tw.Config (or dicts), got 5"),
    ({"configs": "abc"}, "configs must be a list of tw.Config (or dicts), got 'abc'"),
    ({"configs": tw.Config(block=4)}, "configs must be a list of tw.Config (or dicts), got block=4"),
    ({"configs": [tw.Config(block=4)], "rep": float("nan")}, "rep (nan) > 0"),
    ({"configs": [tw.Config(block=4)], "warmup": -1}, "warmup (-1) must be >= 0"),
    ({"configs": [tw.Config(block=4)], "prune_factor": -1}, "prune_factor -1 must be a number >= 1"),
    ({"configs": [tw.Config(block=4)], "executor": 5}, "executor 5 is not a concurrent.futures.Executor"),
])
def test_autotune_arguments_are_checked(kwargs, message):
    """Non-mapping configs leaked a TypeError, a bad executor an AttributeError in the middle of a
    sweep, a negative prune_factor pruned every configuration, a NaN budget reached do_bench."""
    with pytest.raises(TilewrightError) as e:
        tw.autotune(**kwargs)(_scale_factory)
    assert message in e.value.message


def test_autotune_of_a_plain_function_and_a_bad_prune_are_errors():
    with pytest.raises(TilewrightError, match="decorates a @tw.jit kernel factory"):
        tw.autotune(configs=[tw.Config(block=4)])(lambda n, block: None)
    tuner = tw.autotune(configs=[tw.Config(block=4), tw.Config(block=8)], prune=lambda c, **k: None,
                        executor="inline", verbose=False)(_scale_factory)
    with pytest.raises(TilewrightError, match=r"prune\(\) must return a list of configurations, got \[None\]"):
        tuner.tune(64)


def test_freeze_and_precompile_check_their_arguments():
    """freeze("no") froze the cache (bool("no") is True); precompile(5) and workers="x" leaked
    TypeErrors."""
    with pytest.raises(TilewrightError, match="freeze.. takes a bool, got 'no'"):
        tw.freeze("no")
    assert not tw.frozen()
    with pytest.raises(TilewrightError, match="takes a list of kernel specs, got 5"):
        tw.precompile(5)
    for workers in ("x", 0, -1, True):
        with pytest.raises(TilewrightError, match="workers=.... must be a positive int"):
            tw.precompile([], workers=workers)


def test_export_name_and_cpu_arch_must_be_strings(tmp_path):
    """A non-str name or cpu_arch leaked nanobind's TypeError ("Invoked with types ...")."""
    k = tw.compile(_axpy, out_idx=[-1])
    with pytest.raises(TilewrightError, match=r"export\(name=...\) takes a str, got 5"):
        tw.deploy.export([k], tmp_path, name=5)
    with pytest.raises(TilewrightError, match=r"export\(cpu_arch=...\) takes a str, got 5"):
        tw.deploy.export([k], tmp_path, cpu_arch=5)
    with pytest.raises(TilewrightError, match="cannot export 5: not a compiled kernel or a list of them"):
        tw.deploy.export(5, tmp_path)


def test_testing_helpers_check_their_arguments():
    """tw.testing: randint wrapped values outside the dtype ([-8, 8) as uint8 gave 252 ...);
    assert_close compared int64 through float64, so values past 2**53 that differ by 1 passed;
    a bad dtype name, atol='x' and load_fn(5) leaked numpy's / Python's exceptions."""
    tt = tw.testing
    with pytest.raises(TilewrightError, match=r"randint: \[-8, 8\) does not fit in uint8 \[0, 255\]"):
        tt.randint((4,), "uint8", low=-8, high=8)
    assert tt.randint((64,), "uint8", low=0, high=256).dtype == np.uint8
    assert set(np.unique(tt.randint((64,), "int8", low=-128, high=128))) <= set(range(-128, 128))
    with pytest.raises(AssertionError, match="not close: 1 of 1"):
        tt.assert_close(np.array([2**62], np.int64), np.array([2**62 + 1], np.int64))
    tt.assert_close(np.array([2**62], np.int64), np.array([2**62], np.int64))
    for bad in ("x", -1, float("nan")):
        with pytest.raises(TilewrightError, match="must be a finite number >= 0"):
            tt.assert_close(np.ones(2), np.ones(2), atol=bad)
    with pytest.raises(TilewrightError, match="'float7' is not a dtype"):
        tt.randn((2,), "float7")
    with pytest.raises(TilewrightError, match="5 does not name a function"):
        tt.load_fn(5)
