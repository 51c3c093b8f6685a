"""The CPU runtime's math functions (src/target/cpu/include/tw_cpu/math.h) are meant to be
auto-vectorised by g++ -O3 wherever a generated kernel maps them over a row. g++ refuses to
if-convert a float `c ? a : b` whose arms hold floating-point arithmetic when the target has no
masked vector operations (AVX2, SSE2: "control flow in loop"), so a function written that way ran
one element at a time there while the AVX-512 build was vectorised. This test compiles one loop
per function for each code path the runtime has (-march=x86-64, haswell, native) and reads g++'s
vectorisation report: every loop must be vectorised. The same holds for the element conversions
(float32 -> float16 had the same problem) and for the select the code
generator emits for T.where (tw_select) with arithmetic in both arms."""
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "src" / "target" / "cpu" / "include"

FUNCTIONS = ["exp", "exp2", "log", "sqrt", "rsqrt", "sigmoid", "silu", "tanh", "erf"]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")


# element conversions a generated kernel stores and loads with: (source type, destination type)
CONVERSIONS = [("float", "tw_cpu::f16"), ("float", "tw_cpu::bf16"), ("tw_cpu::f16", "float"),
               ("tw_cpu::bf16", "float"), ("float", "int32_t"), ("float", "int8_t")]


def _source():
    # one function per line: the report names the loop by its line number
    lines = ['#include "tw_cpu/tw_cpu.h"']
    for f in FUNCTIONS:
        lines.append(f"void loop_{f}(const float* __restrict x, float* __restrict y, int n) {{ "
                     f"_Pragma(\"GCC ivdep\") for (int i = 0; i < n; ++i) y[i] = tw_cpu::{f}(x[i]); }}")
    for k, (src, dst) in enumerate(CONVERSIONS):
        lines.append(f"void convert_{k}(const {src}* __restrict x, {dst}* __restrict y, int n) {{ "
                     f"_Pragma(\"GCC ivdep\") for (int i = 0; i < n; ++i) y[i] = tw_cpu::convert<{dst}>(x[i]); }}")
    return "\n".join(lines) + "\n"


