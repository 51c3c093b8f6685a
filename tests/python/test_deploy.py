"""Deployment: AOT export (kernel.export / tw.export / the CLI), the artifact's manifest and C
header, the C++ runtime package built and used by a separate CMake project (docs/deploying.md,
every step executed), tw.precompile, the frozen cache and tw.kernel_stats."""
import hashlib
import importlib.util
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import deploy

ROOT = pathlib.Path(__file__).resolve().parents[2]
M = T.symbolic("M")


@tw.jit(out_idx=[-1])
def axpb(a, b):
    @T.prim_func
    def axpb(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < M:
                    Y[bx * 16 + i] = X[bx * 16 + i] * a + b
    return axpb


@tw.jit(out_idx=[-1])
def rowsum(N):
    @T.prim_func
    def rowsum(X: T.Tensor((M, N), "float32"), s: T.float32, Y: T.Tensor((M,), "float32")):
        with T.Kernel(M) as bx:
            acc = T.alloc_fragment((1,), "float32")
            acc[0] = 0.0
            for j in T.serial(N):
                acc[0] = acc[0] + X[bx, j]
            Y[bx] = acc[0] * s
    return rowsum


@tw.jit(out_idx=[-1])
def twice(n):
    @T.prim_func
    def twice(X: T.Tensor((M, n), "float32"), Y: T.Tensor((M, n), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            t = T.alloc_shared((16, n), "float32")
            T.copy(X[bx * 16, 0], t)
            for i, j in T.Parallel(16, n):
                t[i, j] = t[i, j] * 2.0
            T.copy(t, Y[bx * 16, 0])
    return twice


def _manifest_file_hashes(directory):
    return {f["name"]: f["sha256"] for f in deploy.read_manifest(directory)["files"]}


# ---------------------------------------------------------------------------------------------
# Export: files, manifest, header


def test_export_writes_library_header_and_manifest(tmp_path):
    k = axpb(2.0, 1.0)
    files = k.export(tmp_path / "a")
    assert [p.name for p in files] == ["libaxpb.so", "axpb.h", "tilewright.manifest"]
    m = deploy.read_manifest(tmp_path / "a")
    assert m["target"] == "cpu" and m["tilewright"] == tw.__version__ and m["library"] == "libaxpb.so"
    assert m["cpu_features"] == tw._C.cpu_features() and m["compiler"] == tw._C.compiler_identity()
    assert m["cpu_arch"] == "native"
    (kern,) = m["kernels"]
    assert kern["name"] == "axpb" and kern["symbol"] == "tw_axpb" and kern["shape_vars"] == ["M"]
    assert kern["params"] == [
        {"name": "X", "dtype": "float32", "output": False, "shape": ["M"]},   # symbolic stays symbolic
        {"name": "Y", "dtype": "float32", "output": True, "shape": ["M"]}]
    for name, digest in _manifest_file_hashes(tmp_path / "a").items():
        assert hashlib.sha256((tmp_path / "a" / name).read_bytes()).hexdigest() == digest
    header = (tmp_path / "a" / "axpb.h").read_text()
    assert "int tw_axpb(const float* X, float* Y, int64_t M, tw_parallel_for_fn tw_pf, void* tw_pf_ctx);" in header


def test_exporting_one_compiled_kernel_copies_its_cached_object(tmp_path):
    k = rowsum(5)    # compiled (or loaded from the disk cache) for in-process use
    files, from_cache = tw._C.export_artifact([k._exe], str(tmp_path), "rowsum")
    assert from_cache  # the library of one kernel is the object compiled for it: no compiler run


def test_export_several_kernels_into_one_library_reuses_the_cached_library(tmp_path):
    kernels = [axpb(2.0, 1.0), rowsum(7)]
    tw.export(kernels, tmp_path / "one", name="svc")
    exes = [k._exe for k in kernels]
    files, from_cache = tw._C.export_artifact(exes, str(tmp_path / "two"), "svc")   # same kernels again
    assert from_cache
    assert _manifest_file_hashes(tmp_path / "one") == _manifest_file_hashes(tmp_path / "two")
    m = deploy.read_manifest(tmp_path / "two")
    assert [k["symbol"] for k in m["kernels"]] == ["tw_axpb", "tw_rowsum"]
    assert m["kernels"][1]["params"][1] == {"name": "s", "dtype": "float32", "output": False, "scalar": True}
    header = (tmp_path / "two" / "svc.h").read_text()
    assert "int tw_rowsum(const float* X, float s, float* Y, int64_t M, tw_parallel_for_fn tw_pf" in header


C_CALLER = r"""
#include <stdio.h>
#include <math.h>
#include "svc.h"

static int calls;
static void serial_pf(void* ctx, int64_t n, void (*body)(void*, int64_t), void* arg) {
  ++*(int*)ctx;
  for (int64_t i = n - 1; i >= 0; --i) body(arg, i);   /* any order */
}

int main(void) {
  float x[37], y[37], X[5 * 7], s[5];
  for (int i = 0; i < 37; ++i) x[i] = (float)i;
  for (int i = 0; i < 35; ++i) X[i] = (float)(i % 7);
  if (tw_axpb(x, y, 37, NULL, NULL) != 0) return 1;
  for (int i = 0; i < 37; ++i) if (y[i] != 2.0f * i + 1.0f) { printf("axpb %d: %f\n", i, y[i]); return 1; }
  if (tw_rowsum(X, 0.5f, s, 5, serial_pf, &calls) != 0 || calls != 1) return 1;
  for (int i = 0; i < 5; ++i) if (s[i] != 10.5f) { printf("rowsum %d: %f\n", i, s[i]); return 1; }
  printf("ok\n");
  return 0;
}
"""


def test_plain_c_program_calls_the_typed_entry_points(tmp_path):
    tw.export([axpb(2.0, 1.0), rowsum(7)], tmp_path, name="svc")
    (tmp_path / "main.c").write_text(C_CALLER)
    cc = shutil.which("gcc") or shutil.which("cc")
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-o", str(tmp_path / "caller"), str(tmp_path / "main.c"),
                    f"-I{tmp_path}", f"-L{tmp_path}", "-lsvc", f"-Wl,-rpath,{tmp_path}"], check=True)
    r = subprocess.run([str(tmp_path / "caller")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stdout + r.stderr


def test_export_errors(tmp_path):
    k = axpb(2.0, 1.0)
    with pytest.raises(tw.TilewrightError, match="two kernels named 'axpb' in one export"):
        tw.export([k, axpb(3.0, 1.0)], tmp_path)
    with pytest.raises(tw.TilewrightError, match="library name 'my-lib' is not a C identifier"):
        k.export(tmp_path, name="my-lib")
    with pytest.raises(tw.TilewrightError, match="not a compiled kernel"):
        tw.export([k, "axpb"], tmp_path)
    with pytest.raises(tw.TilewrightError, match="one artifact holds one target"):
        tw.export([k, rowsum(7), twice(64, target="ascend910b")], tmp_path)
    assert not (tmp_path / "tilewright.manifest").exists()


def test_export_ascend_writes_the_ascendc_project_and_a_manifest(tmp_path):
    k = twice(64, target="ascend910b")
    files = k.export(tmp_path)
    m = deploy.read_manifest(tmp_path)
    assert m["target"] == "ascend910b2" and "library" not in m
    assert m["kernels"][0]["params"][0]["shape"] == ["M", "64"]
    names = {f["name"] for f in m["files"]}
    assert "twice/CMakeLists.txt" in names and files[-1].name == "tilewright.manifest"
    for name, digest in _manifest_file_hashes(tmp_path).items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest


# ---------------------------------------------------------------------------------------------
# The C++ runtime package and a consumer built against it


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    """examples/cpp built against the runtime installed into a temporary prefix."""
    spec = importlib.util.spec_from_file_location("tw_consumer_build", ROOT / "examples" / "cpp" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build.build_consumer(tmp_path_factory.mktemp("consumer"))


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """An artifact of axpb + rowsum with saved inputs and references (M = 37)."""
    d = tmp_path_factory.mktemp("artifact")
    ka, kr = axpb(2.0, 1.0), rowsum(7)
    tw.export([ka, kr], d / "art", name="svc")
    x = np.random.default_rng(1).standard_normal(37).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "axpb_ref.npy", ka(x))
    return d


def run_consumer(consumer, *args, env=None):
    return subprocess.run([str(consumer), *map(str, args)], capture_output=True, text=True, timeout=120, env=env)


def small_gemm():
    @tw.compile(target="cpu")
    def small_gemm(A: tw.Tensor((37, 53), "float32"), B: tw.Tensor((53, 29), "float32")):
        out = tw.output((37, 29), dtype="float32")
        for by in range(tw.ceildiv(37, 16)):
            for bx in range(tw.ceildiv(29, 16)):
                acc = tw.accumulator((16, 16), dtype="float32")
                for k in range(tw.ceildiv(53, 32)):
                    a = tw.load(A, (by * 16, k * 32), (16, 32))
                    b = tw.load(B, (k * 32, bx * 16), (32, 16))
                    acc += tw.matmul(a, b)
                tw.store(out, (by * 16, bx * 16), acc)
        return out
    return small_gemm


@pytest.fixture(scope="module")
def gemm_artifact(tmp_path_factory):
    """An artifact of a gemm kernel (with the gemm runtime library) and saved inputs/reference."""
    d = tmp_path_factory.mktemp("gemm_artifact")
    k = small_gemm()
    k.export(d / "art", name="gsvc")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((37, 53)).astype(np.float32)
    b = rng.standard_normal((53, 29)).astype(np.float32)
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    np.save(d / "ref.npy", k(a, b))
    return d


def test_consumer_runs_a_gemm_artifact_with_the_cache_gone(consumer, gemm_artifact, tmp_path):
    # The kernels' library depends on the gemm runtime library shipped next to it: the AOT
    # runtime verifies and loads it first; no cache, no compiler involved.
    m = deploy.read_manifest(gemm_artifact / "art")
    assert (gemm_artifact / "art" / m["runtime"]).exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "nonexistent")
    d = gemm_artifact
    r = run_consumer(consumer, d / "art", "small_gemm", d / "ref.npy", d / "a.npy", d / "b.npy", "--threads", 2,
                     "--launches", 5, env=env)
    assert r.returncode == 0, r.stderr
    assert "ok: 2 threads x 5 launches of small_gemm match the reference" in r.stdout
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.parametrize("damage,message", [
    ("runtime", "the gemm runtime library"),
    ("unlisted", "does not list its gemm runtime library"),
])
def test_consumer_refuses_a_damaged_gemm_runtime_library(consumer, gemm_artifact, tmp_path, damage, message):
    art = _copy_artifact(gemm_artifact, tmp_path)
    m = deploy.read_manifest(art)
    if damage == "runtime":
        with open(art / m["runtime"], "ab") as f:
            f.write(b"\0")
    else:
        manifest = art / "tilewright.manifest"
        _write_signed(manifest, "".join(l for l in manifest.read_text().splitlines(True)
                                        if not (l.startswith("file ") and l.rstrip().endswith(m["runtime"]))))
    d = gemm_artifact
    r = run_consumer(consumer, art, "small_gemm", d / "ref.npy", d / "a.npy", d / "b.npy")
    assert r.returncode == 1 and message in r.stderr, r.stderr
    if damage == "runtime":
        assert "does not match its manifest" in r.stderr
    assert "hint:" in r.stderr


def _avx512_instructions(path):
    r = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True, check=True)
    return [l for l in r.stdout.splitlines() if "%zmm" in l or "{%k" in l]


@pytest.mark.skipif(not {"avx2", "fma"} <= set(tw._C.cpu_features().split()) or not shutil.which("objdump"),
                    reason="needs an AVX2 + FMA host and objdump")
def test_export_for_another_cpu_arch_round_trip(consumer, gemm_artifact, tmp_path, capsys):
    # Built in this (native) process for any AVX2 + FMA server: the library and the gemm runtime
    # library shipped with it carry no AVX-512, the manifest says what they need, the C++ runtime
    # runs them (this host has those features) and gets the in-process result.
    d = gemm_artifact
    spec = tmp_path / "gemm_spec.py"
    spec.write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'tests' / 'python')!r})\n"
                    "from test_deploy import small_gemm\nONE = small_gemm()\n")
    assert deploy.cli_export([f"{spec}:ONE", "-o", str(tmp_path / "v3"), "--cpu-arch", "x86-64-v3"]) == 0
    m = deploy.read_manifest(tmp_path / "v3")
    assert m["cpu_arch"] == "x86-64-v3" and m["cpu_features"] == tw._C.target_cpu_features("x86-64-v3")
    assert "avx2" in m["cpu_features"].split() and "avx512f" not in m["cpu_features"]
    assert m["runtime"] != deploy.read_manifest(d / "art")["runtime"]  # its own gemm runtime library
    for lib in (m["library"], m["runtime"]):
        assert not _avx512_instructions(tmp_path / "v3" / lib), lib
    r = run_consumer(consumer, tmp_path / "v3", "small_gemm", d / "ref.npy", d / "a.npy", d / "b.npy",
                     "--threads", 2, "--launches", 3)
    assert r.returncode == 0, r.stderr
    assert "ok: 2 threads x 3 launches of small_gemm match the reference" in r.stdout
    # an architecture the compiler does not know: the option named, nothing written
    assert deploy.cli_export([f"{spec}:ONE", "-o", str(tmp_path / "bad"), "--cpu-arch", "no-such-cpu-9"]) == 1
    err = capsys.readouterr().err
    assert "'no-such-cpu-9'" in err and "cpu_arch" in err and "x86-64-v3" in err, err
    assert not (tmp_path / "bad" / "tilewright.manifest").exists()


