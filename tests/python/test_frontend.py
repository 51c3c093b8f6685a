"""Front-end tests: Python kernels in both styles -> Tile IR text; front-end errors with their
message, line and caret."""
import linecache
import textwrap

import pytest

import tilewright as tw
import tilewright.language as T
from tilewright._C import ir
from tilewright.errors import TilewrightError
from tilewright.frontend import parse_prim_func, parse_tile_loops

THIS_FILE = __file__

from tw_test_util import marked_line  # noqa: E402


def text(k):
    return ir.print_kernel(k)


def roundtrip(k):
    """The printed IR parses back to the same text; explicit kernels also verify."""
    t = ir.print_kernel(k)
    assert ir.print_kernel(ir.parse_kernel(t)) == t
    t_spans = ir.print_kernel(k, spans=True)
    assert ir.print_kernel(ir.parse_kernel(t_spans), spans=True) == t_spans
    return t


def same(actual, expected):
    assert actual.strip() == textwrap.dedent(expected).strip(), "\n" + actual


# ---------------------------------------------------------------------------------------------
# Explicit style

def make_matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def test_matmul_explicit_constant_shapes():
    f = make_matmul(256, 1024, 512, 128, 128, 32)
    assert isinstance(f, T.PrimFunc) and f.name == "main"
    ir.verify(f.ir)
    same(roundtrip(f.ir), """
        kernel main(A: global float16[256, 512], B: global float16[512, 1024], C: global float16[256, 1024])
            grid(bx = 8, by = 2) {
          alloc A_shared: shared float16[128, 32]
          alloc B_shared: shared float16[32, 128]
          alloc C_local: fragment float32[128, 128]
          fill C_local = 0.0
          for k in pipelined(0, 16, stages=3) {
            copy A[by * 128:+128, k * 32:+32] -> A_shared
            copy B[k * 32:+32, bx * 128:+128] -> B_shared
            gemm A_shared, B_shared -> C_local trans_a=false trans_b=false clear=false
          }
          for i in parallel(0, 128) {
            for j in parallel(0, 128) {
              C_local[i, j] = max(C_local[i, j], 0.0)
            }
          }
          copy C_local -> C[by * 128:+128, bx * 128:+128]
        }
    """)


def test_matmul_explicit_symbolic_dims_and_spans():
    f = make_matmul(T.symbolic("M"), "N", 512, 64, 64, 32)
    ir.verify(f.ir)
    t = roundtrip(f.ir)
    assert "kernel main(A: global float16[M, 512], B: global float16[512, N], C: global float16[M, N])" in t
    assert "grid(bx = ceildiv(N, 64), by = ceildiv(M, 64))" in t
    assert [v.name for v in f.ir.shape_vars()] == ["M", "N"]
    # Every node carries the user's file and line.
    assert f.ir.span[0] == THIS_FILE
    gemm = f.ir.body.body[4].body.body[2]
    assert gemm.kind == "Gemm"
    file, line, col = gemm.span
    assert file == THIS_FILE and "T.gemm(A_shared, B_shared, C_local)" in linecache.getline(file, line)
    assert linecache.getline(file, line)[col - 1:].startswith("T.gemm")


def test_softmax_rows_reduce_math_and_ssa():
    M, N, bm = 1024, 128, 32
    scale = 0.5

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                v = x[i, j] * scale
                v = T.exp(v - mx[i] * scale)  # re-assignment: a new SSA value
                x[i, j] = v
            T.reduce_sum(x, s, dim=-1)
            for i, j in T.Parallel(bm, N):
                x[i, j] /= s[i]
            T.copy(x, Y[bx * bm:(bx + 1) * bm, 0:N])
    ir.verify(softmax.ir)
    same(roundtrip(softmax.ir), """
        kernel softmax(X: global float32[1024, 128], Y: global float32[1024, 128])
            grid(bx = 32) {
          alloc x: fragment float32[32, 128]
          alloc mx: fragment float32[32]
          alloc s: fragment float32[32]
          copy X[bx * 32:+32, 0:+128] -> x
          reduce max x -> mx axis=1 clear=true
          for i in parallel(0, 32) {
            for j in parallel(0, 128) {
              let v: float32 = x[i, j] * 0.5
              let v_1: float32 = exp(v - mx[i] * 0.5)
              x[i, j] = v_1
            }
          }
          reduce sum x -> s axis=1 clear=true
          for i_1 in parallel(0, 32) {
            for j_1 in parallel(0, 128) {
              x[i_1, j_1] = x[i_1, j_1] / s[i_1]
            }
          }
          copy x -> Y[bx * 32:+32, 0:+128]
        }
    """)


