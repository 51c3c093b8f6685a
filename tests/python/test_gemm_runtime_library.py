"""The gemm runtime library (tw_cpu/gemm.h, docs/architecture.md): tw_cpu/gemm_runtime.cpp is
compiled once per compiler, flags and CPU into a shared library kept in the disk cache, loaded
once per process, and every kernel library that calls tw_cpu::gemm depends on it instead of
containing it, so evicted gemm kernels are unmapped. Each test runs child processes (the
environment is read once per process) on a cache of its own; a test that needs the runtime library
there but is not about building it gets a copy of one built once per run (tw_test_util.seed_gemm_runtime)."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np

import tilewright as tw
import tilewright.language as T
from tilewright import deploy
from tw_test_util import seed_gemm_runtime

PY = sys.executable

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    def gemm_kernel(M, N, K, dtype):
        @T.prim_func
        def gemm_probe(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                       C: T.Tensor((M, N), "int32" if dtype == "int8" else "float32")):
            with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32)) as (bx, by):
                a = T.alloc_shared((32, 32), dtype)
                b = T.alloc_shared((32, 32), dtype)
                c = T.alloc_fragment((32, 32), "int32" if dtype == "int8" else "float32")
                T.clear(c)
                for k in T.serial(T.ceildiv(K, 32)):
                    T.copy(A[by * 32, k * 32], a)
                    T.copy(B[k * 32, bx * 32], b)
                    T.gemm(a, b, c)
                T.copy(c, C[by * 32, bx * 32])
        return tw.compile(gemm_probe, out_idx=[-1])

    def add_kernel():
        @T.prim_func
        def add_probe(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(2) as bx:
                for i in T.Parallel(32):
                    Y[bx * 32 + i] = X[bx * 32 + i] + 1.0
        return tw.compile(add_probe, out_idx=[-1])

    def sized_add_kernel(n):
        @T.prim_func
        def add_sized(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(n):
                    Y[i] = X[i] + 1.0
        return tw.compile(add_sized, out_idx=[-1])

    if sys.argv[1] == "unload":  # 5 kernels of each kind compiled, run, dropped: how many stay mapped
        import gc

        def mapped():
            with open("/proc/self/maps") as f:
                return len({l.split()[-1] for l in f if l.rstrip().endswith("kernel.so")})

        counts = {}
        for kind in ("add", "gemm"):
            ks = []
            for i in range(5):
                n = 32 + 8 * i
                x = np.ones((n, 32), np.float32) if kind == "gemm" else np.ones((1, n), np.float32)
                if kind == "add":
                    ks.append(sized_add_kernel(n))
                    assert np.array_equal(ks[-1](x[0]), x[0] + 1)
                else:
                    ks.append(gemm_kernel(n, 32, 32, "float32"))
                    assert np.array_equal(ks[-1](x, x[:32]), np.full((n, 32), 32, np.float32))
            before = mapped()
            del ks
            tw.clear_cache()
            gc.collect()
            counts[kind] = [before, mapped()]
        print(json.dumps({"counts": counts, "disk": False, "ok": True}))
        sys.exit(0)

    kind, M, N, K = sys.argv[1], *map(int, sys.argv[2:5])
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    if kind == "add":
        k = add_kernel()
        x = rng.standard_normal(64).astype(np.float32)
        ok = bool(np.array_equal(k(x), x + np.float32(1)))
    elif kind == "int8":
        k = gemm_kernel(M, N, K, "int8")
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (K, N)).astype(np.int8)
        ok = bool(np.array_equal(k(a, b), a.astype(np.int32) @ b.astype(np.int32)))
    else:
        k = gemm_kernel(M, N, K, kind)
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        if kind == "float16":
            a, b = a.astype(np.float16), b.astype(np.float16)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        ok = bool(np.allclose(k(a, b), ref, rtol=1e-5, atol=1e-4 * K))
    print(json.dumps({"disk": k.from_disk_cache, "ok": ok}))
""")