def test_export_for_a_cpu_this_host_lacks_is_refused_by_the_runtime(consumer, gemm_artifact, tmp_path):
    have = set(tw._C.cpu_features().split())
    for arch in ("znver3", "sapphirerapids", "skylake-avx512"):
        lacks = set(tw._C.target_cpu_features(arch).split()) - have
        if lacks:
            break
    else:
        pytest.skip("this host runs the code of every architecture tried")
    k = small_gemm()
    deploy.export(k, tmp_path / "art", cpu_arch=arch)   # compiled, never loaded here
    m = deploy.read_manifest(tmp_path / "art")
    assert m["cpu_arch"] == arch and lacks <= set(m["cpu_features"].split())
    d = gemm_artifact
    r = run_consumer(consumer, tmp_path / "art", "small_gemm", d / "ref.npy", d / "a.npy", d / "b.npy")
    assert r.returncode == 1, r.stdout + r.stderr   # refused before anything loads: no SIGILL
    assert "was compiled for CPU features this CPU lacks: " + " ".join(sorted(lacks)) in r.stderr, r.stderr
    assert f"(-march={arch})" in r.stderr and "--cpu-arch" in r.stderr, r.stderr


def test_consumer_runs_the_artifact_from_several_threads(consumer, artifact):
    r = run_consumer(consumer, artifact / "art", "axpb", artifact / "axpb_ref.npy", artifact / "x.npy",
                     "--threads", 4, "--launches", 25, "--bench", 2000)
    assert r.returncode == 0, r.stderr
    assert "ok: 4 threads x 25 launches of axpb match the reference" in r.stdout
    assert re.search(r"bench: 2000 launches, [0-9.]+ us per launch", r.stdout)


