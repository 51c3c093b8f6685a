"""bench/attn_torch_ab.py (h-flash35): the flash attention goal's CPU-time comparison with torch SDPA runs,
checks our output against torch's and prints both sides and their ratio. The shape is
test_flash_attention_cpu's S 17 / D 64 kernel, so the suite's cache usually holds it."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_attn_torch_ab_runs_and_checks(tmp_path):
    pytest.importorskip("torch")
    from tw_test_util import suite_cache_dir
    env = dict(os.environ, TW_CACHE_DIR=suite_cache_dir(tmp_path))
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "attn_torch_ab.py"), "--shape", "1", "2", "17", "64",
                        "--blocks", "64/64", "--rounds", "2"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"bench/attn_torch_ab.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    out = r.stdout
    err = float(re.search(r"64/64: max \|ours - torch\| (\S+)", out).group(1))
    assert err <= 1e-5, out
    # the child ran with the kernel on the calling thread only and native code (no --cpu-arch)
    assert "TW_CPU_ARCH native, non-causal, 2 rounds" in out, out
    for side in ("torch", "64/64"):
        m = re.search(rf"{re.escape(side)}: min +(\S+) ms, median +(\S+) ms", out)
        assert m and 0 < float(m.group(1)) <= float(m.group(2)), out
    assert re.search(r"torch / 64/64: min/min \d+\.\d{3}, median of rounds \d+\.\d{3}", out), out
