"""Smoke test of the benchmark harness (bench/run.py): a --quick run of a few cases on one thread
exits 0 and writes JSON with the keys docs/performance.md and the lead's tooling read."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_bench_quick_smoke(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ)
    # the suite's cache (tw_test_util.suite_cache_dir): what the suite compiled is not compiled again
    from tw_test_util import suite_cache_dir
    env["TW_CACHE_DIR"] = suite_cache_dir(tmp_path)
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--threads", "1",
         "--cases", "gemm_fp32_256,softmax,call_overhead", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"bench/run.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert "## Goals" in r.stdout and "gemm_fp32_256" in r.stdout

    data = json.loads(out.read_text())
    for key in ("version", "timestamp", "quick", "host", "peaks", "children", "cases", "goals", "ok"):
        assert key in data, key
    assert data["quick"] is True and data["ok"] is True
    assert data["peaks"]["fma_gflops"]["1"] > 0 and data["peaks"]["copy_gbs"]["1"] > 0
    # the FMA loop's accumulators fit in the registers (12 ymm with AVX2, 24 zmm with AVX-512)
    assert data["peaks"]["fma_accumulators"] == {"avx512": 24, "avx2": 12, "scalar": 12}[data["peaks"]["isa"]]
    assert data["peaks"]["core_ghz"] > 0 and data["peaks"]["fma_flops_per_cycle"]["1"] > 0
    child = data["children"]["1"]
    assert child["tilewright_threads"] == 1 and child["error"] is None

    names = {c["name"] for c in data["cases"]}
    assert {"gemm_fp32_256", "softmax_512x1024", "call_overhead"} <= names
    for c in data["cases"]:
        assert c["threads"] == 1
        assert c["check"]["ok"] is True
        assert c["tilewright"]["median_s"] > 0 and c["tilewright"]["rate"] > 0
        assert c["ratios"]["numpy"] > 0
        assert c["goals"], c["name"]
    for g in data["goals"]:
        assert {"goal", "case", "threads", "measured", "target", "met"} <= set(g)
        assert g["met"] in (True, False, None)

    # the memory-bound case's % of copy is against the copy loop timed in its own rounds (the
    # stores that won the session probe), the session probe's figure kept beside it
    sm = next(c for c in data["cases"] if c["name"] == "softmax_512x1024")
    ci = sm["copy_interleaved"]
    nt_won = data["peaks"]["copy_gbs_streaming_stores"]["1"] >= data["peaks"]["copy_gbs_regular_stores"]["1"]
    assert ci["stores"] == ("streaming" if nt_won else "regular")
    assert ci["array_bytes"] == sm["work"] / 2 and ci["reps"] == sm["tilewright"]["reps"]
    assert 0 < ci["min_s"] <= ci["median_s"] and ci["rate"] == pytest.approx(sm["work"] / ci["median_s"] / 1e9)
    assert sm["pct_copy_interleaved"] == pytest.approx(100 * sm["tilewright"]["rate"] / ci["rate"])
    assert sm["pct_copy_interleaved_min"] > 0 and "copy" not in sm["peers"] and "copy" not in sm["ratios"]
    assert sm["pct_peak"] == pytest.approx(100 * sm["tilewright"]["rate"] / data["peaks"]["copy_gbs"]["1"])
    (goal,) = [g for g in data["goals"] if g["case"] == "softmax_512x1024"]
    assert goal["measured"].startswith(f"{sm['pct_copy_interleaved']:.0f}% of the interleaved copy")
    assert goal["met"] == (sm["pct_copy_interleaved"] >= 70.0)
    assert "% copy now" in r.stdout


def _bench_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import run
    finally:
        sys.path.pop(0)
    return run


def test_copy_probe_copies_and_times_one_pass():
    """bench/peaks.cpp's copy probe (the interleaved reference): one pass copies every element, on
    1 and 2 threads, and reports a positive time; the session probe's figure comes from it."""
    import ctypes
    import numpy as np
    run = _bench_module()
    lib = run.build_peaks()
    for threads in (1, 2):
        p = lib.tw_copy_probe_new(threads, 1 << 20)
        assert p
        try:
            n = int(lib.tw_copy_probe_bytes(p) / 2 / 4)
            assert n == (1 << 18) // (64 * threads) * (64 * threads)
            for nt in (0, 1):
                assert lib.tw_copy_probe_run(p, nt) > 0
                cp = ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p))  # CopyProbe {int; size_t; float*; float*}
                src = np.ctypeslib.as_array(ctypes.cast(cp[2], ctypes.POINTER(ctypes.c_float)), (n,))
                dst = np.ctypeslib.as_array(ctypes.cast(cp[3], ctypes.POINTER(ctypes.c_float)), (n,))
                assert np.array_equal(src, (np.arange(n) & 1023).astype(np.float32))
                assert np.array_equal(dst, src)
                dst[:] = -1
        finally:
            lib.tw_copy_probe_free(p)
    assert lib.tw_peak_copy_gbs(2, float(1 << 20), 1, 2) > 0


