"""The Ascend targets end to end, in the 910B simulator: the three expert-mode examples (GEMM,
vector softmax, Cube+Vector matmul + bias + GELU) against numpy with zero checker reports; the
corpus of broken kernels (each report or error kind, its message and the kernel source line it
names); the profile, the trace, timing-only mode, the AscendC output; simulator speed figures
(printed, not asserted).

Source lines are found with marker comments (``# @NAME`` on a line of this file).
Simulated figures are a model's, not measurements on an NPU."""
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

THIS_FILE = __file__
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "ascend")

from tw_test_util import load_example, marked_line  # noqa: E402
TARGET = "ascend910b"


def where(marker):
    """Line number of the line of this file with the comment `# @marker`."""
    return marked_line(THIS_FILE, "@" + marker)[0]


def example(name):
    return load_example("ascend/" + name, name)


@pytest.fixture(scope="module")
def gemm():
    return example("gemm_expert")


@pytest.fixture(scope="module")
def softmax():
    return example("softmax_expert")


@pytest.fixture(scope="module")
def mixed():
    return example("matmul_gelu_expert")


def compile_npu(prim):
    return tw.compile(prim, out_idx=[-1], target=TARGET)


def within(got, ref, atol, rtol):
    got = np.asarray(got).astype(np.float64)
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= atol + rtol * np.abs(ref)))


# ---------------------------------------------------------------------------------------------
# The expert examples at small odd sizes: right results, nothing for the checker to report

@pytest.mark.parametrize("M,N,K", [(65, 97, 130), (200, 300, 513)])
def test_gemm_expert(gemm, M, N, K):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    p = gemm.matmul(M, N, K).profile(a, b)
    assert p["reports"] == []
    assert within(p.outputs, a.astype(np.float64) @ b.astype(np.float64), 1e-5 * K, 2e-3)


@pytest.mark.parametrize("M,N", [(37, 300), (70, 64), (3, 2), (100, 1027)])
def test_softmax_expert(softmax, M, N):
    x = (np.random.default_rng(1).standard_normal((M, N)) * 3).astype(np.float32)
    p = softmax.softmax(M, N).profile(x)
    assert p["reports"] == []
    assert p["kernel_type"] == "MIX_1_2" and p["aiv_used"] == 2 * p["blocks"]   # both AIVs of each block
    assert within(p.outputs, softmax.reference(x), 1e-6, 1e-5)


@pytest.mark.parametrize("M,N,K,tiles", [
    (129, 257, 300, {}),
    (50, 33, 17, {}),                                   # the second AIV's rows are all beyond M
    (300, 301, 77, {"core_num": 2}),                    # 9 tiles on 2 blocks: both slots reused
    (512, 640, 31, {"core_num": 1}),                    # 20 tiles, one block: > 15 cross-core sets per id
])
def test_matmul_gelu_expert(mixed, M, N, K, tiles):
    a, b, bias, w = mixed.inputs(M, N, K, **tiles)
    p = mixed.matmul_gelu(M, N, K, **tiles).profile(a, b, bias, w)
    assert p["reports"] == []
    assert p["kernel_type"] == "MIX_1_2"
    assert within(p.outputs, mixed.reference(a, b, bias), 2e-3, 2e-3)
    # the tanh form vs the exact erf GELU: <= 4.8e-4 plus the fp16 output rounding
    x = a.astype(np.float64) @ b.astype(np.float64) + bias
    assert within(p.outputs, mixed.gelu_erf(x), 2e-3 + 4.8e-4, 2e-3)


@pytest.mark.parametrize("script,args", [("gemm_expert", ["33", "65", "47"]), ("softmax_expert", ["19", "77"]),
                                         ("matmul_gelu_expert", ["65", "63", "33"])])
def test_examples_run_as_scripts(script, args):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script + ".py"), *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("OK")


# ---------------------------------------------------------------------------------------------
# Broken kernels: each problem is reported with its kind, a clear message and the source line

X16 = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)