def _copy_artifact(artifact, tmp_path):
    shutil.copytree(artifact / "art", tmp_path / "art")
    return tmp_path / "art"


def _write_signed(manifest, text):
    """Writes a deliberately edited manifest `text` with its checksum line made again, as whoever
    can write the directory can (the checksum catches damage, not an editor: docs/deploying.md)."""
    body = "".join(l for l in text.splitlines(True) if not l.startswith("checksum "))
    manifest.write_text(body + "checksum sha256 " + hashlib.sha256(body.encode()).hexdigest() + "\n")


@pytest.mark.parametrize("damage,message", [
    ("library", "does not match its manifest"),
    ("feature", "was compiled for CPU features this CPU lacks: avx9000"),
    ("abi", "uses kernel ABI version 999"),
    ("format", "malformed manifest line 'param sideways"),
    ("missing", "no such artifact"),
    ("byte", "does not match its checksum"),
    ("truncated", "does not end with its checksum line"),
])
def test_consumer_refuses_a_bad_artifact(consumer, artifact, tmp_path, damage, message):
    art = _copy_artifact(artifact, tmp_path)
    manifest = art / "tilewright.manifest"
    text = manifest.read_text()
    if damage == "library":
        with open(art / "libsvc.so", "ab") as f:
            f.write(b"\0")
    elif damage == "feature":
        _write_signed(manifest, re.sub(r"^cpu_features (.*)$", r"cpu_features \1 avx9000", text, flags=re.M))
    elif damage == "abi":
        _write_signed(manifest, re.sub(r"^abi \d+$", "abi 999", text, flags=re.M))
    elif damage == "format":
        _write_signed(manifest, text.replace("param in tensor float32 X", "param sideways tensor float32 X", 1))
    elif damage == "byte":  # one output dimension changed by one byte (h-hunt11b F1: it sized the output)
        manifest.write_text(text.replace("dim $0", "dim #0", 1))
    elif damage == "truncated":
        manifest.write_text(text[:text.index("checksum ")])
    else:
        manifest.unlink()
    r = run_consumer(consumer, art, "axpb", artifact / "axpb_ref.npy", artifact / "x.npy")
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert "hint:" in r.stderr


