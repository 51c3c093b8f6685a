"""The disk cache's trust model (docs/environment.md): nothing planted in it is compiled in or
loaded. Each test runs a child process (the environment is read once per process) that compiles
and runs a small kernel, after the test tampered with the cache the way an attacker or a crash
would."""
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

PY = sys.executable

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    def build(a):
        @T.prim_func
        def cache_probe(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(2) as bx:
                for i in T.Parallel(32):
                    Y[bx * 32 + i] = X[bx * 32 + i] * a
        return tw.compile(cache_probe, out_idx=[-1])

    a = float(sys.argv[1])
    k = build(a)
    y = k(np.arange(64, dtype=np.float32))
    ok = bool(np.array_equal(y, np.arange(64, dtype=np.float32) * np.float32(a)))
    print(json.dumps({"disk": k.from_disk_cache, "ok": ok}))
""")


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    path = tmp_path_factory.mktemp("child") / "child.py"
    path.write_text(CHILD)
    return str(path)


def run(child, cache, a=2.0, extra=None, expect_ok=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(cache)
    env.update(extra or {})
    p = subprocess.run([PY, child, str(a)], env=env, capture_output=True, text=True, timeout=300)
    if not expect_ok:
        return p
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["ok"], "the kernel gave wrong results"
    return r


def entries(cache):
    root = os.path.join(cache, "kernels")
    return sorted(os.path.join(root, a, b) for a in os.listdir(root) if len(a) == 2
                  for b in os.listdir(os.path.join(root, a)))


def header_dir(cache):
    inc = os.path.join(cache, "include")
    (h,) = [d for d in os.listdir(inc) if not d.startswith(("stage.", "trash."))]
    return os.path.join(inc, h)


def test_planted_header_is_not_compiled_in(child, tmp_path):
    cache = tmp_path / "c"
    run(child, cache, 2.0)
    inc = header_dir(cache)
    # A header that shadows a standard one, and a modified runtime header: either would run the
    # attacker's code inside the next kernel.
    marker = tmp_path / "pwned"
    payload = f'static int tw_pwn = [] {{ __builtin_fprintf(__builtin_fopen("{marker}", "w"), "x"); return 0; }}();\n'
    with open(os.path.join(inc, "cstdint"), "w") as f:
        f.write(payload + "#include_next <cstdint>\n")
    abi = os.path.join(inc, "tw_cpu", "abi.h")
    with open(abi, "a") as f:
        f.write("\n#error planted\n")
    r = run(child, cache, 3.0)  # a new kernel: compiled with the headers
    assert not r["disk"]
    assert not marker.exists()
    assert not os.path.exists(os.path.join(header_dir(cache), "cstdint")), "the planted header must be removed"
    with open(os.path.join(header_dir(cache), "tw_cpu", "abi.h")) as f:
        assert "#error planted" not in f.read()


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_cache_dir_writable_by_others_is_refused_not_chmodded(child, tmp_path, mode):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, mode)
    p = run(child, cache, expect_ok=False)
    assert p.returncode != 0
    assert "TilewrightError" in p.stderr and "writable by other users" in p.stderr, p.stderr
    assert "chmod 700" in p.stderr
    assert stat.S_IMODE(os.stat(cache).st_mode) == mode, "the directory's mode must not be changed"


def test_cache_dir_of_another_user_is_refused(child, tmp_path):
    if os.geteuid() == 0:
        cache = tmp_path / "other"
        cache.mkdir(mode=0o700)
        os.chown(cache, 12345, 12345)
    else:
        cache = "/"  # owned by root
    p = run(child, cache, expect_ok=False)
    assert p.returncode != 0
    assert "TilewrightError" in p.stderr and "owned by uid" in p.stderr, p.stderr


def test_cache_disable_uses_a_fresh_private_temp_dir(child, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # The old predictable name, planted by someone else with a header that breaks every compile.
    planted = tmpdir / f"tilewright-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    (planted / "include").mkdir()
    r = run(child, tmp_path / "unused", 2.0, {"TW_CACHE_DISABLE": "1", "TMPDIR": str(tmpdir)})
    assert not r["disk"]
    assert sorted(os.listdir(tmpdir)) == [planted.name], "the private temp dir must be removed at exit"
    assert stat.S_IMODE(os.stat(planted).st_mode) == 0o777


def test_swapped_entries_are_not_loaded(child, tmp_path):
    cache = tmp_path / "c"
    run(child, cache, 2.0)
    (e2,) = entries(cache)
    run(child, cache, 5.0)
    (e5,) = [e for e in entries(cache) if e != e2]
    # Give the a=5 kernel's key the a=2 kernel's library and manifest.
    shutil.rmtree(e5)
    shutil.copytree(e2, e5)
    r = run(child, cache, 5.0)
    assert not r["disk"], "another key's entry must not be loaded"  # run() checked the results


@pytest.mark.parametrize("where", [0, 1, 100, 4096, -1, -100])
def test_flipped_byte_in_library_is_never_loaded(child, tmp_path, where):
    cache = tmp_path / "c"
    run(child, cache, 2.0)
    (e,) = entries(cache)
    so = os.path.join(e, "kernel.so")
    with open(so, "r+b") as f:
        size = f.seek(0, 2)
        f.seek(where % size)
        b = f.read(1)
        f.seek(where % size)
        f.write(bytes([b[0] ^ 0x10]))
    r = run(child, cache, 2.0)
    assert not r["disk"]
    r = run(child, cache, 2.0)
    assert r["disk"], "the rebuilt entry is used again"


def test_corrupt_entry_with_matching_manifest_is_rebuilt(child, tmp_path):
    # A library that verifies (its manifest was rewritten to match) but does not load: evicted and
    # rebuilt instead of failing on every compile.
    cache = tmp_path / "c"
    run(child, cache, 2.0)
    (e,) = entries(cache)
    so = os.path.join(e, "kernel.so")
    with open(so, "wb") as f:
        f.write(b"not an ELF file")
    import hashlib
    man = os.path.join(e, "manifest")
    lines = open(man).read().splitlines()
    lines = [("size 15" if ln.startswith("size ") else
              "sha256 " + hashlib.sha256(b"not an ELF file").hexdigest() if ln.startswith("sha256 ") else ln)
             for ln in lines]
    open(man, "w").write("\n".join(lines) + "\n")
    r = run(child, cache, 2.0)
    assert not r["disk"]
    assert run(child, cache, 2.0)["disk"]


def test_corrupt_header_dir_is_rewritten(child, tmp_path):
    cache = tmp_path / "c"
    run(child, cache, 2.0)
    with open(os.path.join(header_dir(cache), "tw_cpu", "abi.h"), "w") as f:
        f.write("")  # truncated by a crash
    run(child, cache, 3.0)
    run(child, cache, 4.0)


def test_stopped_holder_of_the_usage_index_stalls_no_process(child, tmp_path):
    """A process stopped while it holds the usage index's lock (kernels/.usage) delays a publish
    by the bound (5 s) and a lookup not at all: the index is bookkeeping, skipped with a warning
    naming it and the fix, never a hang."""
    cache = tmp_path / "c"
    (cache / "kernels").mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    usage = cache / "kernels" / ".usage"
    holder = subprocess.Popen(
        [PY, "-c", "import fcntl, os, signal, sys\n"
                   "f = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\n"
                   "os.kill(os.getpid(), signal.SIGSTOP)\n", str(usage)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        p = run(child, cache, a=3.0, expect_ok=False)  # a miss: compiled, then published
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout.strip().splitlines()[-1])
        assert r == {"disk": False, "ok": True}
        assert str(usage) in p.stderr and "continue or end that process" in p.stderr, p.stderr
        p = run(child, cache, a=3.0, expect_ok=False)  # a hit: never takes the index's lock
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout.strip().splitlines()[-1]) == {"disk": True, "ok": True}
        assert "usage index" not in p.stderr, p.stderr
    finally:
        holder.kill()
        holder.wait()
    assert run(child, cache, a=4.0) == {"disk": False, "ok": True}
    assert usage.read_text().strip().isdigit()  # recorded again once the holder is gone


RELOAD = textwrap.dedent("""
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    def build(a):
        @T.prim_func
        def reload_probe(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(2) as bx:
                for i in T.Parallel(32):
                    Y[bx * 32 + i] = X[bx * 32 + i] * a
        return tw.compile(reload_probe, out_idx=[-1])

    x = np.arange(64, dtype=np.float32)
    held = []
    for rep in range(3):
        for a in (2.0, 3.0, 5.0, 7.0):
            tw.clear_cache(disk=False)  # each compile loads the library from the disk cache again
            k = build(a)
            held.append((a, k))
            for b, h in held:
                assert np.array_equal(h(x), x * np.float32(b)), (rep, a, b)
    print("OK", sum(h.from_disk_cache for _, h in held))
""")


def test_libraries_loaded_again_while_loaded_are_the_right_ones(tmp_path):
    """Kernels are loaded through /proc/self/fd/<n> (the descriptor they were verified through).
    glibc keeps such a name bound to the library loaded under it, also as an alias when the same
    file is loaded again while loaded; reusing the number for another kernel must still load that
    kernel (every kernel held is called again after each load)."""
    script = tmp_path / "reload.py"
    script.write_text(RELOAD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env["TW_CACHE_DIR"] = str(tmp_path / "c")
    p = subprocess.run([PY, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-2:] == ["OK", "8"], p.stdout  # 4 compiled, then 8 loads from disk
