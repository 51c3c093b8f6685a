"""Session 38's reliability pass (h-robust38): no input crashes the process -- a bad kernel,
argument, environment value, cache entry or stored file is a located Tilewright error naming the
fix. Findings F1... are /work/robust38-findings.txt and docs/testing.md "Session 38: no input
crashes the process (h-robust38)"; each fixed finding has a test here."""
import io
import json
import zipfile

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import TilewrightError


def _scale(x):
    return x * 2


def _store_with_header_shape(tmp_path, shape, manifest_agrees):
    """A good reference store whose input0 member is replaced by a .npy header claiming `shape` over
    the original 16 bytes of data (a damaged or crafted archive); the manifest edited to agree or not."""
    s = tmp_path / "s"
    tw.testing.Reference(s, seed=0).check(_scale, (np.ones(4, np.float32),))
    npz, manifest = tmp_path / "s.npz", tmp_path / "s.json"
    with np.load(npz) as z:
        out = z["output0"]
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": shape})
    member.write(np.ones(4, np.float32).tobytes())
    saved = io.BytesIO()
    np.save(saved, out)
    with zipfile.ZipFile(npz, "w") as zf:
        zf.writestr("input0.npy", member.getvalue())
        zf.writestr("output0.npy", saved.getvalue())
    if manifest_agrees:
        m = json.loads(manifest.read_text())
        m["inputs"][0]["shape"] = list(shape)
        manifest.write_text(json.dumps(m))
    return s


@pytest.mark.parametrize("manifest_agrees, what", [
    (False, "input0 is float32 [1099511627776], its manifest says float32 [4]"),
    (True, "input0 holds 16 bytes of data, too few for its float32 [1099511627776]"),
])
def test_f1_reference_store_with_a_huge_header_shape_is_damaged_not_memory_error(tmp_path, manifest_agrees, what):
    """F1: numpy allocates what a .npy header says before reading its data: a store whose header
    claimed 2^40 elements was numpy's MemoryError (4 TiB); now the header is read first."""
    s = _store_with_header_shape(tmp_path, (2**40,), manifest_agrees)
    with pytest.raises(TilewrightError) as e:
        tw.testing.Reference(s).check(_scale)
    msg = str(e.value)
    assert f"the reference store {s} is damaged" in msg and what in msg, msg


def test_f1_truncated_member_data_is_damaged(tmp_path):
    """A header that agrees with the manifest over too few data bytes (a truncated member) is
    reported from the archive's sizes, before any read."""
    s = _store_with_header_shape(tmp_path, (8,), manifest_agrees=True)
    with pytest.raises(TilewrightError, match="holds 16 bytes of data, too few for its float32 \\[8\\]"):
        tw.testing.Reference(s).check(_scale)


@pytest.mark.parametrize("directory, what", [
    ("no-such-artifact-robust38", "no such artifact"),
    ("art\0x", "takes a directory path"),
])
def test_f2_read_manifest_errors_are_located_at_the_call(directory, what):
    """F2: read_manifest's errors had no location (the C++ parser's, file '' line 0), and a NUL in
    the path was cut there (C string) instead of refused."""
    with pytest.raises(TilewrightError, match=what) as e:
        tw.deploy.read_manifest(directory)
    assert e.value.file == __file__ and e.value.line > 0, (e.value.file, e.value.line)


def test_f2_damaged_manifest_is_located_at_the_call(tmp_path):
    (tmp_path / "tilewright.manifest").write_text("tilewright-artifact 2\ntarget cpu\n")
    with pytest.raises(TilewrightError, match="does not end with its checksum line") as e:
        tw.deploy.read_manifest(tmp_path)
    assert e.value.file == __file__ and e.value.line > 0


@pytest.mark.parametrize("command", [["tune", "k.py:f", "4"], ["check", "store", "--fn", "k.py:f"],
                                     ["export", "k.py", "-o", "out"], ["precompile", "k.py"]])