def test_consumer_reports_argument_and_name_errors_like_python(consumer, artifact):
    x2 = artifact / "x2.npy"
    np.save(x2, np.zeros((3, 4), np.float32))
    r = run_consumer(consumer, artifact / "art", "axpb", artifact / "axpb_ref.npy", x2)
    with pytest.raises(tw.TilewrightError) as py:
        axpb(2.0, 1.0)(np.zeros((3, 4), np.float32))
    assert r.returncode == 1
    assert "argument 'X' of kernel 'axpb' must have 1 dimension(s) (M,), got shape (3, 4)" in r.stderr
    # the same message, from the same C++ code (Python locates it at the call and names the def)
    assert py.value.message.split(" (kernel 'axpb' is defined at")[0] in r.stderr
    r = run_consumer(consumer, artifact / "art", "nope", artifact / "axpb_ref.npy", artifact / "x.npy")
    assert r.returncode == 1 and "has no kernel 'nope'" in r.stderr and "axpb, rowsum" in r.stderr


def test_consumer_refuses_an_ascend_artifact(consumer, artifact, tmp_path):
    twice(64, target="ascend910b").export(tmp_path / "npu")
    r = run_consumer(consumer, tmp_path / "npu", "axpb", artifact / "axpb_ref.npy", artifact / "x.npy")
    assert r.returncode == 1 and "is for target 'ascend910b2', which has no loadable library" in r.stderr


