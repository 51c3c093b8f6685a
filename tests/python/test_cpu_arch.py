"""TW_CPU_ARCH (docs/environment.md, docs/deploying.md "Deploying to another CPU"): kernels and the
gemm runtime library compiled for a chosen -march instead of this machine's CPU. The environment
is read once per process, so each case runs a child process on a cache directory of its own."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import tilewright as tw
from tw_test_util import seed_gemm_runtime

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOST = set(tw._C.cpu_features().split())
V3 = set(tw._C.target_cpu_features("x86-64-v3").split()) if "avx2" in HOST else set()

needs_avx2 = pytest.mark.skipif(not {"avx2", "fma"} <= HOST, reason="x86-64-v3 code needs an AVX2 + FMA host")

CHILD = textwrap.dedent("""
    import importlib, json, pathlib, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import tilewright as tw
    import gemm, softmax, flash_attention
    from tilewright.testing import randn, report

    def bf16_gemm(M, N, K):  # the output is bfloat16: one rounding of 2^-8 relative on top of fp32
        rng = np.random.default_rng(3)
        a, b = randn((M, K), "bfloat16", seed=rng), randn((K, N), "bfloat16", seed=rng)
        c = gemm.matmul(M, N, K, dtype="bfloat16")(a, b)
        return report(f"gemm {M}x{N}x{K} bfloat16", c, a.astype(np.float64) @ b.astype(np.float64),
                      atol=1e-5 * K, rtol=8e-3)

    ok = [gemm.check(67, 45, 33, "float32"), gemm.check(130, 70, 129, "float16"),
          bf16_gemm(37, 29, 70), gemm.check(1, 1, 1, "float32"),
          softmax.check(33, 257), softmax.check(1, 1),
          flash_attention.check(1, 2, 67, 64, False), flash_attention.check(1, 1, 130, 64, True)]
    print(json.dumps({"ok": ok, "arch": tw._C.cpu_arch(), "flags": tw._C.compile_flags(tw._C.cpu_arch()),
                      "machine": importlib.import_module("tilewright.autotune").machine_id("cpu")}))
""")


def _child(code, tmp_path, arch, *args, cache=None, cxx=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update(TW_CACHE_DIR=str(cache or tmp_path / "cache"), TW_NUM_THREADS="2")
    if cxx is not None:
        env["TW_CXX"] = cxx
    if arch is not None:
        env["TW_CPU_ARCH"] = arch
    script = tmp_path / "child.py"  # kernels are read from their source file
    script.write_text(code)
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=1200)


def _zmm_instructions(path):
    """Lines of `objdump -d path` that use an AVX-512 register (zmm, or a mask register k0-k7)."""
    r = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True, check=True)
    return [l for l in r.stdout.splitlines() if "%zmm" in l or "%k1" in l or "{%k" in l or "tdpb" in l]


@needs_avx2
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_x86_64_v3_kernels_are_correct_here_and_contain_no_avx512(tmp_path, tmp_path_factory):
    # x86-64-v3's gemm runtime library: built once per run (the AVX2 tests' children load it too), copied here
    seed_gemm_runtime(tmp_path / "cache", tmp_path_factory, "x86-64-v3")
    r = _child(CHILD, tmp_path, "x86-64-v3", ROOT / "examples")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(out["ok"]), r.stdout
    assert out["arch"] == "x86-64-v3" and "-march=x86-64-v3" in out["flags"]
    assert "-mprefer-vector-width=512" not in out["flags"]          # the target has no AVX-512
    assert "arch=x86-64-v3" in out["machine"]                         # tuning results kept apart
    libs = sorted((tmp_path / "cache" / "kernels").rglob("*.so"))
    runtimes = [p for p in libs if p.name.startswith("libtw_gemm_")]
    assert len(runtimes) == 1 and len(libs) >= 5, libs
    for lib in libs:  # kernels and the gemm runtime library alike
        bad = _zmm_instructions(lib)
        assert not bad, f"{lib.name} uses AVX-512 / AMX: {bad[:5]}"


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ not installed")
@pytest.mark.parametrize("arch", [None, "x86-64-v3", "x86-64"])
def test_clang_compiles_the_kernels_and_the_gemm_runtime(tmp_path, arch):
    """TW_CXX=clang++ (docs/environment.md): the runtime headers and the gemm runtime library use
    GCC builtins where clang spells them differently (a non-temporal store, a masked 16-bit load,
    a widening load), each with its clang form; the same kernels as above checked against numpy."""
    if arch == "x86-64-v3" and not {"avx2", "fma"} <= HOST:
        pytest.skip("x86-64-v3 code needs an AVX2 + FMA host")
    r = _child(CHILD, tmp_path, arch, ROOT / "examples", cxx="clang++")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(out["ok"]), r.stdout
    assert any(p.name.startswith("libtw_gemm_") for p in (tmp_path / "cache" / "kernels").rglob("*.so"))


def test_the_cache_key_and_the_gemm_runtime_differ_by_arch(tmp_path, tmp_path_factory):
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np, tilewright as tw, gemm
        assert gemm.check(20, 20, 20, "float32")
        k = gemm.matmul(20, 20, 20, dtype="float32")
        print(tw._C.cpu_arch(), k.from_disk_cache)
    """)
    cache = tmp_path / "cache"
    seed_gemm_runtime(cache, tmp_path_factory)  # native's (built once per run); the other arch's is built here
    arches = ["native", "x86-64-v3" if "avx2" in HOST else "x86-64"]
    for arch in arches:
        r = _child(code, tmp_path, None if arch == "native" else arch, ROOT / "examples", cache=cache)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.split()[-2:] == [arch, "False"], r.stdout   # compiled afresh: another key
    runtimes = {p.name for p in (cache / "kernels").rglob("libtw_gemm_*.so")}
    assert len(runtimes) == 2, runtimes
    r = _child(code, tmp_path, arches[1], ROOT / "examples", cache=cache)  # and each is found again
    assert r.returncode == 0 and r.stdout.split()[-2:] == [arches[1], "True"], r.stdout + r.stderr


