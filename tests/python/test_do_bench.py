"""tw.do_bench: Triton's semantics (warmup/rep in ms, quantiles, return_mode) on cpu, simulated
time on Ascend targets."""
import time

import numpy as np
import pytest

import tilewright as tw
from tw_test_util import load_example

seed_matmul = load_example("seed_matmul")


def test_counts_follow_the_time_budgets():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    times = tw.do_bench(fn, warmup=10, rep=20, return_mode="all")
    # 2 ms per call: ~5 timed calls for 20 ms of rep, and each time is at least the sleep
    assert 2 <= len(times) <= 12 and min(times) >= 2.0
    assert len(calls) >= len(times) + 1 + 2


def test_return_modes_and_quantiles():
    seq = iter([1, 3, 2, 4, 5, 6, 7, 8, 9] + [0] * 1000)

    def fn():
        time.sleep(next(seq) * 1e-3)
    all_t = tw.do_bench(lambda: time.sleep(0.001), warmup=0, rep=10, return_mode="all")
    assert isinstance(all_t, list)
    for mode in ("min", "max", "mean", "median"):
        assert isinstance(tw.do_bench(lambda: None, rep=1, return_mode=mode), float)
    q = tw.do_bench(lambda: time.sleep(0.001), rep=10, quantiles=[0.5, 0.2, 0.8])
    assert len(q) == 3 and q[1] <= q[0] <= q[2]
    assert isinstance(tw.do_bench(lambda: None, rep=1, quantiles=[0.5]), float)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(tw.TilewrightError, match="return_mode"):
        tw.do_bench(lambda: None, return_mode="avg")
    with pytest.raises(tw.TilewrightError, match="quantiles"):
        tw.do_bench(lambda: None, quantiles=[1.5])


def test_cache_flush_runs():
    assert tw.do_bench(lambda: None, rep=1, flush_cache=True) >= 0.0


def test_simulated_time_on_ascend():
    k = seed_matmul.build(128, 128, 128, dtype="float16", target="ascend910b")
    a, b = k.example_inputs()
    prof = k.profile(a, b)
    t = tw.do_bench(lambda: k(a, b))
    assert t == pytest.approx(prof["time_us"] * 1e-3)
    assert tw.do_bench(lambda: (k(a, b), k(a, b))) == pytest.approx(2 * t)
    assert k.get_profiler().do_bench() == pytest.approx(t)
    cpu = seed_matmul.build(128, 128, 128)
    with pytest.raises(tw.TilewrightError, match="simulated"):
        tw.do_bench(lambda: (k(a, b), cpu(a.astype(np.float32), b.astype(np.float32))))