def test_copy_goal_reads_the_interleaved_copy():
    """The rows / paged_bw goal text and verdict: against the interleaved copy's median rate, the
    session probe's percentage beside it; paged decode's goal is for 2 threads only."""
    run = _bench_module()
    case = dict(group="rowwise", threads=2, check=dict(ok=True), tilewright=dict(rate=35.0),
                copy_interleaved=dict(rate=50.0), pct_copy_interleaved=70.0)
    text, met = run.copy_goal(case, 56.0)
    assert met is True and text == "70% of the interleaved copy (35.0 of 50.0 GB/s; 62% of the session probe's 56.0)"
    assert run.copy_goal(dict(case, pct_copy_interleaved=69.9), 56.0)[1] is False
    assert run.copy_goal(dict(case, check=dict(ok=False)), 56.0)[1] is False
    assert run.copy_goal(dict(case, group="paged", threads=1), 56.0)[1] is None
    assert run.copy_goal(dict(case, group="paged"), 56.0)[1] is True


def test_ascend_bench_quick(tmp_path):
    """bench/ascend.py --quick: the automatic pipeline beside the expert kernels (simulated)."""
    out = tmp_path / "ascend.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "ascend.py"), "--quick", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"bench/ascend.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    rows = {row["case"]: row for row in json.loads(out.read_text())["rows"]}
    gemm = rows["gemm 2048^3, Cube utilisation (128/256/64)"]
    assert 0 < gemm["automatic"] <= 100 and 0 < gemm["expert"] <= 100
    assert any(c.startswith("flash attn S=2048") for c in rows)
    moe = rows["moe grouped gemm 1024x1024x2048 e8 top2, Cube util"]  # issue 13's case, quick size
    assert 0 < moe["automatic"] <= 100
    times = rows["moe 1024x1024x2048 times"]
    assert times["gather_rows_us"] > 0 and times["grouped_gemm_us"] > 0


def test_bench_cpu_arch_sets_everyone_on_the_same_instruction_set(monkeypatch):
    # --cpu-arch ARCH: TW_CPU_ARCH for us; without AVX-512 in ARCH, the peers' AVX2 kernels too
    run = _bench_module()
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")   # the caller's settings do not leak in
    monkeypatch.setenv("TW_CPU_ARCH", "haswell")
    monkeypatch.setattr(run, "CPU_ARCH", None)
    env = run.peer_env(2)
    assert "TW_CPU_ARCH" not in env and "OPENBLAS_CORETYPE" not in env and env["TW_NUM_THREADS"] == "2"
    assert run.cpu_arch_env("native") == {}
    monkeypatch.setattr(run, "CPU_ARCH", "x86-64-v3")
    env = run.peer_env(1)
    assert env["TW_CPU_ARCH"] == "x86-64-v3" and env["OPENBLAS_CORETYPE"] == "Haswell"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    # numpy's own ufuncs leave their AVX-512 dispatch targets (names of this numpy build)
    from numpy._core._multiarray_umath import __cpu_dispatch__
    off = env["NPY_DISABLE_CPU_FEATURES"].split()
    assert set(off) == {t for t in __cpu_dispatch__ if t == "X86_V4" or t.startswith("AVX512")}
    assert not any(t in off for t in ("X86_V3", "X86_V2"))
    assert "PROXY" in run.cpu_arch_note("x86-64-v3") and "Zen 3" in run.cpu_arch_note("x86-64-v3")
    # an AVX-512 target keeps the peers at their best
    assert run.cpu_arch_env("skylake-avx512") == {"TW_CPU_ARCH": "skylake-avx512"}