def test_bench_deploy_quick_smoke(consumer):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "deploy.py"), "--quick", "--consumer", str(consumer)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for row in ("C++ launch overhead", "RSS of the consumer", "artifact of 10 kernels", "seed matmul"):
        assert row in r.stdout


# ---------------------------------------------------------------------------------------------
# docs/deploying.md, every step

_BLOCK = re.compile(r"^```(python|sh|cpp|cmake)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def test_deploying_md_every_step(consumer, tmp_path):
    text = (ROOT / "docs" / "deploying.md").read_text()
    blocks = _BLOCK.findall(text)
    assert [lang for lang, _ in blocks].count("sh") >= 4
    env = dict(os.environ, TW_ROOT=str(ROOT), PY=sys.executable)
    env.pop("TW_FROZEN", None)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    examples = ROOT / "examples" / "cpp"
    for lang, code in blocks:
        first = code.splitlines()[0]
        if lang == "python" and first.startswith("# file: "):
            (tmp_path / first[len("# file: "):].strip()).write_text(code)
        elif lang == "python":
            (tmp_path / "step.py").write_text(code)
            r = subprocess.run([sys.executable, "step.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
            assert r.returncode == 0, code + r.stdout + r.stderr
        elif lang == "sh":
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, code + r.stdout + r.stderr
        else:   # the C++ and CMake shown are lines of examples/cpp
            source = (examples / ("main.cpp" if lang == "cpp" else "CMakeLists.txt")).read_text()
            for line in code.splitlines():
                assert line.strip() in source, f"docs/deploying.md shows a line that examples/cpp lacks: {line}"
    assert (tmp_path / "artifact" / "libservice.so").exists()


# ---------------------------------------------------------------------------------------------
# Service mode: precompile, freeze, statistics, the command line


def test_precompile_in_parallel_with_progress():
    out = io.StringIO()
    kernels = tw.precompile([(axpb, (7.0, 1.0)), (axpb, (8.0, 1.0), "cpu"), (rowsum, 9)], workers=2, progress=out)
    assert [k.name for k in kernels] == ["axpb", "axpb", "rowsum"]
    assert kernels[0] is axpb(7.0, 1.0)     # the @tw.jit cache holds them: the request path hits it
    lines = out.getvalue().splitlines()
    assert sum("precompile [" in line for line in lines) == 3 and "[3/3]" in out.getvalue()
    assert "axpb(8.0, 1.0) on cpu" in out.getvalue() and "precompiled 3 of 3 kernel(s)" in lines[-1]


def test_precompile_errors():
    with pytest.raises(tw.TilewrightError, match="bad kernel spec"):
        tw.precompile([(axpb,)], progress=False)
    with pytest.raises(tw.TilewrightError, match="not a compiled kernel"):
        tw.precompile([(lambda n: n, (1,))], progress=False)
    out = io.StringIO()
    with pytest.raises(tw.TilewrightError, match="must return a @T.prim_func"):
        tw.precompile([(axpb, (6.0, 1.0)), (tw.jit(lambda: None), ())], progress=out)
    assert "FAILED" in out.getvalue() and "[2/2]" in out.getvalue()   # the others still finish
    # the summary counts what built (it said "precompiled 2 kernel(s)" before the traceback)
    assert "precompiled 1 of 2 kernel(s)" in out.getvalue() and "1 FAILED" in out.getvalue()


def test_freeze_turns_a_compile_into_an_error():
    k = axpb(2.0, 1.0)
    new = float(time.time_ns() % 10 ** 6)   # a kernel no earlier run left in the disk cache
    tw.freeze()
    try:
        assert tw.frozen()
        assert axpb(2.0, 1.0) is k                              # cached: served
        again = tw.compile(axpb.__wrapped__(2.0, 1.0), out_idx=[-1])    # compiled before: a cache hit
        assert again(np.ones(2, np.float32)).tolist() == [3.0, 3.0]
        with pytest.raises(tw.TilewrightError, match="the kernel cache is frozen, but kernel 'axpb' is not in it"):
            axpb(new, 1.0)
        with pytest.raises(tw.TilewrightError, match="kernel 'twice' for ascend910b4 is not compiled"):
            twice(64, target="ascend910b4")
    finally:
        tw.freeze(False)
    assert not tw.frozen()
    assert axpb(new, 1.0)(np.ones(3, np.float32)).tolist() == [new + 1.0] * 3


FROZEN_CHILD = textwrap.dedent("""
    import numpy as np, tilewright as tw, tilewright.language as T
    @tw.jit(out_idx=[-1])
    def neg(n):
        @T.prim_func
        def neg(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(n):
                    Y[i] = -X[i]
        return neg
    print(tw.frozen())
    try:
        neg(5)
    except tw.TilewrightError as e:
        print("refused:", str(e).splitlines()[0])
""")


def test_tw_frozen_environment_variable(tmp_path):
    env = dict(os.environ, TW_FROZEN="1", TW_CACHE_DIR=str(tmp_path / "cache"))
    child = tmp_path / "child.py"   # a file: the front end reads kernels' source
    child.write_text(FROZEN_CHILD)
    r = subprocess.run([sys.executable, str(child)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "True" and "refused:" in r.stdout and "is not in it" in r.stdout
    env["TW_FROZEN"] = "maybe"
    r = subprocess.run([sys.executable, str(child)], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "TW_FROZEN" in r.stderr


def test_kernel_stats_counts_calls_and_compile_time():
    k = axpb(11.0, 1.0)
    before = k.stats()["calls"]
    for _ in range(3):
        k(np.ones(4, np.float32))
    s = k.stats()
    assert s["calls"] == before + 3 and s["name"] == "axpb" and s["target"] == "cpu" and s["compile_s"] >= 0
    assert any(d["name"] == "axpb" and d["calls"] == s["calls"] for d in tw.kernel_stats())


SPEC_FILE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_deploy import axpb, rowsum
    SPECS = [(axpb, (2.0, 1.0)), (rowsum, 7, "cpu")]
    ONE = axpb(2.0, 1.0)
""")


def test_cli_export_and_precompile(tmp_path, capsys):
    spec = tmp_path / "svc_specs.py"
    spec.write_text(SPEC_FILE.format(tests=str(ROOT / "tests" / "python")))
    assert deploy.cli_export([str(spec), "-o", str(tmp_path / "art"), "--name", "svc"]) == 0
    assert [k["name"] for k in deploy.read_manifest(tmp_path / "art")["kernels"]] == ["axpb", "rowsum"]
    assert deploy.cli_export([f"{spec}:ONE", "-o", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "libaxpb.so").exists()
    assert deploy.cli_precompile([str(spec), "-j", "2"]) == 0
    assert "[2/2]" in capsys.readouterr().err
    assert deploy.cli_export([str(tmp_path / "nope.py"), "-o", str(tmp_path / "x")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert deploy.cli_export([f"{spec}:MISSING", "-o", str(tmp_path / "x")]) == 1
    assert "defines no 'MISSING'" in capsys.readouterr().err
    assert deploy.cli_precompile([str(spec), "-j", "0"]) == 1
    assert deploy.cli_export([]) == 2                      # argparse usage error
    r = subprocess.run([sys.executable, "-m", "tilewright.deploy", "export", f"{spec}:ONE", "-o",
                        str(tmp_path / "m")], capture_output=True, text=True)
    assert r.returncode == 0 and "libaxpb.so" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "tilewright.deploy", "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
