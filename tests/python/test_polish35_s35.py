"""polish35 (session 35): small user-facing fixes left by session 35's helpers.

1. hunt35 F3's remainder: postponed annotations (`from __future__ import annotations`) of a
   TILE-LOOPS kernel name the defining factory's locals (h-hunt35 fixed @T.prim_func only).
2. The autotune summary names each estimate (roofline vs the simulator's timing model) and prints the
   roofline bound with a percentage that is not rounded to "0%".
3. examples/moe.py's combine_atomic returns its output (out_idx): calls do not accumulate.
"""
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
from tilewright.testing import assert_close

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))

ASC = "ascend910b"

# --------------------------------------------------------------------------- 1: tile-loops postponed annotations
# The module is written twice, with and without the future import: Python evaluates the annotations at the
# definition without it, and leaves them as strings for Tilewright's front end with it. The globals named like
# the factory's locals must not be what the annotations see.
COPY_ROWS_BODY = '''        out = tw.output((N, 8), dtype="float16")
        for by in range(N // 4):
            t = tw.load(A, (by * 4, 0), (4, 8))
            tw.store(out, (by * 4, 0), t)
        return out
'''
TILE_LOOPS_FACTORIES = '''
import tilewright as tw

shape = "a global the annotations must not see"
dtype = "a global the annotations must not see"
M = 4


def compiled(N, dtype="float32", target="cpu"):
    shape = (N, 8)  # used only in the annotation: no closure cell

    @tw.compile(target=target)
    def copy_rows(A: tw.Tensor(shape, dtype)):
{body}
    return copy_rows


@tw.jit
def jitted(N, dtype="float32"):
    def copy_rows(A: tw.Tensor((N, 8), dtype)):  # dtype: the factory's parameter, only in the annotation
{body}
    return copy_rows


@tw.jit
def jitted_derived(N):
    rows = (N, 8)  # a derived local: gone when the returned function is parsed

    def copy_rows(A: tw.Tensor(rows, "float16")):
{body}
    return copy_rows


def module_level(A: tw.Tensor((M, 8), "float16")):  # M: the module's global, whoever compiles it
    out = tw.output((M, 8), dtype="float16")
    t = tw.load(A, (0, 0), (M, 8))
    tw.store(out, (0, 0), t)
    return out
'''.replace("{body}\n", COPY_ROWS_BODY)


def _load(tmp_path, postponed):
    name = f"tw_polish35_tile_loops_{int(postponed)}"
    path = tmp_path / f"{name}.py"
    path.write_text(("from __future__ import annotations\n" if postponed else "") + TILE_LOOPS_FACTORIES)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(kernel, *inputs):
    if kernel.target == "cpu":
        return kernel(*inputs)
    prof = kernel.profile(*inputs)
    assert prof["reports"] == []
    return prof.outputs


@pytest.mark.parametrize("postponed", [True, False], ids=["future-annotations", "eager"])
def test_tile_loops_annotations_name_factory_locals(tmp_path, postponed):
    mod = _load(tmp_path, postponed)
    a = (np.arange(12 * 8) % 251).astype(np.float16).reshape(12, 8)
    targets = ["cpu", ASC] if postponed else [ASC]  # the front end's fix: cpu compiled once
    for target in targets:
        out = _run(mod.compiled(12, "float16", target=target), a)
        assert out.dtype == np.float16 and np.array_equal(out, a)
    assert np.array_equal(_run(mod.jitted(12, "float16", target=ASC), a), a)
    # tw.compile elsewhere of a module-level kernel: its annotations see the module, not the caller's M
    M = 2  # noqa: F841 - the caller's local that must not be seen
    assert np.array_equal(_run(tw.compile(mod.module_level, target=ASC), a[:4]), a[:4])
    if not postponed:
        assert np.array_equal(_run(mod.jitted_derived(12, target=ASC), a), a)
        return
    # a derived local of a @tw.jit factory is gone when its tile-loops function is parsed: the error says so
    with pytest.raises(tw.TilewrightError) as e:
        mod.jitted_derived(12, target=ASC)
    line = 1 + (tmp_path / "tw_polish35_tile_loops_1.py").read_text().splitlines().index(
        '    def copy_rows(A: tw.Tensor(rows, "float16")):')
    assert "name 'rows' is not defined" in e.value.message and e.value.line == line
    assert "only its parameters" in e.value.hint and "tw.Tensor((N, 8), dtype)" in e.value.hint