def run(tmp_path, cache, kind, M=70, N=45, K=100, extra=None, cpus=None):
    child = tmp_path / "child.py"
    if not child.exists():
        child.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_CACHE_DIR": str(cache), "TW_VERBOSE": "1"}, **(extra or {}))
    p = subprocess.run([PY, str(child), kind, str(M), str(N), str(K)], env=env, capture_output=True, text=True,
                       timeout=600, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["ok"], f"{kind} {M}x{N}x{K}: wrong results"
    r["built_runtime"] = "compiled the gemm runtime library" in p.stderr
    # the translation units it was built from: the TW_GEMM_PARTS mask of each (TW_VERBOSE logs the commands)
    r["part_masks"] = sorted(int(m) for m in re.findall(r"-DTW_GEMM_PARTS=(\d+) ", p.stderr))
    r["stderr"] = p.stderr
    return r


def runtime_entries(cache):
    root = os.path.join(cache, "kernels")
    found = []
    for a in os.listdir(root):
        if len(a) != 2:
            continue
        for b in os.listdir(os.path.join(root, a)):
            found += [os.path.join(root, a, b, f) for f in os.listdir(os.path.join(root, a, b))
                      if f.startswith("libtw_gemm_") and f.endswith(".so")]
    return found


def kernel_libraries(cache):
    root = os.path.join(cache, "kernels")
    return [os.path.join(root, a, b, "kernel.so") for a in os.listdir(root) if len(a) == 2
            for b in os.listdir(os.path.join(root, a)) if os.path.exists(os.path.join(root, a, b, "kernel.so"))]


def test_built_once_cached_and_linked_only_by_gemm_kernels(tmp_path):
    cache = tmp_path / "c"
    r = run(tmp_path, cache, "add")  # no gemm: no runtime library
    assert not r["built_runtime"] and runtime_entries(cache) == []
    r = run(tmp_path, cache, "float32")  # the first gemm kernel builds it
    assert r["built_runtime"] and not r["disk"]
    # in one translation unit per CPU (at most 5, the file's parts), each of the parts in exactly one of them
    masks = r["part_masks"]
    assert len(masks) == min(5, len(os.sched_getaffinity(0))) and sum(masks) == 31, masks
    assert all(a & b == 0 for i, a in enumerate(masks) for b in masks[i + 1:]), masks
    (obj,) = runtime_entries(cache)
    inode = os.stat(obj).st_ino
    # other gemm kernels (other shapes, other dtypes), in new processes, link the cached library
    for kind, shape in (("float32", (33, 65, 17)), ("float16", (70, 45, 100)), ("int8", (40, 50, 300))):
        r = run(tmp_path, cache, kind, *shape)
        assert not r["built_runtime"] and not r["disk"], kind
    assert runtime_entries(cache) == [obj] and os.stat(obj).st_ino == inode
    assert run(tmp_path, cache, "float32")["disk"]


def test_evicted_gemm_kernels_are_unmapped(tmp_path, tmp_path_factory):
    # The reproducer of the leak: 5 kernels of each kind compiled, run, dropped and evicted
    # (tw.clear_cache); no kernel library may stay mapped, gemm kernels included.
    seed_gemm_runtime(tmp_path / "c", tmp_path_factory)
    r = run(tmp_path, tmp_path / "c", "unload")
    assert r["counts"] == {"add": [5, 0], "gemm": [5, 0]}, r["counts"]


def _dynamic_symbols(path):
    return subprocess.run(["readelf", "-W", "--dyn-syms", str(path)], capture_output=True, text=True,
                          check=True).stdout


def test_gemm_kernel_libraries_hold_no_unique_symbols_or_thread_local_destructors(tmp_path, tmp_path_factory):
    # What keeps glibc from unmapping a library: STB_GNU_UNIQUE symbols, thread_local destructors
    # (__cxa_thread_atexit). Kernel libraries have neither; the runtime library holds the state.
    cache = tmp_path / "c"
    seed_gemm_runtime(cache, tmp_path_factory)
    for kind, shape in (("float32", (70, 45, 100)), ("float16", (33, 65, 17)), ("int8", (40, 50, 300))):
        run(tmp_path, cache, kind, *shape)
    libs = kernel_libraries(cache)
    assert len(libs) == 3
    for lib in libs:
        syms = _dynamic_symbols(lib)
        assert "UNIQUE" not in syms and "__cxa_thread_atexit" not in syms, lib
        assert "gemm_run" in syms  # an undefined symbol: the code is in the runtime library
        needed = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
        (rt,) = runtime_entries(cache)
        assert f"[{os.path.basename(rt)}]" in needed and "[$ORIGIN]" in needed
    # the state is in the runtime library (which is loaded once and never unloaded)
    assert "g_launch_epoch" in _dynamic_symbols(rt)


def test_a_damaged_runtime_library_is_never_linked_or_loaded(tmp_path, tmp_path_factory):
    cache = tmp_path / "c"
    seed_gemm_runtime(cache, tmp_path_factory)
    run(tmp_path, cache, "float32")
    (obj,) = runtime_entries(cache)
    with open(obj, "r+b") as f:  # one flipped byte in its code
        f.seek(os.path.getsize(obj) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))
    r = run(tmp_path, cache, "float32", 33, 65, 17)  # a new kernel: the library is verified and rebuilt
    assert r["built_runtime"]
    (obj,) = runtime_entries(cache)
    assert not run(tmp_path, cache, "float32", 34, 65, 17)["built_runtime"]
    with open(obj, "r+b") as f:  # damaged again: a disk cache hit of a kernel rebuilds it before loading
        f.seek(os.path.getsize(obj) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))
    r = run(tmp_path, cache, "float32", 34, 65, 17)
    assert r["disk"] and r["built_runtime"]


