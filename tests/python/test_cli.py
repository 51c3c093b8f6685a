"""The `tilewright` command: doctor, targets (CANN spellings, suggestions), cache, the
export/precompile dispatch to tilewright.deploy, and `python -m tilewright`."""
import os
import subprocess
import sys

import pytest

import tilewright as tw
from tilewright.cli import main


def test_doctor_reports_compiler_cpu_cache_and_ascend(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for needle in ("host compiler :", "flags       : -O3", "GEMM path   :", "kernel cache  :", "trust       : ok",
                   "ASCEND_HOME_PATH", "CANN set_env.sh", "bisheng", "ccec", "driver"):
        assert needle in out, needle


def test_doctor_flags_an_untrusted_cache(tmp_path):
    bad = tmp_path / "cache"
    bad.mkdir(mode=0o777)
    os.chmod(bad, 0o777)
    env = dict(os.environ, TW_CACHE_DIR=str(bad))
    r = subprocess.run([sys.executable, "-m", "tilewright", "doctor"], env=env, capture_output=True, text=True)
    assert r.returncode == 1 and "REFUSED" in r.stdout


def test_targets_lists_aliases_and_cann_spellings(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "ascend910b2" in out and "ascend910b" in out and "Ascend910B2" in out


def test_target_names_are_case_insensitive_and_suggested():
    assert tw._C.find_target("Ascend910B2") == "ascend910b2"
    assert tw._C.find_target("Ascend910B") == "ascend910b2"
    with pytest.raises(tw.TilewrightError, match="did you mean 'ascend910b3'"):
        tw._C.find_target("ascend910b3x")
    with pytest.raises(tw.TilewrightError, match="unknown target 'gpu'"):
        @tw.compile(target="gpu")
        def k(A: tw.Tensor((8,), "float32")):
            out = tw.output((8,), dtype="float32")
            t = tw.load(A, (0,), (8,))
            tw.store(out, (0,), t)
            return out


def test_cache_stats_list_prune_clear(tmp_path, capsys):
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "c"))
    script = tmp_path / "k.py"
    script.write_text("import tilewright as tw, tilewright.language as T\n"
                      "@T.prim_func\n"
                      "def k(A: T.Tensor((8,), 'float32'), B: T.Tensor((8,), 'float32')):\n"
                      "    with T.Kernel(1) as bx:\n"
                      "        for i in T.Parallel(8):\n"
                      "            B[i] = A[i] * 2.0\n"
                      "tw.compile(k, out_idx=[-1])\n")
    subprocess.run([sys.executable, str(script)], env=env, check=True)

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "tilewright", "cache", *args], env=env, capture_output=True, text=True)
        return r.returncode, r.stdout
    rc, out = cli("stats")
    assert rc == 0 and "entries   : 1 kernels" in out
    rc, out = cli("list")
    assert rc == 0 and "kernel.so" in out and "1 entries" in out
    rc, out = cli("prune", "--max-bytes", "1")
    assert rc == 0 and "removed 1" in out
    subprocess.run([sys.executable, str(script)], env=env, check=True)
    rc, out = cli("clear")
    assert rc == 0 and "removed 1 kernels" in out
    assert "entries   : 0 kernels" in cli("stats")[1]


def test_export_and_precompile_dispatch_to_deploy(monkeypatch, capsys):
    import types
    calls = []
    fake = types.ModuleType("tilewright.deploy")
    fake.cli_export = lambda argv: calls.append(("export", argv)) or 0
    fake.cli_precompile = lambda argv: calls.append(("precompile", argv)) or 3
    monkeypatch.setitem(sys.modules, "tilewright.deploy", fake)
    monkeypatch.setattr(tw, "deploy", fake, raising=False)
    assert main(["export", "k.py:f", "-o", "out"]) == 0
    assert main(["precompile", "x"]) == 3
    assert calls == [("export", ["k.py:f", "-o", "out"]), ("precompile", ["x"])]


def test_export_and_precompile_dispatch_to_deploy(capsys):
    assert main(["export"]) == 2                      # tilewright.deploy's own usage error
    assert "tilewright export" in capsys.readouterr().err
    assert main(["precompile", "--help"]) == 0
    assert "precompile" in capsys.readouterr().out


def test_python_dash_m_and_usage_errors():
    r = subprocess.run([sys.executable, "-m", "tilewright", "targets"], capture_output=True, text=True)
    assert r.returncode == 0 and "cpu" in r.stdout
    r = subprocess.run([sys.executable, "-m", "tilewright", "nonsense"], capture_output=True, text=True)
    assert r.returncode == 2
