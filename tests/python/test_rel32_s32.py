"""Session 32 reliability hunt (h-rel32): kernel arguments, the CLI, the AOT runtime, the knobs.
Findings F1.. of docs/testing.md "Session 32: rel32". Attempts that could crash or hang run in child
processes, with timeouts."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

torch = pytest.importorskip("torch")

M = T.symbolic("M")


@tw.jit
def add_in_place():
    @T.prim_func
    def add_s(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32"), s: T.float32):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < M:
                    Y[bx * 16 + i] = X[bx * 16 + i] + s
    return add_s


@tw.jit(out_idx=[-1])
def twice():
    @T.prim_func
    def twice(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < M:
                    Y[bx * 16 + i] = X[bx * 16 + i] * 2.0
    return twice


def _values(n):
    return torch.from_numpy(np.random.default_rng(32).standard_normal(n).astype(np.float32))


@pytest.mark.parametrize("n", [0, 1, 17])
def test_f1_neg_bit_input_is_read_with_its_sign(n):
    # A neg-bit view's memory holds the negated values; DLPack exported that memory, so the kernel
    # computed with the wrong sign (twice(-x) gave 2x), silently.
    x = _values(n)
    v = x._neg_view()
    assert v.is_neg()
    np.testing.assert_array_equal(twice()(v).numpy(), (-x * 2).numpy())
    y = torch.zeros(n)
    add_in_place()(v, y, 1.5)
    np.testing.assert_array_equal(y.numpy(), (-x + 1.5).numpy())


def test_f1_neg_bit_output_written_in_place_is_refused():
    # The kernel wrote x + s into the memory; torch then showed -(x + s).
    y = torch.zeros(5)._neg_view()
    with pytest.raises(tw.TilewrightError, match=r"negated view.*writes it in place") as e:
        add_in_place()(torch.ones(5), y, 1.0)
    assert "resolve_neg" in e.value.hint
    assert torch.equal(y, torch.zeros(5))


@pytest.mark.parametrize("layout", ["sparse", "mkldnn"])
def test_f2_non_strided_torch_tensors(layout):
    # A sparse input was refused after a failed copy; an mkldnn one leaked RuntimeError ("Cannot access
    # data pointer of Tensor that doesn't have storage") from the overlap check. Inputs are densified.
    x = _values(9)
    conv = (lambda t: t.to_sparse()) if layout == "sparse" else (lambda t: t.to_mkldnn())
    np.testing.assert_array_equal(twice()(conv(x)).numpy(), (x * 2).numpy())
    with pytest.raises(tw.TilewrightError, match=r"has layout .*writes it in place") as e:
        add_in_place()(x, conv(torch.zeros(9)), 1.0)
    assert "to_dense" in e.value.hint


@pytest.mark.parametrize("path", ["", ".", "/"])
def test_f3_reference_path_naming_no_file(path, capsys):
    # tw.testing.Reference('') and `tilewright check ''` leaked ValueError("PosixPath('.') has an empty name").
    with pytest.raises(tw.TilewrightError, match="names no file") as e:
        tw.testing.Reference(path)
    assert "refs/softmax" in e.value.hint
    from tilewright import cli
    assert cli.main(["check", path]) == 1
    assert "names no file" in capsys.readouterr().err


def _local_autotuned(**kw):
    @tw.autotune(configs=[tw.Config(block=8), tw.Config(block=16)], key=["N"], verbose=False, **kw)
    @tw.jit(out_idx=[-1])
    def local_twice(N, block=8):
        @T.prim_func
        def local_twice(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block)) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < N:
                        Y[bx * block + i] = X[bx * block + i] * 2.0
        return local_twice
    return local_twice


def test_f4_autotune_defined_in_a_function():
    # The default executor's spawned workers looked the factory up by its qualified name
    # ('_local_autotuned.<locals>.local_twice'): AttributeError "'function' object has no attribute
    # '<locals>'" from every worker. It is compiled inline now, as an interactive session's is.
    tuner = _local_autotuned()
    assert tuner.tune(37) in tuner.configs  # a sweep, whatever the store holds
    x = np.arange(37, dtype=np.float32)
    np.testing.assert_array_equal(tuner(37)(x), x * 2)
    import concurrent.futures as cf
    with cf.ProcessPoolExecutor(1) as pool:
        with pytest.raises(tw.TilewrightError, match=r"defined inside a function.*cannot import it") as e:
            _local_autotuned(executor=pool).tune(37)
    assert "top level of a module" in e.value.hint


def test_f5_a_malformed_knob_is_the_cli_error_not_a_traceback(tmp_path):
    # `import tilewright` read TW_VERBOSE / TW_PROGRESS (all knobs at once) and raised there, so every
    # command, `tilewright doctor` included, ended in a traceback through tilewright/log.py.
    import os
    import subprocess
    import sys
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "c"), TW_NUM_THREADS="abc")
    code = ("import tilewright, sys\n"
            "try:\n    tilewright.cache_info()\nexcept ValueError as e:\n    print('EXC', e)\n"
            "from tilewright.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    for cmd in (["doctor"], ["cache", "stats"]):
        r = subprocess.run([sys.executable, "-c", code, *cmd], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert "EXC environment variable TW_NUM_THREADS='abc' is invalid" in r.stdout, r.stdout
        assert "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("tilewright: error: environment variable TW_NUM_THREADS='abc' is invalid"), r.stderr
        assert "hint: fix or unset it" in r.stderr


def test_f6_export_names_too_long_for_a_file_name(tmp_path):
    # A library / kernel name names the artifact's files: past 255 bytes the export failed "File name too long"
    # with the hint "pass a directory that is writable and has free space".
    k = twice()
    k(np.ones(3, np.float32))  # compiled (symbolic M)
    for kw, what in (({"name": "a" * 201}, "library name"), ({"name": "lib"}, "kernel name")):
        kernels = [k] if what == "library name" else {"b" * 300: k}
        with pytest.raises(tw.TilewrightError, match=f"{what} '.*' is (201|300) characters long") as e:
            tw.export(kernels, tmp_path / "art", **kw)
        assert e.value.hint == "use a shorter name"
    tw.export({"c" * 200: k}, tmp_path / "ok", name="d" * 200)
    from tilewright.deploy import read_manifest
    assert read_manifest(tmp_path / "ok")["kernels"][0]["name"] == "c" * 200


def test_f7_tune_refuses_a_keyword_given_twice(capsys):
    # `tilewright tune f.py:k N=5 N=6` tuned N=6 without a word.
    from tilewright import cli
    assert cli.main(["tune", "no_such_file.py:k", "N=5", "N=6"]) == 2
    assert "argument 'N' given twice (N=5, N=6)" in capsys.readouterr().err


def test_f8_a_cache_directory_linked_to_a_shared_one_is_not_chmodded(tmp_path):
    # TW_CACHE_DIR (or its kernels/) a link to /tmp: the error said "run `chmod 700 <the link>`", which
    # locks every other user out of /tmp. It names the link's target and says to remove the link.
    import os
    import subprocess
    import sys
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (tmp_path / "cache").symlink_to(shared)
    code = ("import numpy as np, tilewright as tw, tilewright.language as T\n"
            "@T.prim_func\n"
            "def f8(X: T.Tensor((4,), 'float32'), Y: T.Tensor((4,), 'float32')):\n"
            "    with T.Kernel(1) as bx:\n"
            "        for i in T.Parallel(4):\n"
            "            Y[i] = X[i]\n"
            "try:\n    tw.compile(f8, out_idx=[-1])\nexcept tw.TilewrightError as e:\n    print(e.message)\n")
    script = tmp_path / "f8.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], env=dict(os.environ, TW_CACHE_DIR=str(tmp_path / "cache")),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"it is a link to '{shared}', which is writable by other users (mode 1777)" in r.stdout, r.stdout
    assert "remove the link" in r.stdout and "chmod 700" not in r.stdout, r.stdout
    assert (shared.stat().st_mode & 0o7777) == 0o1777 and not any(shared.iterdir())
