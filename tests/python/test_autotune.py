"""@tw.autotune: parallel compile on an Executor, capacity failures dropped with the reason,
roofline pruning, timing, the persisted best config (private files), the roofline report, and
`tilewright tune`."""
import concurrent.futures as cf
import os
import stat
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.autotune  # noqa: F401 - the module (tw.autotune is the decorator)

at = sys.modules["tilewright.autotune"]

import tune_kernels


@pytest.fixture
def fresh_tuner(monkeypatch, tmp_path):
    """A tuning store of our own (the tune dir is under the cache dir)."""
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")
    for t in (tune_kernels.add_one, tune_kernels.matmul):
        t._memory.clear()
    return tmp_path / "tune"


def test_cpu_sweep_drops_prunes_times_and_persists(fresh_tuner, capsys):
    tuner = tune_kernels.add_one
    k = tuner(1 << 16)  # spawned worker processes compile the configs
    x = tw.testing.randn((1 << 16,))
    tw.testing.assert_close(k(x), x + 1)
    status = {repr(r["config"]): r["status"] for r in tuner.report}
    # the same work and traffic whatever the block: nothing to prune, all timed
    assert set(status.values()) == {"timed"}
    err = capsys.readouterr().err
    assert "[1/4] block=64" in err and "best:" in err and "roofline bound" in err
    files = list(fresh_tuner.glob("*.json"))
    rec = [f for f in files if not f.name.startswith("peaks-")]
    assert len(rec) == 1 and stat.S_IMODE(rec[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(fresh_tuner.stat().st_mode) == 0o700
    # a new process (memory cleared) reuses the stored result without sweeping
    tuner._memory.clear()
    best = tuner.best_config
    tuner(1 << 16)
    assert tuner.best_config == best and "tuning" not in capsys.readouterr().err


def test_a_store_writable_by_others_is_evicted(fresh_tuner):
    tuner = tune_kernels.add_one
    tuner(4096, target="cpu")
    (rec,) = [f for f in fresh_tuner.glob("*.json") if not f.name.startswith("peaks-")]
    os.chmod(rec, 0o666)
    tuner._memory.clear()
    tuner(4096)
    assert stat.S_IMODE(rec.stat().st_mode) == 0o600  # re-tuned and rewritten


def test_roofline_pruning_on_cpu(fresh_tuner):
    # 512x512 tiles on a 64^3 matmul compute 64 times the useful flops: pruned before timing
    tuner = tw.autotune(configs=tune_kernels.matmul.configs, key=["M", "N", "K"], executor="inline",
                        verbose=False)(tune_kernels.matmul.fn)
    tuner.tune(64, 64, 64, dtype="float32")
    status = {repr(r["config"]): r for r in tuner.report}
    assert status["block_M=512 block_N=512"]["status"] == "pruned"
    assert "roofline estimate" in status["block_M=512 block_N=512"]["reason"]
    assert status["block_M=64 block_N=64"]["status"] == "timed"


def test_ascend_sweep_drops_capacity_failures_on_any_executor(fresh_tuner):
    with cf.ThreadPoolExecutor(2) as ex:
        tuner = tw.autotune(configs=tune_kernels.matmul.configs, key=["M", "N", "K"], executor=ex,
                            verbose=False)(tune_kernels.matmul.fn)
        best = tuner.tune(256, 256, 256, target="ascend910b")
    status = {repr(r["config"]): r for r in tuner.report}
    assert status["block_M=512 block_N=512"]["status"] == "dropped"
    assert status["block_M=512 block_N=512"]["reason"]
    timed = [r for r in tuner.report if r["status"] == "timed"]
    assert timed and best == min(timed, key=lambda r: r["ms"])["config"]
    assert "% of its roofline bound" in tuner.roofline


def test_prune_callable_and_errors(fresh_tuner):
    tuner = tw.autotune(configs=[tw.Config(block=64), tw.Config(block=256)], key=["n"], executor="inline",
                        prune=lambda cfgs, n: [c for c in cfgs if c["block"] <= n // 16], verbose=False)(
        tune_kernels.add_one.fn)
    assert tuner.tune(1024) == tw.Config(block=64)
    assert len(tuner.report) == 1
    with pytest.raises(tw.TilewrightError, match="not a parameter"):
        tw.autotune(configs=[tw.Config(blok=1)])(tune_kernels.add_one.fn)
    with pytest.raises(tw.TilewrightError, match="not a parameter"):
        tw.autotune(configs=[tw.Config(block=1)], key=["m"])(tune_kernels.add_one.fn)
    only_bad = tw.autotune(configs=[tw.Config(block_M=512, block_N=512)], executor="inline", verbose=False)(
        tune_kernels.matmul.fn)
    with pytest.raises(tw.TilewrightError, match="no configuration could be run"):
        only_bad.tune(256, 256, 256, target="ascend910b")


def test_dask_executor(fresh_tuner):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, processes=False) as cluster, distributed.Client(cluster) as client:
        tuner = tw.autotune(configs=tune_kernels.add_one.configs, key=["n"], executor=client.get_executor(),
                            verbose=False)(tune_kernels.add_one.fn)
        tuner.tune(4096)
    assert any(r["status"] == "timed" for r in tuner.report)


def test_cli_tune(fresh_tuner, capsys):
    from tilewright.cli import main
    assert main(["tune", "tune_kernels:matmul", "128", "128", "128", "--target", "Ascend910B2"]) == 0
    err = capsys.readouterr().err
    assert "tuning 'matmul' for ascend910b2" in err and "best:" in err
    assert main(["tune", "tune_kernels:CONFIGS"]) == 2
    assert main(["tune", "tune_kernels:add_one", "4096", "--refresh-peaks"]) == 0
    err = capsys.readouterr().err
    assert "peaks: " in err and "GFLOP/s" in err and "best:" in err
    peaks = at.machine_peaks()
    assert peaks["flops"] > 0 and peaks["bytes_per_s"] > 0 and "measured" in peaks


def test_roofline_work_of_the_seed_matmul():
    from tw_test_util import load_example
    seed = load_example("seed_matmul")
    M = N = K = 256
    k = seed.build(M, N, K, 128, 128, 64)
    flops, nbytes, once = k._exe.estimate_work()
    assert flops == 2.0 * M * N * K
    # A read once per column of blocks, B once per row of blocks, C written once (fp32)
    assert nbytes == 4 * (M * K * (N // 128) + K * N * (M // 128) + M * N)
    assert once == 4 * (M * K + K * N + M * N)
    # the bound: the larger of compute and memory time, and of the cache term when given
    assert k._exe.roofline_seconds(1e9, 1e9) == pytest.approx(max(flops, once) / 1e9)
    assert k._exe.roofline_seconds(1e12, 1e12, 1e6) == pytest.approx(nbytes / 1e6)
    ka = seed.build(M, N, K, 128, 128, 64, dtype="float16", target="ascend910b")
    assert ka._exe.estimate_work()[0] == flops  # counted before map_grid


def test_cli_tune_plot(fresh_tuner, tmp_path):
    pytest.importorskip("matplotlib")
    from tilewright.cli import main
    png = tmp_path / "roofline.png"
    assert main(["tune", "tune_kernels:matmul", "128", "128", "128", "--target", "ascend910b", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# A kernel with int32 inputs read as indices (examples/masked_attention.py's block tables): random
# example inputs would read outside its tensors (h-hunt8: SIGSEGV), so the tuner refuses them and
# times on `inputs(kernel, **params)`, which gets each configuration's arguments (the tables depend
# on block_M / block_N). cpu and ascend910b (the simulator's estimate and checked timing use them).
@pytest.mark.parametrize("target", ["cpu", "ascend910b"])
def test_inputs_callable_for_a_kernel_with_index_tables(fresh_tuner, target):
    import masked_attention as ma
    configs = [tw.Config(block_M=16, block_N=16), tw.Config(block_M=32, block_N=16)]
    args = (1, 2, 1, 33, 40, 16, "BHSD", True, None, "bool", False)
    refused = tw.autotune(configs=configs, executor="inline", verbose=False)(ma.attention_prefill)
    with pytest.raises(tw.TilewrightError, match="'Blocks', 'KvPos', 'KvIdx', 'Bands', 'Rects', 'KvLen' are integer") as e:
        refused.tune(*args, target=target)
    assert "inputs=fn" in e.value.hint
    seen = []

    def inputs(kernel, **params):
        seen.append(params)
        return ma.tune_inputs(kernel, **params)
    tuner = tw.autotune(configs=configs, executor="inline", verbose=False, inputs=inputs)(ma.attention_prefill)
    best = tuner.tune(*args, target=target)
    assert [r["status"] for r in tuner.report] == ["timed", "timed"]
    assert {(p["block_M"], p["block_N"]) for p in seen} == {(16, 16), (32, 16)}
    assert all(p["seq_q"] == 33 and p["causal"] is True and p["dtype"] == "float32" for p in seen)
    q, k, v, mask, *tables, lens = ma.prefill_args(*args[:6], mask="bool", target=target, **best)
    out = tuner(*args, target=target)(q, k, v, mask, *tables, lens)
    assert_close = tw.testing.assert_close
    assert_close(out, ma.reference(q, k, v, ma.visibility(33, 40, causal=True, mask=mask)))


def test_inputs_must_be_callable_and_picklable_for_worker_processes(fresh_tuner):
    with pytest.raises(tw.TilewrightError, match="inputs 3 is not callable"):
        tw.autotune(configs=tune_kernels.add_one.configs, inputs=3)(tune_kernels.add_one.fn)
    with cf.ProcessPoolExecutor(1) as ex:
        tuner = tw.autotune(configs=tune_kernels.add_one.configs, executor=ex, verbose=False,
                            inputs=lambda kernel, **p: kernel.example_inputs())(tune_kernels.add_one.fn)
        with pytest.raises(tw.TilewrightError, match="cannot be sent to the executor's workers") as e:
            tuner.tune(4096, target="ascend910b")
    assert "top level" in e.value.hint
    # on cpu the workers only compile: the lambda stays in this process
    calls = []
    with cf.ProcessPoolExecutor(1) as ex:
        tuner = tw.autotune(configs=[tw.Config(block=64), tw.Config(block=256)], executor=ex, verbose=False,
                            inputs=lambda kernel, **p: calls.append(p["block"]) or kernel.example_inputs())(
            tune_kernels.add_one.fn)
        tuner.tune(1000)
    assert sorted(calls) == [64, 256]
