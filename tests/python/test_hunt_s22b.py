"""Session 22's hunt along the seed article's path (h-hunt10b, docs/testing.md "Session 22: the
seed article's path (h-hunt10b)"): the reader's fixed-seed reference store, block-size tuning
with a stored result, the toolchain pitfalls of the environment, and the article's service
(one compile per request, many shapes). A defect found is a strict xfail naming its finding
(/work/hunt10b-findings.md F<n>) until its fix lands."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilewright as tw
import tilewright.autotune  # noqa: F401 - the module (tw.autotune is the decorator)
from tilewright import TilewrightError

at = sys.modules["tilewright.autotune"]

M, N, K = 40, 24, 200


@tw.compile(target="cpu")
def seed_mm(A: tw.Tensor((M, K), "float32"), B: tw.Tensor((K, N), "float32")):
    out = tw.output((M, N), dtype="float32")
    for by in range(tw.ceildiv(M, 16)):
        for bx in range(tw.ceildiv(N, 16)):
            acc = tw.accumulator((16, 16), dtype="float32")
            for k in range(tw.ceildiv(K, 64)):
                a = tw.load(A, (by * 16, k * 64), (16, 64))
                b = tw.load(B, (k * 64, bx * 16), (64, 16))
                acc += tw.matmul(a, b)
            tw.store(out, (by * 16, bx * 16), acc)
    return out


def f64_matmul(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def scale(x):
    return x * 2


def mm_inputs():
    return tw.testing.randn((M, K), seed=0), tw.testing.randn((K, N), seed=1)


# ---- the reference store (article 5.3: fixed seeds, saved reference outputs) ---------------------

def test_reference_against_float64_uses_the_outputs_tolerance(tmp_path):
    ref = tw.testing.Reference(tmp_path / "mm", seed=0)
    ref.check(seed_mm, mm_inputs(), expected=f64_matmul)          # the docs' form, a float32 kernel
    tol = json.loads((tmp_path / "mm.json").read_text())["tolerance"]
    assert tol == {"atol": 1e-4, "rtol": 1e-4}
    ref.check(seed_mm)                                            # later: stored inputs and outputs


def test_reference_with_explicit_tolerance_against_float64(tmp_path):
    ref = tw.testing.Reference(tmp_path / "mm", seed=0, atol=1e-4, rtol=1e-4)
    ref.check(seed_mm, mm_inputs(), expected=f64_matmul)
    ref.check(seed_mm)
    # a changed kernel (a wrong tile origin) fails the stored reference
    with pytest.raises(AssertionError, match="reference .*mm: not close"):
        ref.check(lambda a, b: seed_mm(a, b) * 1.001)


def damaged_store(tmp_path, how):
    """A store made from `scale`, then damaged by `how(npz path, manifest path)`."""
    s = tmp_path / "scale"
    tw.testing.Reference(s, seed=0).check(scale, (tw.testing.randn((8,), seed=0),))
    how(tmp_path / "scale.npz", tmp_path / "scale.json")
    return s


def _truncate(npz, _):
    npz.write_bytes(npz.read_bytes()[:len(npz.read_bytes()) // 2])


def _drop_input(npz, _):
    with np.load(npz) as z:
        out = z["output0"]
    np.savez(npz, output0=out)


DAMAGES = {
    "truncated npz": _truncate,
    "garbage npz": lambda npz, _: npz.write_bytes(b"garbage"),
    "empty npz": lambda npz, _: npz.write_bytes(b""),
    "npz without input0": _drop_input,
    "manifest {}": lambda _, js: js.write_text("{}"),
    "manifest a list": lambda _, js: js.write_text("[1, 2]"),
    "manifest shape differs": lambda _, js: js.write_text(
        json.dumps({**json.loads(js.read_text()), "inputs": [{"shape": [4, 2], "dtype": "float32"}]})),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_store_is_an_error_naming_it(tmp_path, damage):
    s = damaged_store(tmp_path, DAMAGES[damage])
    with pytest.raises(TilewrightError) as e:
        tw.testing.Reference(s).check(scale)
    assert str(s) in str(e.value) and "update=True" in str(e.value)


@pytest.mark.parametrize("missing", ["json", "npz"])
def test_a_half_deleted_store_is_not_recreated_silently(tmp_path, missing):
    s = damaged_store(tmp_path, lambda npz, js: (js if missing == "json" else npz).unlink())
    with pytest.raises(TilewrightError) as e:
        tw.testing.Reference(s).check(lambda x: x * 5, (np.ones(8, np.float32),))   # a changed function
    assert f"scale.{missing}" in str(e.value)


def test_update_rewrites_a_store(tmp_path):
    s = damaged_store(tmp_path, _truncate)
    tw.testing.Reference(s, update=True).check(lambda x: x * 5, (np.ones(8, np.float32),))
    tw.testing.Reference(s).check(lambda x: x * 5)
    with pytest.raises(AssertionError):
        tw.testing.Reference(s).check(scale)


@pytest.mark.parametrize("fn", [lambda x: float(x.sum()), lambda x: np.float32(x.sum()), lambda x: x.sum()])
def test_a_scalar_round_trips_through_the_store(tmp_path, fn):
    ref = tw.testing.Reference(tmp_path / "s")
    ref.check(fn, (np.ones(3, np.float32),))
    ref.check(fn)
    assert json.loads((tmp_path / "s.json").read_text())["outputs"][0]["shape"] == []


def test_a_function_returning_nothing_is_a_tilewright_error(tmp_path):
    with pytest.raises(TilewrightError, match="returned None"):
        tw.testing.Reference(tmp_path / "n").check(lambda x: None, (np.ones(3, np.float32),))


def test_reference_in_a_new_process(tmp_path):
    """Save in one process, check in another (the article's cross-run comparison), bfloat16 too."""
    script = textwrap.dedent(f"""
        import sys, numpy as np, tilewright as tw
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_hunt_s22b import scale
        x = tw.testing.randn((5, 3), "bfloat16", seed=7)
        tw.testing.Reference({str(tmp_path / 'b')!r}, seed=7).check(scale, (x,))
        print("ok")
    """)
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    m = json.loads((tmp_path / "b.json").read_text())
    assert m["inputs"][0] == {"shape": [5, 3], "dtype": "bfloat16"} and m["fn"] == "test_hunt_s22b:scale"
    r = subprocess.run([sys.executable, "-m", "tilewright", "check", str(tmp_path / "b")], capture_output=True,
                       text=True, timeout=300, cwd=os.path.dirname(__file__))
    assert r.returncode == 0, r.stdout + r.stderr


# ---- block-size tuning with a stored result (article 4.2) -------------------------------------------

TUNED = '''
import sys, tilewright as tw, tilewright.language as T
EDITED = sys.argv[1] == "2"
@tw.autotune(configs=[tw.Config(block=16), tw.Config(block=1024)], key=["n"], executor="inline", verbose=False)
@tw.jit(out_idx=[-1])
def add_one(n, block=128):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            t = T.alloc_fragment((block,), "float32")
            if EDITED:
                # the edit: one row of 65536 floats overflows UB, and a part-tile copy into it keeps the
                # compiler from running the row in column blocks (split_cols)
                big = T.alloc_fragment((block * 64,), "float32")
                T.fill(big, 1.0)
                T.copy(A[bx * block], big[0:block])
            T.copy(A[bx * block], t)
            for i in T.Parallel(block):
                t[i] = t[i] + 1.0
            T.copy(t, B[bx * block])
    return main
add_one(4096, target="ascend910b")
print(add_one.best_config)
'''


def test_an_edited_kernel_is_tuned_again(tmp_path):
    script = tmp_path / "tuned.py"
    script.write_text(TUNED)
    env = {**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache")}
    run = [subprocess.run([sys.executable, str(script), v], capture_output=True, text=True, timeout=300, env=env)
           for v in ("1", "2")]
    assert run[0].returncode == 0 and run[0].stdout.strip() == "block=1024", run[0].stderr
    assert run[1].returncode == 0, run[1].stderr[-600:]
    assert run[1].stdout.strip() == "block=16"


# ---- the environment (article 3.2 / 4.1) ------------------------------------------------------------

COPY_KERNEL = '''
import numpy as np, tilewright as tw
@tw.compile
def cp(A: tw.Tensor((8, 8), "float32")):
    out = tw.output((8, 8), dtype="float32")
    t = tw.load(A, (0, 0), (8, 8))
    tw.store(out, (0, 0), t)
    return out
print(cp(np.ones((8, 8), np.float32)).sum())
'''


def _only_gpp(tmp_path):
    """A PATH with g++ but no binutils (`as`, `ld`): an incomplete toolchain."""
    import shutil
    gpp = shutil.which("g++")
    if gpp is None:
        pytest.skip("no g++")
    d = tmp_path / "bin"
    d.mkdir()
    (d / "g++").symlink_to(gpp)
    return {"PATH": str(d), "HOME": str(tmp_path), "TW_CACHE_DIR": str(tmp_path / "cache")}


def test_a_toolchain_without_an_assembler_is_an_environment_error(tmp_path):
    script = tmp_path / "cp.py"
    script.write_text(COPY_KERNEL)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=_only_gpp(tmp_path))
    assert r.returncode != 0 and "TilewrightError" in r.stderr
    assert "cannot execute" in r.stderr and "Tilewright bug" not in r.stderr, r.stderr[-800:]


def test_doctor_reports_a_toolchain_that_cannot_build(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tilewright", "doctor"], capture_output=True, text=True, timeout=300,
                       env=_only_gpp(tmp_path))
    test = next(i for i, l in enumerate(r.stdout.splitlines()) if l.strip().startswith("build test"))
    report = "\n".join(r.stdout.splitlines()[test:test + 3])
    assert "NOT USABLE" in report and "cannot execute" in report, r.stdout
    assert r.returncode == 1


# ---- the article's service (4.3): a compile per request, many shapes --------------------------------

def test_compiling_in_every_request_reuses_the_kernel():
    """The article's leak: the handler builds and compiles the kernel on every request. Here the
    second and later compiles are memory-cache hits: one loaded kernel, no growth."""
    import tilewright.language as T

    def handle(x):
        @tw.jit(out_idx=[-1])
        def twice(n):
            @T.prim_func
            def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
                with T.Kernel(1) as bx:
                    for i in T.Parallel(n):
                        B[i] = A[i] * 2.0
            return main
        return twice(x.shape[0])(x)

    x = np.arange(33, dtype=np.float32)
    before = tw.cache_info()["memory"]["loaded_kernels"]
    for _ in range(30):
        np.testing.assert_array_equal(handle(x), x * 2)
    assert tw.cache_info()["memory"]["loaded_kernels"] <= before + 1


# ---- prototype -> C++ (article 5.2): one factory at several shapes in one export -------------------

def test_one_factory_at_two_shapes_in_one_export(tmp_path):
    """F9: the kernels share the inner prim_func's name; a dict names them (fixed on h-workflow10)."""
    import tilewright.language as T
    from tilewright.deploy import read_manifest

    @tw.jit(out_idx=[-1])
    def scaled(n, f):
        @T.prim_func
        def scale_k(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(n):
                    Y[i] = X[i] * f
        return scale_k

    with pytest.raises(tw.TilewrightError, match=r"two kernels named 'scale_k' in one export(.|\n)*name them: "
                                                 r"tw.export\(\{"):
        tw.export([scaled(4, 2.0), scaled(8, 2.0)], str(tmp_path / "dup"), name="svc")
    tw.export({"scale_k4": scaled(4, 2.0), "scale_k8": scaled(8, 2.0)}, str(tmp_path / "art"), name="svc")
    names = [k["name"] for k in read_manifest(str(tmp_path / "art"))["kernels"]]
    assert names == ["scale_k4", "scale_k8"]


def test_the_source_tree_without_its_core_says_how_to_get_it():
    """Another interpreter (here this one without its site-packages, so without the editable
    install's finder) importing the source tree: F10, Python's "circular import" guess before."""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")
    r = subprocess.run([sys.executable, "-S", "-c", "import tilewright"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": src})
    assert r.returncode == 1
    assert "compiled core (tilewright._C) cannot be imported by" in r.stderr and "pip install ." in r.stderr, r.stderr


def test_the_consumer_example_refuses_bad_counts(tmp_path):
    """examples/cpp/main.cpp, the program the reader copies: `--threads abc` aborted
    (std::stoi), `--threads 100000` died in std::thread ("terminate called"), `--threads 0`
    printed "ok: 0 threads ... match" having checked nothing (F11)."""
    import importlib.util
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("tw_consumer_build_s22b", root / "examples" / "cpp" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    consumer = build.build_consumer(tmp_path / "consumer")
    scale_art = tmp_path / "art"
    seed_mm.export(str(scale_art))
    a, b = mm_inputs()
    for name, x in (("a", a), ("b", b), ("ref", seed_mm(a, b))):
        np.save(tmp_path / f"{name}.npy", x)
    base = [str(consumer), str(scale_art), "seed_mm", *(str(tmp_path / f"{n}.npy") for n in ("ref", "a", "b"))]
    for flag, value in (("--threads", "abc"), ("--threads", "0"), ("--threads", "100000"), ("--launches", "0"),
                        ("--bench", "-1"), ("--launches", "2x")):
        r = subprocess.run(base + [flag, value], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and f"{flag} takes a whole number" in r.stderr, (flag, value, r.stderr)
    r = subprocess.run(base + ["--threads", "2", "--launches", "3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok: 2 threads x 3 launches of seed_mm" in r.stdout, r.stderr


FROZEN_TUNE = """
import numpy as np, tilewright as tw, tilewright.language as T
@tw.autotune(configs=[tw.Config(block=8), tw.Config(block=16)], key=["n"], executor="inline", verbose=False)
@tw.jit(out_idx=[-1])
def plus_two(n, block=4):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] + 2.0
    return main
tw.freeze()
try:
    plus_two(97)
except tw.TilewrightError as e:
    print(e)
tw.freeze(False)
x = np.arange(97, dtype=np.float32)
assert np.array_equal(plus_two(97)(x), x + 2)   # unfrozen: tuned, served
"""


def test_tuning_in_a_frozen_process_says_to_precompile(tmp_path):
    """A frozen service meeting a key it never tuned (fresh cache: nothing precompiled): every
    configuration is refused; the hint said "add configurations that fit the target's buffers" (F12)."""
    script = tmp_path / "frozen_tune.py"
    script.write_text(FROZEN_TUNE)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-800:]
    assert "no configuration could be run" in r.stdout and "tw.precompile([(plus_two, args, target)])" in r.stdout, r.stdout


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_inputs_are_replayed_as_torch(tmp_path, dtype):
    """The article compares a custom kernel with the framework's operator: a torch function's
    stored inputs came back as numpy arrays (relu(): argument 'input' must be Tensor) (F13)."""
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 5).to(getattr(torch, dtype))
    ref = tw.testing.Reference(tmp_path / "t")
    ref.check(torch.relu, (x,))
    got = tw.testing.Reference(tmp_path / "t").check(torch.relu)
    assert isinstance(got, torch.Tensor) and got.dtype == x.dtype
    assert json.loads((tmp_path / "t.json").read_text())["inputs"][0]["torch"] is True


TUNE_CLI = '''
import tilewright as tw, tilewright.language as T
@tw.autotune(configs=[tw.Config(block=8), tw.Config(block=32)], key=["n", "dtype"], executor="inline")
@tw.jit(out_idx=[-1])
def add_c(n, dtype="float32", block=4):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] + 1.0
    return main
'''


@pytest.mark.parametrize("order", ["keyword after --target", "keyword before --target"])
def test_tune_cli_takes_keyword_arguments_after_the_options(tmp_path, monkeypatch, capsys, order):
    """docs/workflow.md's `tilewright tune ...:tuned_matmul 1024 --target ascend910b dtype=float16`
    was "unrecognized arguments: dtype=float16" (F14)."""
    from tilewright import cli
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")
    f = tmp_path / "tune_cli_s22b.py"
    f.write_text(TUNE_CLI)
    args = ["tune", f"{f}:add_c", "40"] + (["--target", "cpu", "dtype=float16"] if order.endswith("after --target")
                                           else ["dtype=float16", "--target", "cpu"])
    assert cli.main(args) == 0
    assert "add_c" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["doctor", "--bogus"])


def test_numpy_integers_are_the_same_tuning_key(tmp_path, monkeypatch):
    """add_one(4096) then add_one(numpy.int64(4096)) tuned twice (keys by repr) (F16)."""
    import tilewright.language as T
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")

    @tw.autotune(configs=[tw.Config(block=8), tw.Config(block=32)], key=["n"], executor="inline", verbose=False)
    @tw.jit(out_idx=[-1])
    def plus_one_s22b(n, block=4):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        B[bx * block + i] = A[bx * block + i] + 1.0
        return main

    sweeps = []
    real_tune = plus_one_s22b.tune
    monkeypatch.setattr(plus_one_s22b, "tune", lambda *a, **k: sweeps.append(a) or real_tune(*a, **k))
    x = np.arange(77, dtype=np.float32)
    for n in (77, np.int64(77), np.int32(77), np.uint16(77)):
        np.testing.assert_array_equal(plus_one_s22b(n)(x), x + 1)
    assert len(sweeps) == 1 and len(list((tmp_path / "tune").glob("*.json"))) == 2   # one result + the peaks


def test_configurations_failing_alike_point_at_the_factory(tmp_path, monkeypatch):
    """Every configuration failing with one error (a factory bug) was told to "add configurations
    that fit the target's buffers"."""
    import tilewright.language as T
    monkeypatch.setattr(at, "tune_dir", lambda: tmp_path / "tune")

    @tw.autotune(configs=[tw.Config(block=8), tw.Config(block=32)], key=["n"], executor="inline", verbose=False)
    @tw.jit(out_idx=[-1])
    def broken_s22b(n, block=4):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                for i in T.Parallel(block):
                    B[bx * block + i] = A[bx * block + i]
            return main  # the mistake: inside the prim_func
        return main

    with pytest.raises(TilewrightError) as e:
        broken_s22b(64)
    assert "failed the same way: an error in the factory" in str(e.value), str(e.value)


def test_cache_prune_takes_the_byte_counts_the_knob_takes(capsys):
    """`tilewright cache prune --max-bytes 500M` was "invalid int value" although
    TW_CACHE_MAX_BYTES=500M is the documented form, and `--max-bytes -5` was taken (F18)."""
    from tilewright.cli import _byte_count
    assert [_byte_count(t) for t in ("500M", "2g", "3KiB", "7B", "0", "1")] == [500 << 20, 2 << 30, 3072, 7, 0, 1]
    from tilewright import cli
    for bad in ("-5", "1.5G", "abc", "2gib"):
        with pytest.raises(SystemExit):
            cli.main(["cache", "prune", f"--max-bytes={bad}"])
        assert "is not a byte count" in capsys.readouterr().err


SM = tw.symbolic("SM")


@tw.compile
def scale_rows_s22b(A: tw.Tensor((SM, 8), "float32"), s: float, n: "int32"):
    out = tw.output((SM, 8), dtype="float32")
    for by in range(tw.ceildiv(SM, 4)):
        t = tw.load(A, (by * 4, 0), (4, 8))
        for i in range(4):
            for j in range(8):
                t[i, j] = t[i, j] * s + n
        tw.store(out, (by * 4, 0), t)
    return out


def test_a_kernel_with_scalar_parameters_in_a_reference_store(tmp_path):
    """The scalars were stored as shape (1,) arrays (F4) and replayed to the kernel, which refused
    them ("pass a Python or numpy number"): no kernel with a scalar parameter could be stored."""
    a = tw.testing.randn((13, 8), seed=0)
    ref = tw.testing.Reference(tmp_path / "sr", seed=0)
    ref.check(scale_rows_s22b, (a, 0.5, 3), expected=lambda a, s, n: a.astype(np.float64) * s + n)
    assert tw.testing.Reference(tmp_path / "sr").check(scale_rows_s22b).shape == (13, 8)


SVC_TUNED = TUNE_CLI.replace('executor="inline"', 'executor=None') + '''
SPECS = [(add_c, (40,), "cpu"), (add_c, (40, "float16"), "cpu")]
'''


def test_precompile_specs_with_an_autotuned_factory(tmp_path):
    """The tuner's worker processes import the factory by module name; the spec file was loaded
    as '_tw_deploy_<stem>', which no worker can import: every spec failed (F19)."""
    (tmp_path / "svc_tuned_s22b.py").write_text(SVC_TUNED)
    r = subprocess.run([sys.executable, "-m", "tilewright", "precompile", "svc_tuned_s22b.py", "-j", "2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0 and "FAILED" not in r.stderr, r.stderr[-1500:]
    assert "precompiled 2 of 2 kernel(s)" in r.stderr
    assert "RuntimeWarning" not in r.stderr   # `-m tilewright.deploy` warned (runpy): F20