KERNEL = textwrap.dedent("""
    import numpy as np, tilewright as tw
    import tilewright.language as T
    try:
        @T.prim_func
        def add_one(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(2) as bx:
                for i in T.Parallel(32):
                    Y[bx * 32 + i] = X[bx * 32 + i] + 1.0
        print("ran", tw.compile(add_one, out_idx=[-1])(np.zeros(64, np.float32))[0])
    except Exception as e:
        print(type(e).__name__ + ": " + str(e))
""")


def test_an_unknown_arch_is_a_clear_error(tmp_path):
    r = _child(KERNEL, tmp_path, "no-such-cpu-9")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("TilewrightError:") and "'no-such-cpu-9'" in r.stdout, r.stdout
    assert "TW_CPU_ARCH" in r.stdout and "x86-64-v3" in r.stdout, r.stdout
    r = _child(KERNEL, tmp_path, "-O0")  # never handed to the compiler as a flag
    assert "TW_CPU_ARCH='-O0' is invalid" in r.stdout + r.stderr, r.stdout + r.stderr


def _foreign_arch():
    """An architecture whose code this host cannot run (it lacks a feature the code may use)."""
    for arch in ("znver3", "sapphirerapids", "graniterapids", "znver4", "skylake-avx512"):
        try:
            need = set(tw._C.target_cpu_features(arch).split())
        except ValueError:
            continue
        if need - HOST:
            return arch, need - HOST
    pytest.skip("this host runs the code of every architecture tried")


def test_code_this_cpu_cannot_run_is_refused_before_it_loads(tmp_path):
    arch, missing = _foreign_arch()
    r = _child(KERNEL, tmp_path, arch)
    assert r.returncode == 0, r.stderr           # an error, not SIGILL
    assert r.stdout.startswith("TilewrightError:"), r.stdout
    assert f"TW_CPU_ARCH={arch}" in r.stdout and "SIGILL" in r.stdout, r.stdout
    assert all(f in r.stdout for f in missing), r.stdout
    assert "--cpu-arch" in r.stdout, r.stdout   # the hint: export for the other machine instead
    assert not list((tmp_path / "cache").rglob("*.so")), "nothing is compiled for it"
