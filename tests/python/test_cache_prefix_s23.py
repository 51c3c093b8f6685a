"""`tilewright cache prune` and `clear` leave no empty prefix directory (kernels/<2 hex digits>)
behind, and a later compile recreates the one it needs (the runtime's own eviction: tw_tests
DiskCache.RemovingTheLastEntryOfAPrefixRemovesItsDirectory)."""
import os
import subprocess
import sys

KERNEL = ("import sys, tilewright as tw, tilewright.language as T\n"
          "n = int(sys.argv[1])\n"
          "@T.prim_func\n"
          "def k(A: T.Tensor((n,), 'float32'), B: T.Tensor((n,), 'float32')):\n"
          "    with T.Kernel(1) as bx:\n"
          "        for i in T.Parallel(n):\n"
          "            B[i] = A[i] * 2.0\n"
          "tw.compile(k, out_idx=[-1])\n")


def test_prune_and_clear_remove_emptied_prefix_directories(tmp_path):
    cache = tmp_path / "c"
    env = dict(os.environ, TW_CACHE_DIR=str(cache))
    script = tmp_path / "k.py"
    script.write_text(KERNEL)

    def compile_(n):
        subprocess.run([sys.executable, str(script), str(n)], env=env, check=True)

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "tilewright", "cache", *args], env=env, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def prefixes():  # the prefix directories, and the entries under each
        kernels = cache / "kernels"
        return {p.name: sorted(e.name for e in p.iterdir()) for p in kernels.iterdir() if not p.name.startswith(".")}

    for n in (8, 9, 10):
        compile_(n)
    before = prefixes()
    assert sum(len(v) for v in before.values()) == 3 and all(before.values())
    assert "removed 3" in cli("prune", "--max-bytes", "1")
    assert prefixes() == {}
    compile_(8)  # its prefix directory is made again
    assert [len(v) for v in prefixes().values()] == [1]
    assert "entries   : 1 kernels" in cli("stats")
    compile_(9)
    assert "removed 2 kernels" in cli("clear")
    assert prefixes() == {}
