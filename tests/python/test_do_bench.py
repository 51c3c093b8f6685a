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

    def slow():
        calls.append(1)
        time.sleep(0.002)

    times = tw.do_bench(slow, warmup=10, rep=40, return_mode="all")
    # every call takes >= 2 ms, so a 40 ms budget allows at most 20 timed calls
    assert 1 <= len(times) <= 20 and min(times) >= 2.0
    assert len(calls) >= len(times) + 2  # + the first call and at least one estimate/warm-up call
    fast = tw.do_bench(lambda: None, warmup=1, rep=5, return_mode="all")
    assert len(fast) >= 10  # microseconds per call: the budget allows thousands


def test_return_modes_and_quantiles():
    from tilewright.benchmark import _summarise
    t = [4.0, 1.0, 3.0, 2.0]
    assert _summarise(t, None, "min") == 1.0 and _summarise(t, None, "max") == 4.0
    assert _summarise(t, None, "mean") == 2.5 and _summarise(t, None, "median") == 2.5
    assert _summarise(t, None, "all") == t
    assert _summarise(t, [0.5, 0.0, 1.0], "mean") == [2.5, 1.0, 4.0]  # quantiles win over return_mode
    assert _summarise(t, [0.5], "mean") == 2.5                         # one quantile: a float
    # end to end
    assert isinstance(tw.do_bench(lambda: time.sleep(0.001), warmup=0, rep=10, return_mode="all"), list)
    for mode in ("min", "max", "mean", "median"):
        assert isinstance(tw.do_bench(lambda: None, rep=1, return_mode=mode), float)
    q = tw.do_bench(lambda: time.sleep(0.001), rep=10, quantiles=[0.5, 0.2, 0.8])
    assert len(q) == 3 and q[1] <= q[0] <= q[2]


def test_bad_arguments_are_clear_errors():
    with pytest.raises(tw.TilewrightError, match="return_mode"):
        tw.do_bench(lambda: None, return_mode="avg")
    with pytest.raises(tw.TilewrightError, match="quantiles"):
        tw.do_bench(lambda: None, quantiles=[1.5])


def test_cache_flush_runs():
    assert tw.do_bench(lambda: None, rep=1, flush_cache=True) >= 0.0


def test_the_flush_counts_in_the_estimate(monkeypatch):
    # A fast fn with flush_cache ran rep / fn-time flushes of 256 MiB (833 for `lambda: None` at
    # rep=1: 8.7 s of CI); as in Triton the flush is part of the estimated cost, so a flush of at
    # least 2 ms allows at most 5 estimate calls + rep / 2 ms timed calls + the warmup's none.
    from tilewright import benchmark
    flushes = []
    monkeypatch.setattr(benchmark, "_flush_cache", lambda: (flushes.append(1), time.sleep(0.002)))
    assert tw.do_bench(lambda: None, warmup=0, rep=10, flush_cache=True) >= 0.0
    assert 2 <= len(flushes) <= 10


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