def test_a_frozen_cache_refuses_to_rebuild_it(tmp_path, tmp_path_factory):
    # A cached gemm kernel in a frozen process whose runtime library was evicted: an error that
    # says so (building it is a compile), not a silent compile on the request path.
    cache = tmp_path / "c"
    seed_gemm_runtime(cache, tmp_path_factory)
    run(tmp_path, cache, "float32")
    (lib,) = runtime_entries(cache)
    shutil.rmtree(os.path.dirname(lib))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update({"TW_CACHE_DIR": str(cache), "TW_FROZEN": "1"})
    p = subprocess.run([PY, str(tmp_path / "child.py"), "float32", "70", "45", "100"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode != 0
    assert "the kernel cache is frozen, but the gemm runtime library is not in it" in p.stderr, p.stderr
    assert "tw.precompile" in p.stderr and "Traceback" in p.stderr and "TilewrightError" in p.stderr
    assert runtime_entries(cache) == []
    assert run(tmp_path, cache, "float32")["built_runtime"]  # not frozen: rebuilt


def test_cache_disabled_builds_it_once_per_process(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # on one CPU: the whole file in one translation unit (the C++ tests' build of it)
    one_cpu = {min(os.sched_getaffinity(0))}
    r = run(tmp_path, tmp_path / "unused", "float32", extra={"TW_CACHE_DISABLE": "1", "TMPDIR": str(tmpdir)},
            cpus=one_cpu)
    assert r["built_runtime"] and not r["disk"] and r["part_masks"] == [31], r["part_masks"]
    assert os.listdir(tmpdir) == [], "the private temp dir (library included) is removed at exit"


C_CALLER = r"""
#include <stdio.h>
#include "gemmsvc.h"

int main(void) {
  static float a[37 * 53], b[53 * 29], c[37 * 29];
  for (int i = 0; i < 37 * 53; ++i) a[i] = (float)(i % 7) - 3.0f;
  for (int i = 0; i < 53 * 29; ++i) b[i] = (float)(i % 5) - 2.0f;
  if (tw_gemm_export(a, b, c, NULL, NULL) != 0) return 1;
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 29; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 53; ++k) s += a[i * 53 + k] * b[k * 29 + j];
      if (c[i * 29 + j] != s) { printf("c[%d][%d] = %f, expected %f\n", i, j, c[i * 29 + j], s); return 1; }
    }
  printf("ok\n");
  return 0;
}
"""


def test_an_exported_gemm_library_is_self_contained(tmp_path):
    # The artifact ships the runtime library next to the kernels' (listed in the manifest with its
    # sha256): a C program that links only the kernels' library runs it with the cache gone.
    @T.prim_func
    def gemm_export(A: T.Tensor((37, 53), "float32"), B: T.Tensor((53, 29), "float32"),
                    C: T.Tensor((37, 29), "float32")):
        with T.Kernel(T.ceildiv(29, 16), T.ceildiv(37, 16)) as (bx, by):
            a = T.alloc_shared((16, 32), "float32")
            b = T.alloc_shared((32, 16), "float32")
            c = T.alloc_fragment((16, 16), "float32")
            T.clear(c)
            for k in T.serial(T.ceildiv(53, 32)):
                T.copy(A[by * 16, k * 32], a)
                T.copy(B[k * 32, bx * 16], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * 16, bx * 16])

    kernel = tw.compile(gemm_export, out_idx=[-1])
    tw.export([kernel], tmp_path / "art", name="gemmsvc")
    art = tmp_path / "art"
    m = deploy.read_manifest(art)
    files = {f["name"]: f["sha256"] for f in m["files"]}
    assert m["runtime"].startswith("libtw_gemm_") and m["runtime"] in files
    assert hashlib.sha256((art / m["runtime"]).read_bytes()).hexdigest() == files[m["runtime"]]
    (tmp_path / "main.c").write_text(C_CALLER)
    cc = shutil.which("gcc") or shutil.which("cc")
    subprocess.run([cc, "-std=c11", "-o", str(tmp_path / "caller"), str(tmp_path / "main.c"), f"-I{art}",
                    f"-L{art}", "-lgemmsvc", f"-Wl,-rpath,{art}"], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "nonexistent")
    r = subprocess.run([str(tmp_path / "caller")], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stdout + r.stderr
    x = np.arange(37 * 53, dtype=np.float32).reshape(37, 53) % 7 - 3
    y = np.arange(53 * 29, dtype=np.float32).reshape(53, 29) % 5 - 2
    np.testing.assert_array_equal(kernel(x, y), x @ y)


def _host_has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return False
    return {"amx_tile", "amx_bf16", "amx_int8"} <= set(flags)


def test_amx_switch_and_its_log_line(tmp_path, tmp_path_factory):
    # TW_CPU_AMX=0 keeps the int8 / bf16 gemms off the AMX tile unit (the AVX-512 paths, as when the
    # kernel refuses the tile permission); the runtime logs which path it takes when it loads the
    # gemm runtime library. Both give exact int8 results (a tail in every dimension).
    seed_gemm_runtime(tmp_path / "cache", tmp_path_factory)
    off = run(tmp_path, tmp_path / "cache", "int8", 70, 45, 100, extra={"TW_CPU_AMX": "0"})
    on = run(tmp_path, tmp_path / "cache", "int8", 70, 45, 100)
    if _host_has_amx():
        assert "AMX disabled (TW_CPU_AMX=0): bf16 and int8 gemms use the AVX-512 paths" in off["stderr"]
        assert ("AMX tiles in use" in on["stderr"]) or ("refused AMX tile permission" in on["stderr"])
    else:
        assert "built without AMX" in off["stderr"] and "built without AMX" in on["stderr"]
