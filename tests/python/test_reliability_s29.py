"""Session 29 reliability hunt of the workflow tools (h-rel): tw.testing, the reference store, the
autotuner's call, traces and the AscendC project. Findings F1.. of /work/rel29-findings.md
(docs/testing.md "Session 29: reliability and the workflow tools (h-rel)"). Nothing here can crash
the process (no signal-prone input): the attempts run in this process, each cheap."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright import TilewrightError


def _line_of(marker):
    """The line of this file holding ``marker`` (errors must point at the caller's line)."""
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "_line_of" not in text)


def test_f1_assert_close_refuses_complex_instead_of_dropping_the_imaginary_part():
    with pytest.raises(TilewrightError) as e:
        tw.testing.assert_close(np.array([1 + 5j]), np.array([1.0]))  # @f1_complex
    assert "compares real numbers: actual is complex128" in e.value.message
    assert e.value.line == _line_of("@f1_complex") and ".imag" in e.value.hint
    with pytest.raises(TilewrightError, match="expected is str32"):
        tw.testing.assert_close(np.array([1.0]), np.array(["a"]))
    # real operands are unchanged: bool, integers, bfloat16
    tw.testing.assert_close(np.array([True]), np.array([1]))
    tw.testing.assert_close(tw.testing.randn((3,), "bfloat16"), tw.testing.randn((3,), "bfloat16"))


def test_f2_every_integer_width_is_exact_and_given_tolerances_are_used():
    for dt in ("int16", "uint16", "uint32", "uint64"):
        a = np.array([0, 7], dt)
        tw.testing.assert_close(a, a.copy())  # no default tolerance before: ValueError
        tw.testing.assert_close(a, a + 1, atol=1, rtol=0)  # "pass atol= and rtol=" although both were passed
        with pytest.raises(AssertionError, match="1 of 2|2 of 2"):
            tw.testing.assert_close(a, a + 1)
    assert tw.testing.tolerance("uint64", "int16") == (0.0, 0.0)
    with pytest.raises(ValueError, match="no default tolerance for dtype 'str32'"):
        tw.testing.tolerance("str32")


def test_f3_reference_with_nan_outputs_passes_its_own_check(tmp_path):
    def masked(x):
        y = x.astype(np.float16)
        y[1] = np.nan
        y.view(np.uint16)[2] = 0x7E01  # a NaN payload: stored bit for bit
        return y

    x = tw.testing.randn((5,), seed=0)
    ref = tw.testing.Reference(tmp_path / "nan", seed=0)
    ref.check(masked, (x,))  # the golden run: failed against itself before
    ref.check(masked)  # a later run
    assert np.load(tmp_path / "nan.npz")["output0"].view(np.uint16)[2] == 0x7E01
    # a NaN where a number is stored, or a number where NaN is, still fails
    with pytest.raises(AssertionError, match="involve NaN"):
        ref.check(lambda x: np.where(np.arange(5) == 3, np.nan, masked(x)).astype(np.float16))
    with pytest.raises(AssertionError, match="involve NaN"):
        ref.check(lambda x: x.astype(np.float16))


def test_f4_reference_of_two_outputs_is_not_checked_against_one(tmp_path):
    x = tw.testing.randn((4,), seed=0)
    ref = tw.testing.Reference(tmp_path / "two")
    ref.check(lambda x: (x * 2, x * 3), (x,))
    with pytest.raises(AssertionError, match="cannot compare one ndarray .actual. with a tuple of 2"):
        ref.check(lambda x: x * 2)  # passed before: compared with output 0 only
    one = tw.testing.Reference(tmp_path / "one")
    one.check(lambda x: x * 2, (x,))
    one.check(lambda x: x * 2)
    one.check(lambda x: (x * 2,))


@tw.compile(target="ascend910b")
def _ident(A: tw.Tensor((16, 16), "float32")):
    out = tw.output((16, 16), dtype="float32")
    tile = tw.load(A, (0, 0), (16, 16))
    tw.store(out, (0, 0), tile)
    return out


def test_f5_unwritable_trace_or_project_path_is_a_located_error(tmp_path):
    a, = _ident.example_inputs()
    (tmp_path / "file").write_text("x")
    for path in (tmp_path, tmp_path / "missing" / "t.json", 12345):
        with pytest.raises(TilewrightError) as e:
            _ident.trace(path, a)  # @f5_trace
        assert e.value.line == _line_of("@f5_trace") and "cannot write the trace of kernel '_ident'" in e.value.message
    for where in (tmp_path / "file", tmp_path / "file" / "sub"):
        with pytest.raises(TilewrightError) as e:
            _ident.write_ascendc_project(where)  # @f5_project
        assert e.value.line == _line_of("@f5_project") and "cannot write the AscendC project" in e.value.message
    prof = _ident.trace(tmp_path / "t.json", a)
    assert (tmp_path / "t.json").read_text().startswith(("{", "[")) and prof["time_us"] > 0