def test_expressions_python_semantics_and_folding():
    n = 7
    use_bias = False

    @T.prim_func
    def k(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "int32"), alpha: T.float32):
        with T.Kernel(1) as bx:
            for i in T.serial(n // 2, 64 - n % 4):          # folded: serial(3, 61)
                q = i // 3 + i % 3                           # floor div / floor mod
                r = i / 2                                    # true division -> float32
                B[i] = T.if_then_else((i > 2) and (i < 40), q, 0)
                A[i] = T.gelu(A[i]) + T.cast(r, "float16") * alpha
                if use_bias:                                 # compile-time: dropped
                    A[i] = 0
                if i >= 10:
                    A[i] = T.where(A[i] > 0, A[i], -T.infinity(T.float16))
                else:
                    A[i] = T.float16(B[i]) ** 2
            for j in T.unroll(4):
                B[j] = T.min(B[j], 4 * n)                    # 4 * n folded to 28
    ir.verify(k.ir)
    t = roundtrip(k.ir)
    same(t, """
        kernel k(A: global float16[64], B: global int32[64], alpha: float32)
            grid(bx = 1) {
          for i in serial(3, 58) {
            let q: int32 = i // 3 + i % 3
            let r: float32 = cast<float32>(i) / 2.0
            B[i] = where(i > 2 and i < 40, q, 0)
            A[i] = cast<float32>(0.5f16 * A[i] * (1.0f16 + erf(A[i] * 0.7071067811865475f16))) + cast<float32>(cast<float16>(r)) * alpha
            if i >= 10 {
              A[i] = where(A[i] > 0.0f16, A[i], -inff16)
            } else {
              A[i] = pow(cast<float16>(B[i]), 2.0f16)
            }
          }
          for j in unroll(0, 4) {
            B[j] = min(B[j], 28)
          }
        }
    """)


def test_slices_and_tile_origin_rank_padding():
    @T.prim_func
    def k(A: T.Tensor((4, 64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(4) as b:
            s = T.alloc_shared((32, 64), "float16")
            f = T.alloc_fragment((32, 32), "float32")
            T.copy(A[b, 0, 0], s)                          # 3-D origin, 2-D tile: leading extent 1
            T.fill(f[0:16, :], 1)                          # open slice bound = buffer dim
            T.gemm(s[:, 0:32], s[:, 32:64], f, transpose_B=True, clear_accum=True)
            T.copy(f, C[b * 16:b * 16 + 32, 0:32])
    ir.verify(k.ir)
    t = roundtrip(k.ir)
    assert "copy A[b:+1, 0:+32, 0:+64] -> s" in t
    assert "fill f[0:+16, 0:+32] = 1.0" in t
    assert "gemm s[0:+32, 0:+32], s[0:+32, 32:+32] -> f trans_a=false trans_b=true clear=true" in t
    assert "copy f -> C[b * 16:+32, 0:+32]" in t  # stop - start folded


def test_out_idx_and_scalar_params():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), n: T.int32, B: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            for i in range(16):
                if i < n:
                    B[i] = A[i]
    kern = parse_prim_func(k, out_idx=[-1])
    assert [(p.name, p.is_output) for p in kern.params] == [("A", False), ("n", False), ("B", True)]
    assert kern.params[1].scalar.dtype == "int32"
    assert [v.name for v in kern.block_vars] == ["bx"]
    ir.verify(kern)
    roundtrip(kern)


# ---------------------------------------------------------------------------------------------
# Tile-loops style (the seed's matmul)

M_, N_, K_ = 8192, 8192, 8192
block_m, block_n, block_k = 128, 128, 64


def seed_matmul(A: tw.Tensor((M_, K_), "float32"), B: tw.Tensor((K_, N_), "float32")):
    out = tw.output((M_, N_), dtype="float32")
    for by in range(M_ // block_m):
        for bx in range(N_ // block_n):
            acc = tw.accumulator((block_m, block_n), dtype="float32")
            for k in range(K_ // block_k):
                a_tile = tw.load(A, (by * block_m, k * block_k), (block_m, block_k))
                b_tile = tw.load(B, (k * block_k, bx * block_n), (block_k, block_n))
                acc += tw.matmul(a_tile, b_tile)
            tw.store(out, (by * block_m, bx * block_n), acc)
    return out


def test_tile_loops_seed_matmul():
    k = parse_tile_loops(seed_matmul)
    assert [(p.name, p.is_output) for p in k.params] == [("A", False), ("B", False), ("out", True)]
    assert list(k.block_vars) == [] and list(k.grid) == []
    same(roundtrip(k), """
        kernel seed_matmul(A: global float32[8192, 8192], B: global float32[8192, 8192], out: global float32[8192, 8192] out) {
          for by in serial(0, 64) {
            for bx in serial(0, 64) {
              alloc acc: fragment float32[128, 128]
              fill acc = 0.0
              for k in serial(0, 128) {
                alloc a_tile: shared float32[128, 64]
                copy A[by * 128:+128, k * 64:+64] -> a_tile
                alloc b_tile: shared float32[64, 128]
                copy B[k * 64:+64, bx * 128:+128] -> b_tile
                gemm a_tile, b_tile -> acc trans_a=false trans_b=false clear=false
              }
              copy acc -> out[by * 128:+128, bx * 128:+128]
            }
          }
        }
    """)


def tl_symbolic(A: tw.Tensor(("M", "K"), "float16"), B: tw.Tensor(("K", "N"), "float16")):
    out = tw.output(("M", "N"), dtype="float32")
    for i in range(tw.ceildiv(M_sym, bm)):
        for j in range(tw.ceildiv(N_sym, bn)):
            acc = tw.accumulator((bm, bn))
            for k in range(0, K_sym, bk):
                a = tw.load(A, (i * bm, k), (bm, bk))
                b = tw.load("B", (k, j * bn), (bk, bn), dtype="float32")
                acc += tw.matmul(a, b)
            tw.store(out, (i * bm, j * bn), acc)
    return out


M_sym, N_sym, K_sym = tw.symbolic("M"), tw.symbolic("N"), tw.symbolic("K")
bm, bn, bk = 32, 64, 16


def test_tile_loops_symbolic_step_and_specs():
    k = parse_tile_loops(tl_symbolic)
    t = roundtrip(k)
    assert "kernel tl_symbolic(A: global float16[M, K], B: global float16[K, N], out: global float32[M, N] out)" in t
    assert "for i in serial(0, ceildiv(M, 32))" in t
    assert "for k in serial(0, ceildiv(K, 16))" in t          # range with a step: k = 16 * k'
    assert "copy A[i * 32:+32, k * 16:+16] -> a" in t
    assert "alloc b: shared float32[16, 64]" in t              # dtype= converts on load
    # arg_specs override the annotations (specialisation)
    k2 = parse_tile_loops(tl_symbolic, [tw.Tensor(("M", "K"), "float16"), tw.Tensor(("K", "N"), "bfloat16")])
    assert "B: global bfloat16[K, N]" in text(k2)
    # ... and a symbolic dim the specs no longer define is reported where the body uses it
    with pytest.raises(TilewrightError, match="output dimension 'N' is not a dimension of any input"):
        parse_tile_loops(tl_symbolic, {"B": tw.Tensor(("K", 70), "float16")})


# ---------------------------------------------------------------------------------------------
# One form of the IR: text and front end agree

def tree(s):
    """The statement tree's node kinds, nesting included (the text does not show whether a body
    is one statement or a sequence holding it; this does)."""
    if s is None:
        return "-"
    kids = {"Seq": lambda: list(s.body), "For": lambda: [s.body], "If": lambda: [s.then_body, s.else_body],
            "CoreScope": lambda: [s.body]}.get(s.kind)
    return s.kind if kids is None else s.kind + "(" + " ".join(tree(c) for c in kids()) + ")"


_TILE_IR_GOLDENS = {  # tests/golden/tile_ir/<file>: the example's kernel as its header says it was built
    # (the tw.jit examples' undecorated builder, with the out_idx of their decorator)
    "flash_attention": ("flash_attention", lambda m: m.flash_attention.__wrapped__(1, 2, 100, 64, True), [3]),
    "gelu_bias": ("gelu_bias", lambda m: m.gemm_bias_gelu.__wrapped__(70, 90, 50), [-1]),
    "gemm": ("gemm", lambda m: m.matmul.__wrapped__(200, 130, 100, dtype="float16"), [-1]),
    "layer_norm": ("layer_norm", lambda m: m.layer_norm.__wrapped__(300, dtype="bfloat16"), [-1]),
    "rms_norm": ("rms_norm", lambda m: m.rms_norm.__wrapped__(301), [-1]),
    "softmax": ("softmax", lambda m: m.softmax.__wrapped__(300, dtype="float16"), [-1]),
    "seed_matmul": ("seed_matmul", lambda m: m.kernel_function(200, 130, 100), None),
}


@pytest.mark.parametrize("name", sorted(_TILE_IR_GOLDENS))
def test_tile_ir_goldens_are_what_the_front_end_builds(name):
    """The Tile IR goldens (the input of the automatic AscendC goldens) parse into the tree the
    front end builds from the example: same text, same statement tree (a loop body of one
    statement is that statement in both, ir::body_form), so the AscendC goldens are of kernels
    users write. Printing the front end's kernel and parsing it back is the identity."""
    import importlib
    import os
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "examples"))
    try:
        module, build, out_idx = _TILE_IR_GOLDENS[name]
        fn = build(importlib.import_module(module))
    finally:
        sys.path.remove(os.path.join(root, "examples"))
    k = parse_tile_loops(fn) if out_idx is None else parse_prim_func(fn, out_idx)
    with open(os.path.join(root, "tests", "golden", "tile_ir", name + ".tir")) as f:
        golden = f.read()
    built = roundtrip(k).replace(f"kernel {k.name}(", f"kernel auto_{name}(", 1)
    assert built == "".join(l for l in golden.splitlines(True) if not l.startswith("#")), name
    parsed = ir.parse_kernel(golden)
    assert tree(parsed.body) == tree(k.body)
    assert tree(ir.parse_kernel(ir.print_kernel(k)).body) == tree(k.body)


def test_one_statement_bodies_are_the_statement():
    @T.prim_func
    def one(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0
            if bx == 0:
                for i in T.serial(2):
                    B[i] = 0.0

    k = parse_prim_func(one)
    assert tree(k.body) == "Seq(For(Store) If(For(Store) -))"
    parsed = ir.parse_kernel(roundtrip(k))
    assert tree(parsed.body) == tree(k.body)
    # the builders: a loop, if or scope given a sequence of one statement holds the statement
    st = k.body.body[0].body
    assert ir.seq([st]).kind == "Seq"
    assert tree(ir.for_(ir.var("j"), ir.int_imm(0), ir.int_imm(4), "serial", 0, ir.seq([ir.seq([st])]))) == "For(Store)"
    assert tree(ir.if_(k.body.body[1].cond, ir.seq([st]), ir.seq([st, st]))) == "If(Store Seq(Store Store))"


# ---------------------------------------------------------------------------------------------
# Errors: message, line, caret


def where(marker):
    """(line number, source line) of the line of this file with the comment `# marker`."""
    return marked_line(THIS_FILE, marker)


def check_error(exc_info, message, marker, caret_at):
    e = exc_info.value
    line, src = where(marker)
    assert message in e.message, e.message
    assert e.file == THIS_FILE
    assert e.line == line, str(e)
    assert e.col == src.index(caret_at) + 1, str(e)
    s = str(e)
    assert s.startswith(f"{THIS_FILE}:{line}:{e.col}: error: ")
    lines = s.splitlines()
    assert lines[1] == "    " + src
    assert lines[2] == "    " + " " * (e.col - 1) + "^"
    return e


def test_error_while_loop():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            i = 0
            while i < 4:  # @E1
                A[i] = 0
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    e = check_error(ei, "unsupported statement 'while'", "@E1", "while")
    assert "for loop" in e.hint


def test_error_unknown_T_function():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            for i in T.Parallel(16):
                A[i] = T.expp(A[i])  # @E2
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "unknown function T.expp", "@E2", "T.expp")


def test_error_wrong_arity():
    def bad(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1):
            s = T.alloc_shared((16, 16), "float32")
            T.copy(A, s, 3)  # @E3
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "T.copy() takes at most 2 argument(s) (src, dst), got 3", "@E3", "T.copy")


def test_error_unexpected_keyword():
    def bad(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1):
            f = T.alloc_fragment((16, 16), "float32")
            T.gemm(A, A, f, trans_A=True)  # @E4
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    e = check_error(ei, "unexpected keyword argument 'trans_A'", "@E4", "trans_A")
    assert "transpose_A" in e.hint


def test_error_assign_to_loop_var():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            for i in T.serial(16):
                i = i + 1  # @E5
                A[i] = 0
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "cannot assign to loop variable 'i'", "@E5", "i = i + 1")


def test_error_non_constant_tile_shape():
    def bad(A: T.Tensor((16,), "float32"), n: T.int32):
        with T.Kernel(1):
            s = T.alloc_shared((n, 16), "float32")  # @E6
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    e = check_error(ei, "must be a compile-time constant", "@E6", "n, 16")
    assert e.hint


def test_error_symbolic_tile_size():
    Msym = T.symbolic("M")

    def bad(A: T.Tensor((Msym, 16), "float32")):
        with T.Kernel(1):
            s = T.alloc_fragment((Msym, 16), "float32")  # @E7
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "'M' is symbolic", "@E7", "Msym, 16")


def test_error_T_copy_outside_kernel():
    with pytest.raises(TilewrightError) as ei:
        T.copy(1, 2)  # @E8
    e = ei.value
    line, _ = where("@E8")
    assert "T.copy can only be used inside a kernel" in e.message
    assert e.file == THIS_FILE and e.line == line
    with pytest.raises(TilewrightError):
        tw.load(None, (0,), (1,))
    assert T.ceildiv(10, 4) == 3  # plain ints are fine outside kernels


def test_error_loop_carried_scalar():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            acc = 0.0
            for i in T.serial(16):
                acc = acc + A[i]  # @E9
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    e = check_error(ei, "cannot re-assign 'acc' here", "@E9", "acc = acc")
    assert "alloc_fragment((1,)" in e.hint


def test_error_type_error_from_builder_has_location():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            for i in T.serial(16):
                A[i] = T.where(A[i], 1.0, 2.0)  # @E10
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "condition of where() must be bool", "@E10", "T.where")