def _vectorised_lines(tmp_path, source, march):
    """The line numbers of the loops g++ -O3 -march=`march` vectorises in `source`."""
    src = tmp_path / "loops.cpp"
    src.write_text(source)
    r = subprocess.run(["g++", "-std=c++20", "-O3", f"-march={march}", f"-I{INCLUDE}", "-c", str(src),
                        "-o", str(tmp_path / "loops.o"), "-fopt-info-vec-optimized"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {int(m.group(1)) for m in re.finditer(r"loops\.cpp:(\d+):\d+: optimized: loop vectorized",
                                                 r.stdout + r.stderr)}


@pytest.mark.parametrize("march", ["x86-64", "haswell", "native"])
def test_math_functions_and_conversions_vectorise(tmp_path, march):
    vectorised = _vectorised_lines(tmp_path, _source(), march)
    names = FUNCTIONS + [f"convert<{dst}>({src})" for src, dst in CONVERSIONS]
    missed = [f for i, f in enumerate(names, start=2) if i not in vectorised]
    assert not missed, f"-march={march}: g++ did not vectorise the loops over {missed}"


@T.prim_func
def leaky_relu(X: T.Tensor((64, 256), "float32"), Z: T.Tensor((64, 256), "float32")):
    with T.Kernel(64) as bx:
        x = T.alloc_fragment((256,), "float32")
        T.copy(X[bx, 0:256], x)
        for i in T.Parallel(256):
            x[i] = T.where(x[i] > 0, x[i] * 2.0, x[i] * 0.01)
        T.copy(x, Z[bx, 0:256])


@pytest.mark.parametrize("march", ["x86-64", "haswell", "native"])
def test_generated_where_map_vectorises(tmp_path, march):
    k = tw.compile(leaky_relu, out_idx=[-1], target="cpu")
    a = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    np.testing.assert_array_equal(k(a), np.where(a > 0, a * np.float32(2), a * np.float32(0.01)))
    lines = k.get_source("c++").splitlines()
    at = next(i for i, line in enumerate(lines) if "= tw_select<float>(" in line)
    loop = max(i for i in range(at) if lines[i].lstrip().startswith("for ")) + 1  # 1-based
    assert loop in _vectorised_lines(tmp_path, "\n".join(lines) + "\n", march), \
        f"-march={march}: g++ did not vectorise the T.where map:\n" + "\n".join(lines[loop - 2:at + 1])


@pytest.mark.parametrize("march", ["x86-64", "haswell", "native"])
def test_generated_middle_axis_reduce_vectorises(tmp_path, march):
    """A reduce over a tile's first axis (the op zoo's sum / max over a middle axis) combines four
    rows into a row of accumulators per pass; that loop must be vectorised on every code path
    (max is a select, which g++ if-converts only without floating-point arithmetic in its arms)."""
    from test_cpu_reduce import reduce_mid
    for kind, op in (("sum", "tw_acc[tw_j] + tw_p0[tw_j]"), ("max", "tw_max(tw_max(tw_max(tw_max(tw_acc[tw_j], tw_p0[tw_j])")):
        lines = reduce_mid(5, 37, 301, kind, 64, "float32").get_source("c++").splitlines()
        at = next(i for i, line in enumerate(lines) if op in line and "tw_p3" in line) + 1  # 1-based
        assert at in _vectorised_lines(tmp_path, "\n".join(lines) + "\n", march), \
            f"-march={march}: g++ did not vectorise the {kind} over rows:\n" + lines[at - 1]


@pytest.mark.parametrize("march", ["x86-64", "haswell", "native"])
def test_generated_short_row_reduce_vectorises_across_rows(tmp_path, march):
    """Rows shorter than 16 (a narrow softmax) keep one accumulator per row and combine the rows
    column by column: the loop over the rows must be vectorised."""
    from test_cpu_reduce import row_reduce
    lines = row_reduce(3, "sum", "float32", block_M=64).get_source("c++").splitlines()
    at = next(i for i, line in enumerate(lines) if "tw_acc[tw_o] = tw_acc[tw_o] + " in line) + 1  # 1-based
    assert at in _vectorised_lines(tmp_path, "\n".join(lines) + "\n", march), \
        f"-march={march}: g++ did not vectorise the short rows' sum across rows:\n" + lines[at - 1]


@T.prim_func
def masked_scores(S: T.Tensor((128, 64), "float32"), Mask: T.Tensor((128, 64), "bool"),
                  Z: T.Tensor((128, 64), "float32")):
    # attention's mask map (examples/masked_attention.py): a bounds test `and` a bool mask tile
    with T.Kernel(2) as bx:
        s = T.alloc_fragment((64, 64), "float32")
        msk = T.alloc_fragment((64, 64), "bool")
        T.copy(S[bx * 64:(bx + 1) * 64, :], s)
        T.copy(Mask[bx * 64:(bx + 1) * 64, :], msk)
        for i, j in T.Parallel(64, 64):
            s[i, j] = T.where(j < 50 and msk[i, j], s[i, j] * 0.5, -1.0e30)
        T.copy(s, Z[bx * 64:(bx + 1) * 64, :])


@pytest.mark.parametrize("march", ["haswell", "native"])  # SSE2 (x86-64): g++ keeps it scalar
def test_generated_bool_mask_map_vectorises(tmp_path, march):
    """g++ has no vector type for bool loads and does not if-convert a load behind `&&`: the mask
    map of masked attention ran one score at a time (about half of the kernel's non-gemm time).
    Bool tiles are read as bytes (tw_cpu::load_bool) and `and` of operands that cannot fault is a
    plain `&`: the map must be vectorised with AVX2 and AVX-512."""
    k = tw.compile(masked_scores, out_idx=[-1], target="cpu")
    rng = np.random.default_rng(0)
    s = rng.standard_normal((128, 64)).astype(np.float32)
    m = rng.random((128, 64)) < 0.6
    vis = m & (np.arange(64) < 50)[None, :]
    np.testing.assert_array_equal(k(s, m), np.where(vis, s * np.float32(0.5), np.float32(-1.0e30)))
    lines = k.get_source("c++").splitlines()
    at = next(i for i, line in enumerate(lines) if "tw_cpu::load_bool(" in line and " & " in line)
    loop = max(i for i in range(at) if lines[i].lstrip().startswith("for ")) + 1  # 1-based
    assert loop in _vectorised_lines(tmp_path, "\n".join(lines) + "\n", march), \
        f"-march={march}: g++ did not vectorise the mask map:\n" + "\n".join(lines[loop - 2:at + 2])