def test_f6_rand_range_is_checked():
    for low, high in ((1.0, 0.0), (0.0, 0.0), (0.0, float("inf")), (float("nan"), 1.0), ("a", 1.0)):
        with pytest.raises(TilewrightError) as e:
            tw.testing.rand((3,), low=low, high=high)  # @f6_rand
        assert e.value.line == _line_of("@f6_rand") and "is not a finite, non-empty interval" in e.value.message
    v = tw.testing.rand((1000,), "bfloat16", low=-2, high=3)
    assert v.astype(np.float32).min() >= -2 and v.astype(np.float32).max() < 3


@tw.jit(out_idx=[-1])
def _add_one(n, block=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] + 1.0
    return main


def test_f8_tuned_call_without_its_key_is_an_error_before_any_sweep(capsys):
    tuned = tw.autotune(configs=[tw.Config(block=32)], key=["n"], executor="inline")(_add_one)
    with pytest.raises(TilewrightError) as e:
        tuned()  # @f8_missing
    assert e.value.line == _line_of("@f8_missing") and "no value for the key parameter(s) 'n'" in e.value.message
    with pytest.raises(TilewrightError) as e:
        tuned(1, 2, 3)  # @f8_extra
    assert e.value.line == _line_of("@f8_extra") and "too many positional arguments" in e.value.message
    assert "tuning" not in capsys.readouterr().err  # no sweep started (it printed n=<class 'inspect._empty'>)


@T.prim_func
def _select(A: T.Tensor((4,), "float32"), flag: T.bool, s: T.int32, B: T.Tensor((4,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.serial(4):
            B[i] = T.if_then_else(flag, A[i], -A[i]) + T.cast(s, "float32")


def test_f7_numpy_bools_are_bools_for_scalar_parameters():
    k = tw.compile(_select, out_idx=[-1])
    x = np.arange(4, dtype=np.float32)
    for flag, s, want in ((np.any(x > 2), 0, x), (np.bool_(False), 0, -x), (np.array(True), np.bool_(True), x + 1)):
        np.testing.assert_array_equal(k(x, flag, s), want)  # "is an integer (bool), got a float" before
    with pytest.raises(TilewrightError, match="is an integer .int32., got a float"):
        k(x, True, 1.5)


def test_f9_cli_messages_and_report_of_tuples(tmp_path, capsys):
    import subprocess
    import sys
    from tw_test_util import ROOT
    r = subprocess.run([sys.executable, "-m", "tilewright", "export", str(tmp_path / "none.py"), "-o", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "error: error:" not in r.stderr and "tilewright: error: no such file" in r.stderr
    r = subprocess.run([sys.executable, "-m", "tilewright", "tune", f"{ROOT}/examples/seed_matmul.py:tuned_matmul", "64",
                        "=3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "frozen" not in r.stderr and "unexpected keyword argument" in r.stderr, r.stderr
    # report() of tuples: the mismatch report, not numpy's ValueError about a ragged array
    a, b = (np.ones(2), np.ones(3)), (np.ones(2), np.zeros(3))
    assert tw.testing.report("pair", a, a) and not tw.testing.report("pair", a, b)
    assert "pair: max abs err 1.000e+00 MISMATCH" in capsys.readouterr().out


def test_f10_demo_script_checks_its_arguments():
    import subprocess
    import sys
    from tw_test_util import ROOT
    for args, what in ((["64", "--blocks", "128,128"], "is not three block sizes"), (["64", "--repeat", "0"], "'0' is not a"),
                       (["0"], "'0' is not a whole number >= 1")):
        r = subprocess.run([sys.executable, f"{ROOT}/examples/seed_matmul.py", *args], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2 and what in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_f11_threads_filling_one_reference_store(tmp_path):
    import threading
    errors = []

    def first_check():
        try:
            tw.testing.Reference(tmp_path / "r", seed=0).check(lambda x: x * 2, (np.arange(50000, dtype=np.float32),))
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            errors.append(e)

    for _ in range(3):
        for p in tmp_path.iterdir():
            p.unlink()
        threads = [threading.Thread(target=first_check) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # a check between another thread's two renames may see half a store (left: rel29 F11); never a lost rename
    assert not [e for e in errors if not isinstance(e, TilewrightError)], errors
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.npz"]
    tw.testing.Reference(tmp_path / "r").check(lambda x: x * 2)


def test_f12_values_a_store_cannot_hold_and_unwritable_stores(tmp_path):
    for inputs, fn, what in (((2 ** 70,), lambda x: np.ones(2), "input 0 has dtype object"),
                             ((None,), lambda x: np.ones(2), "input 0 has dtype object"),
                             ((np.ones(2),), lambda x: np.array(["a"]), "output 0 has dtype str32"),
                             ((np.ones(2),), lambda x: x + 1j, "output 0 has dtype complex128")):
        with pytest.raises(TilewrightError) as e:
            tw.testing.Reference(tmp_path / "r", atol=0, rtol=0).check(fn, inputs)  # @f12_obj
        # before: written, then "the reference store ... is damaged" at once
        assert e.value.line == _line_of("@f12_obj") and what in e.value.message and "damaged" not in e.value.message
        assert not list(tmp_path.iterdir())
    (tmp_path / "file").write_text("x")
    with pytest.raises(TilewrightError) as e:
        tw.testing.Reference(tmp_path / "file" / "r").check(lambda x: x, (np.ones(2),))  # @f12_dir
    assert e.value.line == _line_of("@f12_dir") and "cannot write the reference store" in e.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
