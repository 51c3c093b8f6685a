"""Session 22 workflow fixes (h-workflow10; hunt10b's findings F1-F6 on the seed article's path):
tw.testing.Reference's default tolerance, damaged / half stores, 0-d values and None outputs;
the autotune store key and a stored configuration that no longer compiles; a broken host
toolchain as an environment error, and `tilewright doctor` building a one-line library."""
import importlib.util
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilewright as tw
import tilewright.autotune  # noqa: F401 - the module (tw.autotune is the decorator)
from tilewright import TilewrightError
from tilewright.testing import Reference, randn

at = sys.modules["tilewright.autotune"]


def _scale(x):
    return x * 2


def _store(tmp_path):
    """A good store of _scale on 8 float32 values (inputs seeded)."""
    s = tmp_path / "s"
    Reference(s, seed=0).check(_scale, (randn((8,), seed=0),))
    return s


def _damaged_error(s, *parts):
    """check() on store `s` raises a TilewrightError naming the store and the fix."""
    with pytest.raises(TilewrightError) as e:
        Reference(s).check(_scale)
    msg = str(e.value)
    assert f"the reference store {s} is damaged" in msg, msg
    assert "update=True" in msg, msg
    for p in parts:
        assert p in msg, msg
    return msg


# ---- F1: the default tolerance is the less precise of the function's and the reference's ---------------

def test_float32_function_checked_against_float64_reference_gets_float32_tolerance(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 200), np.float32), rng.standard_normal((200, 48), np.float32)
    ref = Reference(tmp_path / "mm", seed=0)
    # float32 products summed in another order than float64's: differences ~1e-5 at |x| ~ 30
    got = ref.check(lambda x, y: x @ y, (a, b), expected=lambda x, y: x.astype(np.float64) @ y.astype(np.float64))
    assert got.dtype == np.float32
    m = json.loads((tmp_path / "mm.json").read_text())
    assert m["tolerance"] == {"atol": 1e-4, "rtol": 1e-4}          # float32's, not float64's 1e-7
    assert m["outputs"] == [{"shape": [64, 48], "dtype": "float64"}]
    Reference(tmp_path / "mm").check(lambda x, y: x @ y)            # the later check passes too
    with pytest.raises(AssertionError, match="atol 0.0001"):        # and still catches a wrong kernel
        Reference(tmp_path / "mm").check(lambda x, y: x @ y + 1e-2)


def test_explicit_tolerance_still_wins(tmp_path):
    Reference(tmp_path / "t", atol=0.5, rtol=0.0).check(_scale, (np.ones(3, np.float32),),
                                                         expected=lambda x: x.astype(np.float64) * 2)
    assert json.loads((tmp_path / "t.json").read_text())["tolerance"] == {"atol": 0.5, "rtol": 0.0}


def test_output_dtype_without_default_tolerance_is_a_tilewright_error(tmp_path):
    # int16 has one since session 29 (every integer width is exact, rel29 F2), and a complex output, which had
    # none, is refused before the store is written (rel29 F1 / F12: assert_close compares real numbers)
    with pytest.raises(TilewrightError, match=r"output 0 has dtype complex64.*\n(.*\n)*.*hint") as e:
        Reference(tmp_path / "i").check(lambda x: x.astype(np.complex64), (np.ones(3, np.int16),))
    assert "test_workflow_s22.py" in str(e.value)


# ---- F2: a damaged store is a TilewrightError naming it and the fix -----------------------------------

@pytest.mark.parametrize("damage, what", [
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "BadZipFile"),
    (lambda p: p.write_bytes(b"garbage"), "as an .npz archive"),
    (lambda p: p.write_bytes(b""), "as an .npz archive"),
    (lambda p: (p.unlink(), p.mkdir()), "IsADirectoryError"),
])
def test_unreadable_npz(tmp_path, damage, what):
    s = _store(tmp_path)
    damage(s.with_name("s.npz"))
    msg = _damaged_error(s, str(s.with_name("s.npz")), what)
    assert "allow_pickle" not in msg  # never suggests unpickling an untrusted file