def test_error_is_npu_and_body_outside_kernel():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, 2, is_npu=True):  # @E11
            pass
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "is_npu=True) takes one grid extent", "@E11", "T.Kernel")

    def bad2(A: T.Tensor((16,), "float32")):
        x = 1  # @E12
        with T.Kernel(1):
            pass
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad2)
    check_error(ei, "must be a single 'with T.Kernel", "@E12", "x = 1")


def test_error_copy_both_sides_origin_and_slice_as_value():
    def bad(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            T.copy(A[0, 0], B[bx, 0])  # @E13
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "needs the extent of at least one side", "@E13", "T.copy")

    def bad2(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1):
            x = A[0:4, 0] + 1  # @E14
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad2)
    check_error(ei, "is a region, not a value", "@E14", "A[0:4, 0]")


def test_error_tile_loops():
    def bad(A: tw.Tensor((64, 64), "float32")):
        out = tw.output((64, 64))
        for i in range(2):
            acc = tw.accumulator((32, 32))
            a = tw.load(A, (i * 32, 0), (32, 32))
            acc = tw.matmul(a, a)  # @E15
        return out
    with pytest.raises(TilewrightError) as ei:
        parse_tile_loops(bad)
    check_error(ei, "tw.matmul cannot be used inside an expression", "@E15", "tw.matmul")

    def bad2(A: tw.Tensor((64, 64), "float32")):
        for i in range(2):
            out = tw.output((64, 64))  # @E16
        return out
    with pytest.raises(TilewrightError) as ei:
        parse_tile_loops(bad2)
    check_error(ei, "must be declared at the top level", "@E16", "tw.output")

    def bad3(A: tw.Tensor((64, 64), "float32")):
        out = tw.output((64, 64))
        T.copy(A, out)  # @E17
        return out
    with pytest.raises(TilewrightError) as ei:
        parse_tile_loops(bad3)
    check_error(ei, "T.copy is not part of the tile loops style", "@E17", "T.copy")


def test_error_undefined_name_after_block():
    def bad(A: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            for i in T.serial(16):
                t = A[i] * 2
            A[0] = t  # @E18
    with pytest.raises(TilewrightError) as ei:
        parse_prim_func(bad)
    check_error(ei, "'t' is not visible here", "@E18", "t  #")


def test_compile_time_string_condition_picks_a_branch():
    """`if op == "relu":` on a Python string from the enclosing scope is decided at compile time."""
    import numpy as np

    @tw.jit(out_idx=[-1])
    def act(n, op):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(n):
                    if op == "relu":
                        B[i] = T.max(A[i], 0.0)
                    else:
                        B[i] = A[i] * 2.0
        return main

    a = np.array([-1, 2, -3, 4], np.float32)
    assert np.array_equal(act(4, "relu")(a), np.maximum(a, 0))
    assert np.array_equal(act(4, "double")(a), a * 2)
    assert "max" in act(4, "relu").get_ir("input") and "max" not in act(4, "double").get_ir("input")