def only_kind(reports, kind, marker):
    """Every report is of `kind` and names the marked line of this file first."""
    assert reports, "expected a report"
    head = f"{THIS_FILE}:{where(marker)}: {kind}: "
    for r in reports:
        assert r.startswith(head), r
    return reports[0]


def test_missing_flag_is_a_race_even_when_timing_hid_it():
    @T.prim_func
    def missing_flag(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            w = T.alloc_UB((64, 256), "float32")
            with T.Scope("V"):
                row = vid * 8
                T.copy(X[row, 0], a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.exp(a, a)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(a, Y[row, 0])  # @RACE_READ
                T.fill(w, 1.0)
                T.pipe_barrier("V")
                T.exp(w, w)             # long enough that the write below lands after the copy
                T.pipe_barrier("V")
                T.fill(a, 0.0)  # @RACE_WRITE
    k = compile_npu(missing_flag)
    p = k.profile(X16)
    # the simulated timing ordered the two accesses: the output is right ...
    assert np.allclose(p.outputs, np.exp(X16), rtol=1e-6)
    # ... and the checker still reports the missing MTE3 -> V flag, once per AIV
    assert len(p["reports"]) == 2
    r = only_kind(p["reports"], "race", "RACE_WRITE")
    assert "writes AIV 0 UB bytes [0, 2048) read by MTE3" in r
    assert "add SetFlag<MTE3_V> after the first and WaitFlag<MTE3_V> before the second" in r
    assert f"with {THIS_FILE}:{where('RACE_READ')}" in r
    # calling the kernel raises, listing the reports, at the racing line
    with pytest.raises(TilewrightError) as e:
        k(X16)
    assert "the simulator found 2 problem(s) in kernel 'missing_flag'" in e.value.message
    assert e.value.file == THIS_FILE and e.value.line == where("RACE_WRITE")


def test_wrong_flag_pair_is_a_definition_error():
    with pytest.raises(TilewrightError) as e:
        @T.prim_func
        def wrong_pair(X: T.Tensor((16, 64), "float32")):
            with T.Kernel(1, is_npu=True) as cid:
                with T.Scope("C"):
                    T.set_flag("FIX", "MTE2", 0)  # @PAIR
    assert "FIX -> MTE2 is not a flag pair of the Cube core (AIC)" in e.value.message, e.value.message
    assert e.value.file == THIS_FILE and e.value.line == where("PAIR")
    assert "FIX->{M,MTE1}" in e.value.hint, e.value.hint


def test_ub_overflow_is_a_compile_error_naming_buffers_and_a_smaller_tile():
    @T.prim_func
    def too_big(X: T.Tensor((256, 256), "float32"), Y: T.Tensor((256, 256), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((128, 256), "float32")  # @UB  (the error is at the first buffer of the memory)
            b = T.alloc_UB((128, 256), "float32")
            with T.Scope("V"):
                T.copy(X[0, 0], a)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.exp(b, a)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(b, Y[0, 0])
    with pytest.raises(TilewrightError) as e:
        compile_npu(too_big)
    m = e.value.message
    assert m.startswith("UB overflow: a (128x256 float32, 131072 B), b (128x256 float32, 131072 B) need 262144 B"), m
    assert "holds 196352 B" in m
    assert "a smaller tile that fits: a 64x256, b 64x256" in e.value.hint, e.value.hint
    assert e.value.file == THIS_FILE and e.value.line == where("UB")


def test_misaligned_ub_address():
    @T.prim_func
    def misaligned(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X[0, 0:8], a[0, 3:11])  # @MISALIGNED
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(a, Y[vid * 8, 0])
    p = compile_npu(misaligned).profile(X16)
    # the rejected copy writes nothing, so copying `a` out is also an `uninitialised read` (session 30)
    assert any("uninitialised read" in r and "tile a (UB)" in r for r in p["reports"]), p["reports"]
    r = only_kind([r for r in p["reports"] if "uninitialised read" not in r], "misaligned", "MISALIGNED")
    assert "destination address 12 in UB (buffer a (UB)) is not 32-byte aligned" in r, r


def test_out_of_bounds_copy():
    @T.prim_func
    def oob(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                # GM windows before or past the tensor are clipped (as on cpu; stores before column 0
                # at any start since session 17); a UB window past its tile is not
                T.copy(X[vid * 8, 0], a)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(a[vid * 4:vid * 4 + 8, :], Y[vid * 8, 0])  # @OOB  (AIV 1 reads rows 4 .. 11 of 8)
    p = compile_npu(oob).profile(X16)
    # the rejected copy writes nothing, so rows 8.. of Y are also an `unwritten output` (session 39)
    assert any("unwritten output: element [8, 0] of output 'Y'" in r for r in p["reports"]), p["reports"]
    r = only_kind([r for r in p["reports"] if "unwritten output" not in r], "out of bounds", "OOB")
    assert "source reads bytes [1024, 3072) of buffer a (UB), which has 2048 bytes" in r, r
    assert "AIV 1" in r


def test_cross_flag_overflow():
    @T.prim_func
    def no_handshake(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                for i in T.serial(20):
                    T.set_cross_flag(2, "FIX", 0)  # @XOVF
            with T.Scope("V"):
                for i in T.serial(20):
                    T.wait_cross_flag(0)
    # Y is written by no statement: an input here (an output never written is a compile error, api34 F18)
    p = tw.compile(no_handshake, target=TARGET).profile(X16, np.zeros_like(X16))
    r = only_kind(p["reports"], "cross-core flag overflow", "XOVF")
    assert "cross-core flag 0 of AIV 0 has 16 pending sets (at most 15; the hardware hangs)" in r, r
    assert "add a reverse handshake" in r


def test_deadlock():
    @T.prim_func
    def never_set(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_UB((8, 64), "float32")
            with T.Scope("V"):
                T.copy(X[vid * 8, 0], a)
                T.wait_flag("MTE2", "MTE3", 0)  # @DEADLOCK
                T.copy(a, Y[vid * 8, 0])
    p = compile_npu(never_set).profile(X16)
    r = only_kind(p["reports"], "deadlock", "DEADLOCK")
    assert "2 wait(s) can never be satisfied" in r, r
    assert f"AIV 1: MTE3 WaitFlag<MTE2_MTE3>(0)  (line {where('DEADLOCK')})" in r


# ---------------------------------------------------------------------------------------------
# Profile, trace, timing-only mode, AscendC output

def test_profile_fields(gemm):
    M, N, K = 256, 512, 512            # whole tiles: the counted flops are exactly 2MNK
    a = np.ones((M, K), np.float16)
    b = np.ones((K, N), np.float16)
    p = gemm.matmul(M, N, K).profile(a, b)
    assert p["reports"] == [] and np.all(p.outputs == K)
    assert 0 < p["cube_utilisation"] <= 1
    assert p["time_us"] > 0 and p["total_cycles"] > 0
    assert math.isclose(p["time_us"], p["total_cycles"] / p["clock_mhz"], rel_tol=1e-9)
    assert math.isclose(p["flops"], 2.0 * M * N * K)
    assert math.isclose(p["tflops"], 2.0 * M * N * K / (p["time_us"] * 1e-6) / 1e12, rel_tol=1e-6)
    assert p["tflops"] <= 353.9 * 1.0001                     # 910B2 peak
    for core in ("AIC", "AIV"):
        for pipe, pct in p["pipe_busy_pct"][core].items():
            assert 0 <= pct <= 100, (core, pipe, pct)
    assert p["pipe_busy_pct"]["AIC"]["M"] > 0
    assert "checker: no problems found" in p["summary"] and "(simulated)" in p["summary"]


def test_trace_json(mixed, tmp_path):
    M, N, K = 129, 257, 300
    k = mixed.matmul_gelu(M, N, K)
    path = tmp_path / "trace.json"
    p = k.trace(str(path), *mixed.inputs(M, N, K))
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(procs) == p["aic_used"] + p["aiv_used"]          # one process per core that ran
    assert sorted(n.split()[0] for n in procs.values()).count("AIC") == p["aic_used"]
    slices = [e for e in events if e["ph"] == "X"]
    assert slices
    used = {(e["pid"], e["tid"]) for e in slices}
    for e in slices:
        assert threads[(e["pid"], e["tid"])] == e["cat"]        # the track of that core x pipe
        assert e["dur"] >= 0 and e["ts"] >= 0
    names = {(procs[pid].split()[0], threads[(pid, tid)]) for pid, tid in used}
    for want in [("AIC", "MTE2"), ("AIC", "MTE1"), ("AIC", "M"), ("AIC", "FIX"), ("AIV", "MTE2"), ("AIV", "V"),
                 ("AIV", "MTE3")]:
        assert want in names, names
    assert len(set(threads.values())) <= 7                      # tracks: pipes S V M MTE1 MTE2 MTE3 FIX


def test_timing_only_mode_gives_the_same_cycles(gemm, softmax, mixed):
    runs = [
        (gemm.matmul(200, 300, 513), [np.ones((200, 513), np.float16), np.ones((513, 300), np.float16)]),
        (softmax.softmax(37, 300), [np.ones((37, 300), np.float32)]),
        (mixed.matmul_gelu(300, 301, 77, core_num=2), list(mixed.inputs(300, 301, 77, core_num=2))),
    ]
    for k, args in runs:
        full = k.profile(*args)
        fast = k.profile(*args, functional=False)
        fastest = k.profile(*args, functional=False, check=False)
        assert full["total_cycles"] == fast["total_cycles"] == fastest["total_cycles"] > 0
        assert fast["reports"] == []


def test_ascendc_source_of_the_mixed_kernel(mixed, tmp_path):
    k = mixed.matmul_gelu(129, 257, 300)
    src = k.get_source("ascendc")
    for want in ("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)", "Mmad(", "CrossCoreSetFlag<2, PIPE_FIX>(slot)",
                 "CrossCoreWaitFlag<", "Fixpipe", "if ASCEND_IS_AIC", "if ASCEND_IS_AIV"):
        assert want in src, want
    paths = k.write_ascendc_project(tmp_path / "proj")
    assert len(paths) == 4
    assert sorted(p.name for p in paths) == ["CMakeLists.txt", "README.md", "main.cpp", "main__kernel.cpp"]  # the C++ identifier of `main` is main_
    for p in paths:
        assert p.is_file() and p.stat().st_size > 0


def test_ascendc_source_of_the_vector_kernel(softmax):
    src = softmax.softmax(37, 300).get_source("ascendc")
    assert "KERNEL_TASK_TYPE_DEFAULT" in src and "WholeReduce" in src and "Exp(" in src


# ---------------------------------------------------------------------------------------------
# Simulator speed on this machine (printed, not asserted)

def test_simulator_speed_figures(gemm, capsys):
    lines = []
    for n, functional in ((1024, True), (8192, False)):
        a = np.ones((n, n), np.float16)
        b = np.ones((n, n), np.float16)
        k = gemm.matmul(n, n, n)
        t0 = time.perf_counter()
        p = k.profile(a, b, functional=functional, check=functional)
        dt = time.perf_counter() - t0
        assert p["reports"] == []
        if functional:
            assert np.all(p.outputs == n)
        mode = "functional + checked" if functional else "timing-only"
        lines.append(f"[ascend sim speed] {n}^3 fp16 gemm on 910B2, {mode}: {dt:.2f} s wall; simulated "
                     f"{p['total_cycles']} cycles = {p['time_us']:.1f} us, {p['tflops']:.1f} TFLOP/s, "
                     f"Cube utilisation {100 * p['cube_utilisation']:.1f}% (a model's figures)")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_ascendc_project_file_names_match_cmake(mixed, tmp_path):
    k = mixed.matmul_gelu(50, 33, 17)
    paths = k.write_ascendc_project(tmp_path)
    cmake = (tmp_path / "CMakeLists.txt").read_text()
    kernel_file = [p.name for p in paths if p.name.endswith("_kernel.cpp")][0]
    assert f"STATIC {kernel_file})" in cmake, cmake