def test_f3_command_line_file_that_is_a_fifo_is_refused_not_read(tmp_path, command):
    """F3: `tilewright tune k.py:f` (and `check --fn`) imported a FIFO named k.py: the import
    blocked forever. Now the one loader of FILE.py (deploy.import_file) refuses anything but a
    regular file, as export / precompile did."""
    import os
    import subprocess
    import sys
    os.mkfifo(tmp_path / "k.py")
    if command[0] == "check":  # the store is read before the function: give it one
        tw.testing.Reference(tmp_path / "store", seed=0).check(_scale, (np.ones(4, np.float32),))
    r = subprocess.run([sys.executable, "-m", "tilewright", *command], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "not a regular file: k.py" in r.stderr, (r.returncode, r.stderr)


def _add_one_factory(n, block=128):
    import tilewright.language as T

    @T.prim_func
    def add_one(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] + 1.0
    return add_one


@pytest.mark.parametrize("call", [lambda f: f(16, 32), lambda f: f(n=16, block=32)])
def test_f4_autotune_call_giving_a_tuned_parameter_is_located(call):
    """F4: an argument the configurations set, given at the call too, was Python's TypeError
    "got multiple values for argument 'block'" from inside the sweep (inspect / the factory call)."""
    tuned = tw.autotune(configs=[tw.Config(block=8), tw.Config(block=16)], key=["n"], executor="inline",
                        verbose=False)(tw.jit(out_idx=[-1])(_add_one_factory))
    with pytest.raises(TilewrightError, match="'block' given at the call, but the configurations set it") as e:
        call(tuned)
    assert e.value.file == __file__ and e.value.line > 0


@pytest.mark.parametrize("returned", [None, 3])
def test_f5_prune_returning_no_list_is_located(returned):
    """F5: prune() returning something that is no list of configurations: the error had no location."""
    tuned = tw.autotune(configs=[tw.Config(block=8)], key=["n"], executor="inline", verbose=False,
                        prune=lambda configs, **key: returned)(tw.jit(out_idx=[-1])(_add_one_factory))
    with pytest.raises(TilewrightError, match="prune\\(\\) must return a list of configurations") as e:
        tuned(16)
    assert e.value.file == __file__ and e.value.line > 0


def test_f6_kernel_pickle_is_a_located_error_and_copies_share_it():
    """F6: pickling a Kernel (multiprocessing, a model checkpoint holding one) or copy.deepcopy of it
    was TypeError "cannot pickle 'Executable' object" (the C++ binding's type name). Now a located
    error naming the fix; copy.copy / copy.deepcopy share the kernel, as they share a function."""
    import copy
    import pickle
    import tilewright.language as T

    @T.prim_func
    def double(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(1) as b:
            for i in T.Parallel(4):
                Y[i] = X[i] * 2.0

    k = tw.compile(double, out_idx=[-1])
    with pytest.raises(TilewrightError, match="kernel 'double' cannot be pickled") as e:
        pickle.dumps(k)
    assert e.value.file == __file__ and e.value.line > 0 and "@tw.jit factory" in e.value.hint
    holder = {"kernel": k, "scale": [2.0]}
    deep = copy.deepcopy(holder)
    assert deep["kernel"] is k and deep["scale"] is not holder["scale"] and copy.copy(k) is k
    np.testing.assert_array_equal(deep["kernel"](np.arange(4, dtype=np.float32)), [0, 2, 4, 6])


def test_f7_output_elements_no_block_writes_are_reported():
    """F7: a kernel whose stores leave a gap in an out_idx output (a tile 4 columns wide stored every
    8 columns) returned garbage there on cpu (checked or not) and on ascend910b, with no report. Fixed by
    h-unwritten39: the simulator reports it (cpu's checked mode too: test_unwritten39_s39)."""
    import tilewright.language as T

    @T.prim_func
    def gap(X: T.Tensor((8, 16), "float32"), Y: T.Tensor((8, 16), "float32")):
        with T.Kernel(2) as bx:
            t = T.alloc_fragment((8, 4), "float32")
            T.copy(X[0, bx * 8], t)
            T.copy(t, Y[0, bx * 8])

    k = tw.compile(gap, out_idx=[-1], target="ascend910b")
    with pytest.raises(TilewrightError, match=r"unwritten output: element \[0, 4\] of output 'Y' .* and 63 more"):
        k(np.ones((8, 16), np.float32))


def test_f8_tmpdir_naming_no_directory_under_cache_disable_is_named(tmp_path):
    """F8: with TW_CACHE_DISABLE=1 the private directory is made under TMPDIR; a TMPDIR naming no
    directory was std::filesystem's "temp_directory_path: No such file or directory"."""
    import os
    import subprocess
    import sys
    code = ("import numpy as np, tilewright as tw, tilewright.language as T\n"
            "@T.prim_func\n"
            "def k(X: T.Tensor((4,), 'float32'), Y: T.Tensor((4,), 'float32')):\n"
            "    with T.Kernel(1) as b:\n"
            "        for i in T.Parallel(4):\n"
            "            Y[i] = X[i]\n"
            "try:\n"
            "    tw.compile(k, out_idx=[-1])\n"
            "except tw.TilewrightError as e:\n"
            "    print(e.message)\n")
    (tmp_path / "k.py").write_text(code)  # a kernel's source is read from its file
    env = {**os.environ, "TW_CACHE_DISABLE": "1", "TMPDIR": str(tmp_path / "missing")}
    r = subprocess.run([sys.executable, str(tmp_path / "k.py")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "TMPDIR names no directory (No such file or directory); set TMPDIR" in r.stdout, (r.stdout, r.stderr)


def test_f9_indexing_an_element_again_names_the_buffer_not_an_internal_object():
    """F9: A[i][0] in a kernel said "Python value <tilewright.frontend.core.Operand object at 0x...>
    (Operand) cannot be indexed": an internal object's repr, no hint."""
    import tilewright.language as T

    with pytest.raises(TilewrightError, match="an element of 'A' cannot be indexed again") as e:
        @T.prim_func  # parsed (and refused) where it is defined
        def twice(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as b:
                for i in T.Parallel(4):
                    B[i] = A[i][0]
    assert "Operand" not in str(e.value) and e.value.hint == "index every dimension in one subscript: A[i, j]"
    assert e.value.file == __file__ and e.value.line > 0
