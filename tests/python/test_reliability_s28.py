"""Session 28's reliability hunt (h-rel17, docs/testing.md "Session 28: ... (h-rel17)"): a bad kernel,
argument, environment value or cache entry must be a clear Tilewright error naming the source line and the
fix, never a signal, a hang, a leaked internal exception or a silent wrong answer. Each finding F<n> of the
hunt (/work/rel17-findings.md) has a test here: a passing one where it was fixed, a strict xfail where not.
"""
import os
import resource
import subprocess
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T


# ---- F1: @tw.jit's cache key told 0.0 from -0.0, 1 from 1.0 / True, and NaN from itself -----------------

@tw.jit(out_idx=[-1])
def _recip(f):
    @T.prim_func
    def recip(X: T.Tensor((3,), "float32"), Y: T.Tensor((3,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(3):
                Y[i] = X[i] / f
    return recip


@tw.jit(out_idx=[-1])
def _imul(f):
    @T.prim_func
    def imul(X: T.Tensor((3,), "int32"), Y: T.Tensor((3,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(3):
                Y[i] = X[i] * f
    return imul


def test_f1_jit_key_tells_signed_zero_and_int_from_float():
    x = np.ones(3, np.float32)
    assert np.all(_recip(0.0)(x) == np.inf)
    assert np.all(_recip(-0.0)(x) == -np.inf)  # was the 0.0 kernel: +inf
    xi = np.full(3, 2 ** 24 + 1, np.int32)  # not a float32: X * 1.0 rounds, X * 1 does not
    assert np.all(_imul(1.0)(xi) == 2 ** 24)
    assert np.all(_imul(1)(xi) == 2 ** 24 + 1)  # was the 1.0 kernel: 2 ** 24
    assert np.all(_imul(True)(xi) == 2 ** 24 + 1)
    assert _recip(float("nan")) is _recip(float("nan"))  # NaN != NaN: was a new build per call
    assert _imul(np.int64(1)) is _imul(1)  # a numpy number is the Python number it holds
    assert np.all(_imul(np.float32(1.0))(xi) == 2 ** 24)  # a float: built with 1.0 (numpy scalars were refused)


# ---- F3: a cache entry's manifest that is a FIFO (or a link to /dev/zero) hung every lookup -------------

_CHILD = """
import sys, numpy as np
import tilewright as tw, tilewright.language as T
@T.prim_func
def twice(X: T.Tensor((5,), "float32"), Y: T.Tensor((5,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(5):
            Y[i] = X[i] * 2.0
k = tw.compile(twice, out_idx=[-1])
x = np.arange(5, dtype=np.float32)
assert np.array_equal(k(x), x * 2), "wrong answer"
print("hit" if k.from_disk_cache else "compiled")
"""


def _child(cache, **env):
    """Runs _CHILD (compile, call, check) in a process of its own on the cache directory `cache`."""
    script = cache.parent / "child.py"
    script.write_text(_CHILD)

    def limit():  # a manifest read without bound (a link to /dev/zero) stops at 2 GiB, not the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    env = {**os.environ, "TW_CACHE_DIR": str(cache), "TW_PROGRESS": "0", **env}
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)


def test_f3_manifest_that_is_a_fifo_or_a_link_to_dev_zero_is_a_bad_entry(tmp_path):
    cache = tmp_path / "cache"
    r = _child(cache)
    assert r.returncode == 0 and "compiled" in r.stdout, r.stderr
    (manifest,) = cache.glob("kernels/*/*/manifest")
    for plant in (os.mkfifo, lambda p: os.symlink("/dev/zero", p)):
        manifest.unlink()
        plant(manifest)
        r = _child(cache)  # hung in the open of the FIFO / read /dev/zero until memory ran out
        assert r.returncode == 0 and "compiled" in r.stdout, r.stderr  # a bad entry: removed and rebuilt
        assert manifest.is_file() and not manifest.is_symlink()


# ---- F4: a damaged tuning store leaked FileExistsError, IsADirectoryError, KeyError, ZeroDivisionError, ... --

def test_f4_damaged_tuning_store_is_measured_again_or_a_located_error(tmp_path):
    autotune = sys.modules["tilewright.autotune"]  # the module (tw.autotune is the decorator)
    good = '{"flops": 1e10, "bytes_per_s": 1e9}'
    for text in ("[1, 2]", "{}", '{"flops": 0, "bytes_per_s": 1}', '{"flops": "x", "bytes_per_s": null}',
                 '{"flops": NaN, "bytes_per_s": 1}', '{"flops": true, "bytes_per_s": 1}', "[" * 100000, '"\xff"'):
        p = tmp_path / "peaks.json"
        p.write_bytes(text.encode("latin-1"))  # '\xff' alone: not UTF-8
        assert autotune._stored_peaks(p) is None and not p.exists(), text  # removed: measured again
    p.write_text(good)
    assert autotune._stored_peaks(p) == {"flops": 1e10, "bytes_per_s": 1e9}
    d = tmp_path / "rec.json"
    d.mkdir()
    with pytest.raises(tw.TilewrightError, match="directory where a stored result belongs"):
        autotune._stored_json(d)  # was IsADirectoryError (and the peaks' os.replace onto it too)
    f = tmp_path / "tune"
    f.write_text("x")
    with pytest.raises(tw.TilewrightError, match="cannot use the tuning cache"):
        autotune._check_private_dir(f)  # was FileExistsError


# ---- F2: constant folding leaked Python's TypeError / ValueError / OverflowError, and pow() could hang -------

def test_f2_constant_folding_errors_are_located():
    def k1(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[0] = ~1.5  # TypeError: bad operand type for unary ~

    def k2(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[0] = min(1)  # TypeError: 'int' object is not iterable

    def k3(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[0] = abs(1, 2)  # TypeError

    def k4(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[0] = pow(2.0, 5000)  # OverflowError

    def k5(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[0] = pow(10, 10 ** 8)  # computed a 300-million-bit integer (10 ** 10 ** 9: minutes)

    for fn, message in ((k1, "'~' of the float constant 1.5"), (k2, r"min\(\) takes at least 2 arguments"),
                        (k3, "abs.. takes 1 argument, got 2"), (k4, r"2.0 \*\* 5000 cannot be computed"),
                        (k5, "does not fit in 64 bits")):
        with pytest.raises(tw.TilewrightError, match=message) as e:
            tw.compile(T.prim_func(fn))
        assert f"{__file__}:" in str(e.value)


# ---- F5: a compiler (TW_CXX) that left a truncated library killed the process with SIGBUS at the load ------

def test_f5_truncated_library_from_the_compiler_is_an_error_not_sigbus(tmp_path):
    import shutil
    cxx = tmp_path / "truncating-g++"  # compiles, exits 0, and cuts its output to 2,000 bytes
    cxx.write_text(f'#!/bin/sh\n"{shutil.which("g++")}" "$@" || exit $?\nprev=\n'
                   'for a; do [ "$prev" = -o ] && truncate -s 2000 "$a"; prev=$a; done\nexit 0\n')
    cxx.chmod(0o700)
    r = _child(tmp_path / "cache", TW_CXX=str(cxx))
    assert r.returncode == 1, (r.returncode, r.stderr)  # was -7 (SIGBUS)
    assert "shorter than its segments" in r.stderr and "TW_CXX" in r.stderr, r.stderr
    assert "child.py:5:" in r.stderr  # located at the kernel's definition


# ---- F6: a reference store (tw.testing.Reference) whose .npz is a FIFO hung; a deep manifest leaked -------

def test_f6_reference_store_fifo_or_deep_manifest_is_a_damaged_store(tmp_path):
    from tilewright.testing import Reference

    def fn(a):
        return a * 2
    inputs = (np.ones(3, np.float32),)
    Reference(tmp_path / "r").check(fn, inputs)  # writes the store
    (tmp_path / "r.npz").unlink()
    os.mkfifo(tmp_path / "r.npz")  # np.load blocked in open() forever
    with pytest.raises(tw.TilewrightError, match="r.npz is not a regular file"):
        Reference(tmp_path / "r").check(fn, inputs)
    (tmp_path / "r.json").write_text("[" * 100000)  # RecursionError
    with pytest.raises(tw.TilewrightError, match="cannot read its manifest"):
        Reference(tmp_path / "r").check(fn, inputs)
    Reference(tmp_path / "r", update=True).check(fn, inputs)  # the hint's fix works
    Reference(tmp_path / "r").check(fn, inputs)


# ---- F7: a compiler that exits 0 without writing its library failed later, in the cache's publish ---------

def test_f7_compiler_that_writes_no_library_is_a_toolchain_error(tmp_path):
    import shutil
    cxx = tmp_path / "lazy-g++"  # everything but the link of a shared library, which it skips, exiting 0
    cxx.write_text(f'#!/bin/sh\nfor a; do [ "$a" = -shared ] && exit 0; done\nexec "{shutil.which("g++")}" "$@"\n')
    cxx.chmod(0o700)
    r = _child(tmp_path / "cache", TW_CXX=str(cxx))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "wrote no library" in r.stderr and "TW_CXX" in r.stderr and "child.py:5:" in r.stderr, r.stderr
    assert "DiskCache::publish" not in r.stderr
