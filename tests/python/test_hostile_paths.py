"""Session 19 hostile-input hunt (docs/testing.md, "Session 19: unwritable paths and cache
subversion (h-robust7)"): cache, dump and export paths that cannot be written (a file system that
is read-only or full, a directory of another user, /proc), and caches another user could subvert
(a parent directory they can write, entries that are links out of the cache).

The tests run as root, for whom chmod denies nothing: they deny by other means (tmpfs mounts,
/proc, a child run as `nobody` through setpriv) and skip where the container does not permit
them. Each case that configures the cache runs in a child process (the cache directory is read
once per process); each asserts the error class, the message and that the hint names the fix."""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import pathlib
import textwrap

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError

PY = sys.executable

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    @T.prim_func
    def neg(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = -A[i]
    try:
        k = tw.compile(neg, out_idx=[-1])
        assert np.array_equal(k(np.arange(8, dtype=np.float32)), -np.arange(8, dtype=np.float32))
        if len(sys.argv) > 1:
            tw.export(k, sys.argv[1])
        print("OK", k.stats()["from_disk_cache"])
    except tw.TilewrightError as e:
        print("ERR", e.message.replace("\\n", " "), "|HINT", e.hint, "|AT", e.file, e.line)
""")


def _child(tmp_path, env_update, *argv, user=None):
    """Runs _CHILD with the TW_ variables of env_update only; returns its last line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TW_")}
    env.update(env_update)
    script = tmp_path / "hostile_child.py" if user is None else env_update["_SCRIPT"]
    if user is None:
        script.write_text(_CHILD)
    cmd = [PY, str(script), *argv]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def _tmpfs(path, options):
    path.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def _located_here(e, marker):
    """The error points at the line of this file holding `marker`."""
    with open(__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if marker in text and "_located_here" not in text)
    assert (e.value.file, e.value.line) == (__file__, line), (e.value.file, e.value.line)


@T.prim_func
def _neg(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(8):
            B[i] = -A[i]


# --------------------------------------------------------------------------------- export paths

def test_export_into_a_directory_nobody_can_write():
    """/proc exists and is a directory, but no file can be made in it: the copy of the library
    leaked std::filesystem's exception (RuntimeError), unlocated."""
    k = tw.compile(_neg, out_idx=[-1])
    with pytest.raises(TilewrightError) as e:
        k.export("/proc")  # @export_proc
    assert e.value.message.startswith("cannot write the artifact into the export directory /proc: "), e.value.message
    assert "writable" in e.value.hint and "/proc" in e.value.hint
    _located_here(e, "@export_proc")


def test_export_directory_that_is_not_a_path():
    k = tw.compile(_neg, out_idx=[-1])
    for bad in (5, "", "a\0b", None):
        with pytest.raises(TilewrightError, match="export.. takes a directory path") as e:
            tw.export(k, bad)  # @export_bad_path
        _located_here(e, "@export_bad_path")


def test_export_failure_is_located_at_the_call(tmp_path):
    """Errors about the directory had no location (line 0); they point at the export call now."""
    (tmp_path / "afile").write_text("x")
    k = tw.compile(_neg, out_idx=[-1])
    with pytest.raises(TilewrightError, match="cannot create the export directory .*afile: Not a directory") as e:
        k.export(tmp_path / "afile")  # @export_file
    _located_here(e, "@export_file")


@pytest.mark.parametrize("fails", ["library", "header", "manifest"])
def test_export_onto_a_full_file_system_leaves_no_temporaries(tmp_path, fails):
    """A tmpfs just too small for the library, or for the library and the header, or for those
    and the manifest: each is a located error, and no `.tmp` file or manifest is left behind.
    (The header and manifest were written without checking the flush: a full disk could ship a
    truncated header, its truncated sha256 recorded as the truth.)"""
    k = tw.compile(_neg, out_idx=[-1])
    sizes = {p.name: p.stat().st_size for p in map(pathlib.Path, k.export(tmp_path / "ok"))}
    pages = {n: -(-b // 4096) for n, b in sizes.items()}  # tmpfs counts whole pages
    fits = {"library": 0, "header": pages["lib_neg.so"], "manifest": pages["lib_neg.so"] + pages["_neg.h"]}[fails]
    with _tmpfs(tmp_path / "full", f"size={max(fits, 1) * 4}k,mode=0700") as d:
        with pytest.raises(TilewrightError) as e:
            k.export(d / "e")  # @export_full
        assert e.value.message.startswith(f"cannot write the artifact into the export directory {d / 'e'}: ")
        assert "free space" in e.value.hint
        _located_here(e, "@export_full")
        left = sorted(os.listdir(d / "e"))
        assert not [f for f in left if f.endswith(".tmp")] and "tilewright.manifest" not in left, left


# ------------------------------------------------------------------------ cache and dump paths

def test_cache_on_a_full_file_system_leaves_no_temporaries(tmp_path):
    """64 KiB does not hold the runtime headers: a clear error, and the generated source written
    into tmp/ before the headers is removed (it was left behind by every failed compile)."""
    with _tmpfs(tmp_path / "full", "size=64k,mode=0700") as d:
        out = _child(tmp_path, {"TW_CACHE_DIR": str(d / "c")})
        assert out.startswith(f"ERR cannot build kernel 'neg': cannot write the CPU runtime headers under "
                              f"'{d / 'c' / 'include'}'"), out
        assert "free disk space or set TW_CACHE_DIR" in out, out
        assert os.listdir(d / "c" / "tmp") == []


def test_cache_and_dump_on_a_read_only_file_system(tmp_path):
    with _tmpfs(tmp_path / "ro", "ro,size=64k") as d:
        out = _child(tmp_path, {"TW_CACHE_DIR": str(d / "c")})
        assert out.startswith(f"ERR cannot build kernel 'neg': cannot create directory '{d / 'c'}': Read-only file "
                              "system; set TW_CACHE_DIR to a writable directory or TW_CACHE_DISABLE=1"), out
        out = _child(tmp_path, {"TW_CACHE_DIR": str(tmp_path / "c"), "TW_DUMP_IR": str(d / "dump")})
        assert out.startswith(f"ERR TW_DUMP_IR: cannot write the IR dump to '{d / 'dump'}/neg-"), out
        assert "Read-only file system |HINT set TW_DUMP_IR to a writable directory, or unset it" in out, out


def test_symlink_loop_and_overlong_names(tmp_path):
    os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
    os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
    out = _child(tmp_path, {"TW_CACHE_DIR": str(tmp_path / "loop_a")})
    assert "'" + str(tmp_path / "loop_a") + "': Too many levels of symbolic links" in out, out
    assert out.startswith("ERR cannot build kernel 'neg'") and "docs/environment.md" in out, out
    long = tmp_path / ("x" * 300)
    out = _child(tmp_path, {"TW_CACHE_DIR": str(long)})
    assert f"cannot create directory '{long}': File name too long; set TW_CACHE_DIR" in out, out


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_paths_another_user_cannot_write(tmp_path):
    """Run as `nobody`: a cache, dump and export directory under root's private directory."""
    home = tempfile.mkdtemp(prefix="tw-nobody-")  # in /tmp (sticky): nobody's own directory
    denied = tempfile.mkdtemp(prefix="tw-root-")  # root's, mode 0700
    try:
        os.chown(home, 65534, 65534)
        script = os.path.join(home, "child.py")
        with open(script, "w") as f:
            f.write(_CHILD)
        own = {"_SCRIPT": script, "HOME": home}
        c = os.path.join(denied, "c")
        out = _child(tmp_path, {**own, "TW_CACHE_DIR": c}, user=65534)
        assert out.startswith(f"ERR cannot build kernel 'neg': cannot create directory '{c}': Permission "
                              "denied; set TW_CACHE_DIR to a writable directory"), out
        cache = os.path.join(home, "cache")
        out = _child(tmp_path, {**own, "TW_CACHE_DIR": cache, "TW_DUMP_IR": os.path.join(denied, "d")}, user=65534)
        assert out.startswith(f"ERR TW_DUMP_IR: cannot write the IR dump to '{denied}/d/neg-"), out
        assert "Permission denied |HINT set TW_DUMP_IR" in out, out
        out = _child(tmp_path, {**own, "TW_CACHE_DIR": cache}, os.path.join(denied, "e"), user=65534)
        assert out.startswith(f"ERR cannot create the export directory {denied}/e: Permission denied |HINT pass a "
                              "writable directory |AT " + script), out
        # A directory of root's that exists: nobody may enter it but not write into it.
        os.chmod(denied, 0o755)
        out = _child(tmp_path, {**own, "TW_CACHE_DIR": cache}, denied, user=65534)
        assert out.startswith(f"ERR cannot write the artifact into the export directory {denied}: "), out
        assert "Permission denied" in out and "|HINT pass a directory that is writable" in out, out
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(denied, ignore_errors=True)


# ------------------------------------------------------------------------- cache subversion

def test_cache_under_a_directory_others_can_write_is_refused(tmp_path):
    """With a parent another user can write (and no sticky bit), they could rename the cache
    away and put theirs in its place between a lookup's sha256 check and the dlopen: refused,
    naming that parent and the fix. A sticky parent (like /tmp) is fine."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    out = _child(tmp_path, {"TW_CACHE_DIR": str(shared / "c")})
    assert out.startswith(f"ERR cannot build kernel 'neg': refusing to use cache directory (TW_CACHE_DIR) "
                          f"'{shared / 'c'}': its parent directory '{shared}' is writable by other users without "
                          "the sticky bit (mode 0777)"), out
    assert "set TW_CACHE_DIR to a directory whose parents only you or root can write" in out, out
    shared.chmod(0o1777)
    assert _child(tmp_path, {"TW_CACHE_DIR": str(shared / "c")}) == "OK False"
    # A link to a good cache, placed where others can write, can be replaced as well.
    link_dir = tmp_path / "links"
    link_dir.mkdir()
    os.symlink(shared / "c", link_dir / "c")
    link_dir.chmod(0o777)
    out = _child(tmp_path, {"TW_CACHE_DIR": str(link_dir / "c")})
    assert f"its parent directory '{link_dir}' is writable by other users" in out, out
    # TW_CACHE_DISABLE=1: the private temporary directory under such a TMPDIR (none is made).
    out = _child(tmp_path, {"TW_CACHE_DISABLE": "1", "TMPDIR": str(link_dir)})
    assert out.startswith(f"ERR cannot build kernel 'neg': refusing to use private temporary directory "
                          f"(TW_CACHE_DISABLE=1) '{link_dir}/tilewright-XXXXXX': its parent directory '{link_dir}' "
                          "is writable by other users"), out
    assert "set TMPDIR to a directory only you can write, or one with the sticky bit such as /tmp" in out, out
    assert sorted(p.name for p in link_dir.iterdir()) == ["c"]
    # A parent owned by another (non-root) user: they can rename what is in it.
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    out = _child(tmp_path, {"TW_CACHE_DIR": str(theirs / "c")})
    assert f"its parent directory '{theirs}' is owned by uid 65534 (neither this user nor root)" in out, out


def _populate(tmp_path):
    cache = tmp_path / "cache"
    assert _child(tmp_path, {"TW_CACHE_DIR": str(cache)}) == "OK False"
    (entry,) = [e for e in (cache / "kernels").glob("*/*") if (e / "kernel.so").exists()]
    return cache, entry


def test_entry_that_links_out_of_the_cache_is_not_loaded(tmp_path):
    """An entry directory replaced by a link to a copy elsewhere was followed and loaded (its
    files are checked, the directories above them were not); now a miss: the link is removed
    (not what it points at) and the kernel compiled again."""
    cache, entry = _populate(tmp_path)
    outside = tmp_path / "outside"
    shutil.move(entry, outside)
    os.symlink(outside, entry)
    assert _child(tmp_path, {"TW_CACHE_DIR": str(cache)}) == "OK False"  # compiled, not loaded
    assert entry.is_dir() and not entry.is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["kernel.so", "manifest"]  # left alone
    assert _child(tmp_path, {"TW_CACHE_DIR": str(cache)}) == "OK True"


def test_prefix_directory_that_links_out_of_the_cache(tmp_path):
    """The same one level up: the key's prefix directory a link. A damaged entry below it was
    removed and its rebuilt entry published through the link, in the directory outside the
    cache; now the link is removed (what it points at is left alone) and the entry rebuilt in
    the cache."""
    cache, entry = _populate(tmp_path)
    prefix = entry.parent
    outside = tmp_path / "outside"
    shutil.move(prefix, outside)
    os.symlink(outside, prefix)
    (outside / entry.name / "manifest").write_text("garbage")  # a damaged entry, seen through the link
    assert _child(tmp_path, {"TW_CACHE_DIR": str(cache)}) == "OK False"
    assert prefix.is_dir() and not prefix.is_symlink()
    assert sorted(p.name for p in (outside / entry.name).iterdir()) == ["kernel.so", "manifest"]
    assert _child(tmp_path, {"TW_CACHE_DIR": str(cache)}) == "OK True"


def test_entry_directory_others_can_write_is_not_loaded(tmp_path):
    """Another user able to write the entry directory could swap kernel.so after its check."""
    cache, entry = _populate(tmp_path)
    entry.chmod(0o777)
    assert _child(tmp_path, {"TW_CACHE_DIR": str(cache)}) == "OK False"
    assert entry.stat().st_mode & 0o777 == 0o700