def test_mask_patterns_are_the_example_masks():
    """bench/run.py's masked prefill masks: the window and causal ones are the example's
    `visibility`; random and block-sparse keep their fractions; the same rng gives the same mask."""
    import numpy as np
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "examples")]
    try:
        import masked_attention as ma
        import run
    finally:
        del sys.path[:2]
    S = 300
    assert np.array_equal(run.mask_pattern(np, None, "window", S), ma.visibility(S, S, causal=True, window=256))
    assert np.array_equal(run.mask_pattern(np, None, "causal", S), ma.visibility(S, S, causal=True))
    rnd = run.mask_pattern(np, np.random.default_rng(1), "random", S)
    assert rnd.shape == (S, S) and abs(rnd.mean() - 0.7) < 0.01
    assert np.array_equal(rnd, run.mask_pattern(np, np.random.default_rng(1), "random", S))
    bs = run.mask_pattern(np, np.random.default_rng(2), "blocksparse", S, 64, 64)
    assert bs.shape == (S, S) and bs[:64, :64].all() and bs[256:, 256:].all()  # the diagonal blocks
    blocks = bs[:256, :256].reshape(4, 64, 4, 64)
    assert np.array_equal(blocks.all(axis=(1, 3)), blocks.any(axis=(1, 3)))  # whole blocks only


def test_masked_ceiling_small():
    """bench/masked_ceiling.py at a small size: every pattern's output checked against float64,
    the block classes counted, and the ceilings ordered (a finer grain computes less)."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "masked_ceiling.py"), "--seq", "320", "--rounds", "1",
                        "--patterns", "window,random,causal,blocksparse"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"bench/masked_ceiling.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    out = r.stdout
    errs = [float(line.rsplit(" ", 1)[1]) for line in out.splitlines() if "error vs float64" in line]
    assert len(errs) == 4 and max(errs) < 1e-5, out
    window = out.split("\nwindow:")[1].split("\nrandom:")[0]
    # 5 query blocks: diagonal blocks partial, and query block 4's first key block (the far edge)
    assert "blocks 0 / 1 / 2 per head 10 / 6 / 9" in window
    cover = [float(line.split(": ")[1].split(" of")[0]) for line in window.splitlines() if "sub-tiles skipped" in line]
    assert cover == sorted(cover, reverse=True) and cover[0] == 0.75 and cover[1] == 0.625, window


@pytest.mark.skipif(not (pathlib.Path("/proc/cpuinfo").exists() and " avx512f" in pathlib.Path("/proc/cpuinfo").read_text()),
                    reason="bench/paged_decode_ab.cpp reads with AVX-512 vectors")
def test_paged_decode_ab_checks_every_variant():
    """bench/paged_decode_ab.py, one round on pages in L2: it runs, and every variant's output is
    checked against float64 attention over the same pages (bf16 output: a few bf16 ulps of values
    below 1) and against the first variant's (the same runtime twice: identical)."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "paged_decode_ab.py"), "a=src/target/cpu/include",
                        "b=src/target/cpu/include", "--dtype", "bfloat16", "--threads", "2", "--rounds", "1",
                        "--pages", "hot"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"bench/paged_decode_ab.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    checks = [line for line in r.stdout.splitlines() if "max error vs float64" in line]
    assert len(checks) == 2, r.stdout
    for line in checks:
        err = float(line.split("vs float64 ")[1].split(",")[0])
        same = float(line.rsplit(" ", 1)[1])
        assert err < 1e-2 and same == 0.0, r.stdout
    assert "probe: the kernel's read order" in r.stdout and "stream: the same bytes" in r.stdout


@pytest.mark.skipif(not (pathlib.Path("/proc/cpuinfo").exists() and " avx512f" in pathlib.Path("/proc/cpuinfo").read_text()),
                    reason="bench/paged_decode_ab.cpp reads with AVX-512 vectors")
def test_paged_decode_ab_sorted_pages():
    """bench/paged_decode_ab.py --pages sorted (session 25): each sequence's pages in ascending memory
    order; the kernel's output on that block table is checked against float64 attention over the
    same pages."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "paged_decode_ab.py"), "a=src/target/cpu/include",
                        "--dtype", "float32", "--threads", "1", "--rounds", "1", "--pages", "sorted"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"bench/paged_decode_ab.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert "pages sorted" in r.stdout, r.stdout
    checks = [line for line in r.stdout.splitlines() if "max error vs float64" in line]
    assert len(checks) == 1, r.stdout
    err = float(checks[0].split("vs float64 ")[1].split(",")[0])
    assert err < 1e-5, r.stdout
