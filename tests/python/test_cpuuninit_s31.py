"""Session 31 (h-cpuuninit, issue 13): on cpu a tile is a stack array, so an element no statement
wrote carried whatever the stack held out of the kernel (hunt29 F2: 1.8e3, 5.8e-36, 0), with no
report. Checked mode (TW_BOUNDS_CHECK=1) now keeps a written flag per tile element and reports an
`uninitialised read` where an unwritten element leaves its block: copied or stored into a global
tensor, used as an index (docs/testing.md "Session 31: unwritten elements in checked mode"). The
ascend910b simulator reports the same programs (session 30, h-uninit): a differential test.

Checked mode is read once per process: the cpu cases run in one child (CHILD below), the parent
compares. One small shape per property. Tolerances: float32 1e-5 / 1e-5 against float64 numpy
(a multiply-add per element); the gemm (float32 operands holding small integers) is exact."""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tw_test_util import checked_cpu_results, marked_line, run_checked_child  # noqa: E402
from test_uninit_s30 import rope_no_guard  # noqa: E402  (examples/rope.py without its even-dim guard)

UNINIT30 = str(HERE / "test_uninit_s30.py")

THIS = str(pathlib.Path(__file__).resolve())


@tw.jit(out_idx=[-1])
def part_written(M, N, W, clear):
    """Columns [0, W) of y written; `clear`: y zero-filled first."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            if clear:
                T.clear(y)
            for i, j in T.Parallel(M, W):
                y[i, j] = x[i, j] * 2.0 + 1.0
            T.copy(y, Y)  # cpuuninit-part

    return main


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


@tw.jit(out_idx=[-1])
def pipelined_sum(M, K, block_M=8, block_K=16):
    """Y[i] = sum_k X[i, k]: one staging tile reused by every step of a Pipelined loop (its tail
    step's copy zero-fills the columns past K), the accumulator cleared before the loop."""

    @T.prim_func
    def main(X: T.Tensor((M, K), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            a = T.alloc_shared((block_M, block_K), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            acc = T.alloc_fragment((block_M,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[bx * block_M, k * block_K], a)
                T.reduce_sum(a, part, dim=1)
                for i in T.Parallel(block_M):
                    acc[i] = acc[i] + part[i]
            T.copy(acc, Y[bx * block_M])

    return main


@tw.jit(out_idx=[-1])
def gemm_no_clear(M, N, K, block_M=16, block_N=16):
    """C = A @ B: one K step; the accumulator is never cleared, the gemm overwrites it (clear_accum)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            a = T.alloc_shared((block_M, K), "float32")
            b = T.alloc_shared((K, block_N), "float32")
            c = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(A[by * block_M, 0], a)
            T.copy(B[0, bx * block_N], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C[by * block_M, bx * block_N])

    return main


@tw.jit(out_idx=[-1])
def gather_part_index(N):
    """Y[i] = X[idx[i]] with idx's last element never written: an unwritten index."""

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), I: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            idx = T.alloc_fragment((N,), "int32")
            for i in T.Parallel(N - 1):
                idx[i] = I[i]
            for i in T.Parallel(N):
                Y[i] = X[idx[i]]  # cpuuninit-index

    return main


def _rng(seed):
    return np.random.default_rng(seed)


def cases():
    """name -> (kernel factory (target -> kernel), inputs, float64 reference or None: a report)."""
    x17 = _rng(1).standard_normal((8, 17)).astype(np.float32)
    cs = _rng(2).standard_normal((8, 8)).astype(np.float32)
    x49 = _rng(3).standard_normal((4, 9)).astype(np.float32)
    x1321 = _rng(4).standard_normal((13, 21)).astype(np.float32)
    x1337 = _rng(5).standard_normal((13, 37)).astype(np.float32)
    a = _rng(6).integers(-3, 4, (21, 8)).astype(np.float32)
    b = _rng(7).integers(-3, 4, (8, 19)).astype(np.float32)
    clear_ref = np.zeros((4, 9))
    clear_ref[:, :7] = x49[:, :7].astype(np.float64) * 2.0 + 1.0
    return {
        "rope17": (lambda t: rope_no_guard(8, 17, target=t), (x17, cs, cs), None),
        "part": (lambda t: part_written(4, 9, 7, False, target=t), (x49,), None),
        "clear_part": (lambda t: part_written(4, 9, 7, True, target=t), (x49,), clear_ref),
        "tail": (lambda t: scale_tail(13, 21, target=t), (x1321,), x1321.astype(np.float64) * 3.0 + 1.0),
        "pipelined": (lambda t: pipelined_sum(13, 37, target=t), (x1337,), x1337.astype(np.float64).sum(axis=1)),
        "gemm_tail": (lambda t: gemm_no_clear(21, 19, 8, target=t), (a, b), a.astype(np.float64) @ b),
        "index": (lambda t: gather_part_index(5, target=t),
                  (np.arange(5, dtype=np.float32), np.array([4, 3, 2, 1, 0], np.int32)), None),
    }


def child_main(out_path):
    """The cpu side, run with TW_BOUNDS_CHECK=1: each case's output or report, as JSON."""
    checked_cpu_results(cases(), out_path)


@pytest.fixture(scope="module")
def cpu_checked(tmp_path_factory):
    return run_checked_child("test_cpuuninit_s31", tmp_path_factory.mktemp("cpuuninit"))


def _reported(r, marker, *parts, path=THIS):
    assert r["error"] is not None, r
    assert (r["file"], r["line"]) == (path, marked_line(path, marker)[0]), r
    text = r["error"] + " | " + r["hint"]
    for p in ("uninitialised read",) + parts:
        assert p in text, text


def test_rope_odd_dim_unwritten_column_is_reported_on_cpu(cpu_checked):
    # dim 17: the rotation writes columns 0..15 of y; column 16 is copied out unwritten
    _reported(cpu_checked["rope17"], "uninit-rope", "element [0, 16] of tile 'y'", "copied out to tensor 'Y'",
              "write every element of y before it leaves the block", path=UNINIT30)


def test_partly_written_tile_copied_out_names_the_element(cpu_checked):
    _reported(cpu_checked["part"], "cpuuninit-part", "element [0, 7] of tile 'y'", "copied out to tensor 'Y'",
              "T.clear / T.fill the tile first")


def test_unwritten_index_is_reported(cpu_checked):
    _reported(cpu_checked["index"], "cpuuninit-index", "element [4] of tile 'idx'", "read as an index")


@pytest.mark.parametrize("name", ["clear_part", "tail", "pipelined", "gemm_tail"])
def test_written_tiles_are_not_reported(cpu_checked, name):
    # a cleared then partly written tile, tail blocks (rows and columns), a Pipelined loop reusing its
    # staging tile, a gemm overwriting an uncleared accumulator with row and column tails
    assert cpu_checked[name] == {"error": None, "close": True}


@pytest.mark.parametrize("name", ["rope17", "part", "clear_part", "tail", "pipelined"])
def test_ascend910b_reports_the_same_programs(cpu_checked, name):
    # the simulator with its checker (timing-only: its reports, no values); cpu reported iff it does
    make, inputs, _ = cases()[name]
    prof = make("ascend910b").profile(*inputs, functional=False)
    uninit = [r for r in prof["reports"] if "uninitialised read" in r]
    assert bool(uninit) == (cpu_checked[name]["error"] is not None), (prof["reports"], cpu_checked[name])
    assert len(uninit) == len(prof["reports"]), prof["reports"]