# --------------------------------------------------------------------------- 2: the autotune summary's figures
# On ascend910b the per-configuration estimate is the simulator's timing model (it equals the simulated time),
# which the progress lines called a "roofline estimate" while the summary printed "0% of its roofline bound"
# (a bound of 0.02 us against 10.7 us, rounded to a whole percent). Each figure is now named for what it is and
# the summary prints the bound and a percentage with two significant digits.
def _tune_add_one(monkeypatch, tmp_path, capsys, target):
    import sys
    import tune_kernels
    at = sys.modules["tilewright.autotune"]
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")
    monkeypatch.setattr(at, "machine_peaks", lambda refresh=False: {"flops": 5e10, "bytes_per_s": 2e10})
    tuner = tw.autotune(configs=[tw.Config(block=256)], key=["n"], executor="inline", warmup=1, rep=3)(
        tune_kernels.add_one.fn)
    tuner.tune(4096, target=target)
    (best,) = tuner.report
    return tuner, best, capsys.readouterr().err


@pytest.mark.parametrize("target", ["cpu", ASC])
def test_autotune_summary_names_each_estimate(monkeypatch, tmp_path, capsys, target):
    import re
    tuner, best, err = _tune_add_one(monkeypatch, tmp_path, capsys, target)
    line = next(s for s in err.splitlines() if s.strip().startswith("[1/1]"))
    name = "roofline estimate" if target == "cpu" else "timing-model estimate"
    assert f"({name} " in line and ("roofline" not in line) == (target != "cpu")
    rf = best["roofline"]
    assert rf["flops"] == 0 and rf["bytes"] == 2 * 4096 * 4 and rf["limit"] == "memory"
    # the summary: no FLOP/s for a kernel without gemm work; the bound in us; the percentage is bound / time
    m = re.fullmatch(r"([0-9.e+-]+)% of its roofline bound of ([0-9.e+-]+) us \(memory-bound: 0 FLOP, 32 KiB in/out, "
                     r"32 KiB of tile copies; peaks (.*)", tuner.roofline)
    assert m, tuner.roofline
    pct, bound_us = float(m.group(1)), float(m.group(2))
    assert bound_us == pytest.approx(rf["bound_s"] * 1e6, rel=5e-3) and rf["bound_s"] > 0
    assert pct == pytest.approx(100 * rf["bound_s"] / (best["ms"] * 1e-3), rel=5e-2) and pct > 0
    if target == "cpu":  # the peaks given: 8 bytes per element at 20 GB/s
        assert bound_us == pytest.approx(32768 / 2e10 * 1e6, rel=5e-3) and m.group(3).startswith("50 GFLOP/s, 20 GB/s)")
    else:
        assert m.group(3).startswith("354 TFLOP/s, 1.6 TB/s, cache 7 TB/s)")
    assert f"best: block=256: {best['ms']:.4f} ms" in err and tuner.roofline in err


# --------------------------------------------------------------------------- 3: MoE's scatter-add combine
# combine_atomic takes its output by out_idx (an output only T.atomic_add writes starts at zero: h-api35), the
# way a user writes it now: no zeroed array passed in, and a second call gives the same result (nothing
# accumulates across calls), on cpu and ascend910b against float64 and each other. Slots are any distinct rows
# (the combine does not depend on the routing), tokens 7 with top-2 over 16 rows, ffn 33 (a tail of block_N 16).
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_moe_scatter_add_combine_returns_its_output(dtype):
    import moe
    rng = np.random.default_rng(35)
    tokens, top_k, n_rows, ffn = 7, 2, 16, 33
    y = rng.standard_normal((n_rows, ffn)).astype(np.float32)
    slot = rng.permutation(n_rows)[:tokens * top_k].reshape(tokens, top_k).astype(np.int32)
    weights = rng.random((tokens, top_k)).astype(np.float32)
    ref = sum(weights[:, k:k + 1].astype(np.float64) * y[slot[:, k]].astype(np.float64) for k in range(top_k))
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == "float32" else dict(atol=2e-3 * top_k, rtol=2e-3 * top_k)
    got = {}
    for target in ("cpu", ASC):
        kernel = moe.combine_atomic(tokens, ffn, top_k, n_rows, block_N=16, dtype=dtype, target=target)
        outs = [_run(kernel, y, slot, weights) for _ in range(2)]
        for out in outs:
            assert out.dtype == np.dtype(dtype) and out.shape == (tokens, ffn)
            assert_close(out, ref, **tol)
        assert_close(outs[1], outs[0], **tol)  # the second call did not add to the first
        got[target] = outs[0]
    assert_close(got["cpu"], got[ASC], **tol)