def test_npz_holding_a_pickled_object_array_is_not_unpickled(tmp_path):
    s = _store(tmp_path)
    np.savez(s.with_name("s.npz"), input0=np.array([{"x": 1}] * 8, dtype=object), output0=np.zeros(8, np.float32))
    # its .npy header is read first (robust38 F1): the object dtype is refused before any data is read
    msg = _damaged_error(s, "input0 is object [8], its manifest says float32 [8]")
    assert "allow_pickle" not in msg


def test_npz_missing_or_extra_arrays(tmp_path):
    s = _store(tmp_path)
    with np.load(s.with_name("s.npz")) as z:
        out = z["output0"]
    np.savez(s.with_name("s.npz"), output0=out)
    _damaged_error(s, "has no array input0")
    np.savez(s.with_name("s.npz"), input0=out, output0=out, stray=out)
    _damaged_error(s, "does not list: stray")


@pytest.mark.parametrize("manifest, what", [
    ({}, "has format None"),
    ([1, 2], "holds a JSON list, not an object"),
    ("not json {", "cannot read its manifest"),
    ({"format": 2}, "has format 2; this Tilewright reads format 1"),
    ({"format": 1, "outputs": []}, "has no list 'inputs'"),
    ({"format": 1, "inputs": [{"shape": [8]}], "outputs": []}, "inputs[0] has no dtype"),
    ({"format": 1, "inputs": [{"shape": "8", "dtype": "float32"}], "outputs": []}, "inputs[0] has no shape"),
    ({"format": 1, "inputs": [{"shape": [8], "dtype": "object"}], "outputs": []}, "inputs[0] has no dtype"),
    ({"format": 1, "inputs": [{"shape": [8], "dtype": "float32"}], "outputs": [{"shape": [8], "dtype": "float32"}],
      "tolerance": {"atol": -1, "rtol": 0}}, "has no tolerance"),
])
def test_bad_manifest(tmp_path, manifest, what):
    s = _store(tmp_path)
    s.with_name("s.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    _damaged_error(s, str(s.with_name("s.json")), what)


@pytest.mark.parametrize("field, value, what", [
    ("shape", [4, 2], "input0 is float32 [8], its manifest says float32 [4, 2]"),
    ("dtype", "float64", "input0 is float32 [8], its manifest says float64 [8]"),
])
def test_manifest_not_matching_the_arrays(tmp_path, field, value, what):
    s = _store(tmp_path)
    m = json.loads(s.with_name("s.json").read_text())
    m["inputs"][0][field] = value
    s.with_name("s.json").write_text(json.dumps(m))
    _damaged_error(s, what)


def test_update_rewrites_a_damaged_store(tmp_path):
    s = _store(tmp_path)
    s.with_name("s.json").write_text("{}")
    Reference(s, update=True).check(_scale, (np.ones(4, np.float32),))
    Reference(s).check(_scale)


def test_cli_check_reports_a_damaged_store(tmp_path, capsys):
    from tilewright.cli import main
    s = _store(tmp_path)
    s.with_name("s.npz").write_bytes(b"garbage")
    assert main(["check", str(s), "--fn", "test_workflow_s22:_scale"]) != 0
    err = capsys.readouterr().err
    assert "is damaged" in err and "update=True" in err


# ---- F3: half a store is damaged, not absent ---------------------------------------------------------

@pytest.mark.parametrize("gone", ["s.json", "s.npz"])
def test_half_a_store_is_an_error_naming_the_missing_file(tmp_path, gone):
    s = _store(tmp_path)
    kept = s.with_name("s.npz" if gone == "s.json" else "s.json")
    before = kept.read_bytes()
    s.with_name(gone).unlink()
    with pytest.raises(TilewrightError) as e:  # a changed function with inputs: no fresh golden run
        Reference(s).check(lambda x: x * 5, (np.ones(8, np.float32),))
    msg = str(e.value)
    assert f"{s.with_name(gone)} is missing ({kept.name} is there" in msg and "update=True" in msg, msg
    assert kept.read_bytes() == before and not s.with_name(gone).exists()  # nothing overwritten


def test_cli_check_on_half_a_store(tmp_path, capsys):
    from tilewright.cli import main
    s = _store(tmp_path)
    s.with_name("s.json").unlink()
    assert main(["check", str(s), "--fn", "test_workflow_s22:_scale"]) != 0
    assert "s.json is missing" in capsys.readouterr().err


# ---- F4: 0-d values round-trip as 0-d; a None output is a clear error ------------------------------

def test_scalar_output_and_0d_input_round_trip(tmp_path):
    seen = []

    def loss(x, w):
        seen.append(np.shape(w))
        return float((x * w).sum())

    x, w = np.arange(3, dtype=np.float32), np.array(2.0, np.float32)
    assert Reference(tmp_path / "l").check(loss, (x, w)) == 6.0
    assert Reference(tmp_path / "l").check(loss) == 6.0
    assert seen == [(), (), ()]
    m = json.loads((tmp_path / "l.json").read_text())
    assert m["inputs"][1] == {"shape": [], "dtype": "float32"} and m["outputs"] == [{"shape": [], "dtype": "float64"}]
    r = Reference(tmp_path / "n").check(lambda v: np.float32(v.sum()), (np.ones(5, np.float32),))
    assert r == 5.0
    Reference(tmp_path / "n").check(lambda v: np.float32(v.sum()))


def test_none_output_is_a_tilewright_error(tmp_path):
    def in_place(x):
        x *= 2

    with pytest.raises(TilewrightError, match="fn returned None") as e:
        Reference(tmp_path / "p").check(in_place, (np.ones(4, np.float32),))
    assert "return that argument" in str(e.value) and "test_workflow_s22.py" in str(e.value)
    with pytest.raises(TilewrightError, match="expected returned None as output 1"):
        Reference(tmp_path / "q").check(lambda x: (x, x), (np.ones(4, np.float32),), expected=lambda x: (x, None))
    assert not (tmp_path / "p.npz").exists() and not (tmp_path / "q.npz").exists()


def test_function_writing_into_its_input_stores_the_input_as_given(tmp_path):
    def double_in_place(x):
        x *= 2
        return x

    x = np.ones(4, np.float32)
    Reference(tmp_path / "w").check(double_in_place, (x,), expected=lambda v: v.astype(np.float64) * 2)
    with np.load(tmp_path / "w.npz") as z:
        assert (z["input0"] == 1).all() and (z["output0"] == 2).all()
    Reference(tmp_path / "w").check(double_in_place)


# ---- F5: the tuning store key has the factory's code; a stale stored config re-tunes ----------------

FACTORY = textwrap.dedent("""
    import tilewright as tw
    import tilewright.language as T

    WIDTH = {width}

    @tw.autotune(configs=[tw.Config(block=16), tw.Config(block=1024)], key=["n"], executor="inline",
                 verbose=False, warmup=0, rep=1)
    @tw.jit(out_idx=[-1])
    def add_one(n, block=16):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                t = T.alloc_fragment((block,), "float32")
                big = T.alloc_fragment((block * WIDTH,), "float32")
                T.copy(A[bx * block], t)
                T.fill(big, 0.0)
                T.copy(A[bx * block], big[0:block])
                for i in T.Parallel(block):
                    t[i] = t[i] + 1.0{extra}
                T.copy(t, B[bx * block])
        return main
""")


def _factory(tmp_path, name, width=1, extra=""):
    """Module 'tunek' (the same module:qualname for every version) from its own file."""
    d = tmp_path / name
    d.mkdir()
    (d / "tunek.py").write_text(FACTORY.format(width=width, extra=extra))
    spec = importlib.util.spec_from_file_location("tunek", d / "tunek.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.add_one


def test_tuning_store_key_covers_the_factory_code(tmp_path, monkeypatch):
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")
    v1, v1_again = _factory(tmp_path, "v1"), _factory(tmp_path, "v1b")
    v2 = _factory(tmp_path, "v2", extra="\n                t[i] = t[i] * 1.0")
    assert (v1._module, v1._qualname) == (v2._module, v2._qualname)
    assert v1._store_path({"n": 64}, "cpu") == v1_again._store_path({"n": 64}, "cpu")
    assert v1._store_path({"n": 64}, "cpu") != v2._store_path({"n": 64}, "cpu")
    assert at.code_hash(v1.fn) != at.code_hash(v2.fn)


def test_stored_config_that_no_longer_compiles_is_tuned_again(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")
    # the factory's source is the same; WIDTH, outside it, grew: one row of 1024 x 64 float32 overflows UB
    # (not rows the compiler could run in groups: session 24's split_rows; and the part-tile copy into it keeps
    # the compiler from running the row in column blocks: session 25's split_cols)
    old, new = _factory(tmp_path, "old", width=1), _factory(tmp_path, "new", width=64)
    path = old._store_path({"n": 1024}, "ascend910b")
    assert path == new._store_path({"n": 1024}, "ascend910b")
    at._check_private_dir(path.parent)
    at._write_private(path, json.dumps({"config": {"block": 1024}}))   # what tuning the old one stored
    with caplog.at_level(logging.WARNING, logger="tilewright"):
        k = new(1024, target="ascend910b")
    assert new.best_config == tw.Config(block=16)
    assert [r["status"] for r in new.report] == ["timed", "dropped"]
    msgs = [r.getMessage() for r in caplog.records if "no longer compiles" in r.getMessage()]
    assert len(msgs) == 1 and "block=1024" in msgs[0] and str(path) in msgs[0] and "tuning again" in msgs[0], msgs
    assert json.loads(path.read_text())["config"] == {"block": 16}
    x = tw.testing.randn((1024,), seed=0)
    tw.testing.assert_close(k(x), x + 1)


# ---- F6: a broken host toolchain is an environment error; doctor builds a library -------------------

KERNEL = textwrap.dedent("""
    import tilewright as tw

    try:
        @tw.compile(target="cpu")
        def cp(A: tw.Tensor((8, 8), "float32")):
            out = tw.output((8, 8), dtype="float32")
            tile = tw.load(A, (0, 0), (8, 8))
            tw.store(out, (0, 0), tile)
            return out
    except Exception as e:
        print(type(e).__name__)
        print(e)
""")


def _broken_env(tmp_path, how):
    env = {"HOME": str(tmp_path), "TW_CACHE_DIR": str(tmp_path / "cache"), "TW_PROGRESS": "0"}
    if how == "no-as":  # a PATH with the compiler driver only: no binutils (as, ld)
        bin_ = tmp_path / "onlygpp"
        bin_.mkdir()
        (bin_ / "g++").symlink_to(os.path.realpath(shutil.which("g++")))
        env["PATH"] = str(bin_)
    else:  # TW_CXX names a program that is not a C++ compiler (its --version works)
        env["PATH"] = os.environ["PATH"]
        env["TW_CXX"] = sys.executable
    return env


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


@needs_gxx
@pytest.mark.parametrize("how, what", [("no-as", "it cannot run 'as'"), ("tw-cxx", "cannot build a one-line shared library")])
def test_broken_toolchain_is_an_environment_error(tmp_path, how, what):
    script = tmp_path / "k.py"
    script.write_text(KERNEL)
    r = subprocess.run([sys.executable, str(script)], env=_broken_env(tmp_path, how), capture_output=True, text=True,
                       timeout=600)
    out = r.stdout
    assert out.startswith("TilewrightError\n"), out + r.stderr
    assert "error: cannot build kernel 'cp': the host toolchain is broken: the compiler" in out, out
    assert what in out and "TW_CXX" in out and "docs/environment.md" in out and "tilewright doctor" in out, out
    assert "Tilewright bug" not in out and "internal compiler error" not in out, out
    if how == "no-as":
        assert "put 'as' (binutils) on PATH" in out, out
    left = [p for p in (tmp_path / "cache").rglob("*") if p.parent.name == "tmp"]
    assert not left, f"compile temporaries left behind: {left}"


@needs_gxx
@pytest.mark.parametrize("how", ["no-as", "tw-cxx"])
def test_doctor_builds_a_library_and_reports_a_broken_toolchain(tmp_path, how):
    r = subprocess.run([sys.executable, "-m", "tilewright", "doctor"], env=_broken_env(tmp_path, how),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "build test  : NOT USABLE: the compiler" in r.stdout, r.stdout
    line = next(l for l in r.stdout.splitlines() if l.startswith("host compiler"))
    assert line.endswith("-- NOT USABLE: it cannot build a shared library (below)"), r.stdout
    assert "TW_CXX" in r.stdout and "docs/environment.md" in r.stdout, r.stdout


def test_doctor_builds_a_library_here(capsys):
    from tilewright.cli import main
    assert main(["doctor"]) == 0
    assert "build test  : a one-line shared library with these flags: ok" in capsys.readouterr().out


# ---- F9: one factory at two shapes in one export: a dict names the kernels ---------------------------

@tw.jit(out_idx=[-1])
def _axpb(a):
    import tilewright.language as T
    M = T.symbolic("M")

    @T.prim_func
    def axpb(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < M:
                    Y[bx * 16 + i] = X[bx * 16 + i] * a + 1.0
    return axpb


def test_export_one_factory_at_two_values_under_names(tmp_path):
    from tilewright import deploy
    two, three = _axpb(2.0), _axpb(3.0)
    with pytest.raises(TilewrightError) as e:
        tw.export([two, three], tmp_path / "dup")
    assert "two kernels named 'axpb' in one export" in str(e.value)
    assert 'tw.export({"name_a": kernel_a, "name_b": kernel_b}, dir)' in str(e.value)  # the hint names the way
    tw.export({"axpb_2": two, "axpb_3": three}, tmp_path / "art", name="svc")
    m = deploy.read_manifest(tmp_path / "art")
    assert [k["symbol"] for k in m["kernels"]] == ["tw_axpb_2", "tw_axpb_3"]
    header = (tmp_path / "art" / "svc.h").read_text()
    assert "int tw_axpb_2(const float* X, float* Y, int64_t M" in header and "int tw_axpb_3(" in header
    # the entry points run their own code: a C caller
    (tmp_path / "art" / "main.c").write_text(textwrap.dedent(r"""
        #include <stdio.h>
        #include "svc.h"
        int main(void) {
          float x[19], y[19], z[19];
          for (int i = 0; i < 19; ++i) x[i] = (float)i;
          if (tw_axpb_2(x, y, 19, NULL, NULL) || tw_axpb_3(x, z, 19, NULL, NULL)) return 1;
          for (int i = 0; i < 19; ++i) if (y[i] != 2.0f * i + 1.0f || z[i] != 3.0f * i + 1.0f) return 2;
          printf("ok\n");
          return 0;
        }
    """))
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is not None:
        d = tmp_path / "art"
        subprocess.run([cc, "-std=c11", "-o", str(d / "caller"), str(d / "main.c"), f"-I{d}", f"-L{d}", "-lsvc",
                        f"-Wl,-rpath,{d}"], check=True)
        r = subprocess.run([str(d / "caller")], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout == "ok\n", r.stdout + r.stderr
    tw.export({"only": two}, tmp_path / "one")                # one named kernel: the library takes its name
    assert (tmp_path / "one" / "libonly.so").exists()
    with pytest.raises(TilewrightError, match="kernel name 'my-k' .for kernel 'axpb'. is not a C identifier"):
        tw.export({"my-k": two}, tmp_path / "bad", name="svc")
    with pytest.raises(TilewrightError, match="kernel name 3 is not a non-empty str") as e:
        tw.export({3: two}, tmp_path / "bad")
    assert "test_workflow_s22.py" in str(e.value)


def test_cli_export_of_a_specs_dict(tmp_path, capsys):
    from tilewright.deploy import cli_export
    (tmp_path / "svc_specs.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
        from test_workflow_s22 import _axpb
        SPECS = {{"axpb_2": (_axpb, (2.0,), "cpu"), "axpb_3": (_axpb, (3.0,))}}
    """))
    assert cli_export([str(tmp_path / "svc_specs.py"), "-o", str(tmp_path / "art"), "--name", "svc"]) == 0
    from tilewright import deploy
    assert [k["symbol"] for k in deploy.read_manifest(tmp_path / "art")["kernels"]] == ["tw_axpb_2", "tw_axpb_3"]
