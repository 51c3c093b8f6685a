"""tw.testing: assert_close (tolerances per dtype, NaN/inf, the report), seeded inputs and the
reference store (tw.testing.Reference, `tilewright check`)."""
import json

import ml_dtypes
import numpy as np
import pytest

import tilewright as tw
from tilewright.testing import Reference, assert_close, rand, randint, randn, tolerance


def test_default_tolerance_follows_the_least_precise_dtype():
    assert tolerance("float32") == tw.testing.TOLERANCES["float32"]
    assert tolerance("float16", "float64") == tw.testing.TOLERANCES["float16"]
    assert tolerance("bfloat16", "float16") == tw.testing.TOLERANCES["bfloat16"]
    assert tolerance("int32", "int32") == (0.0, 0.0)


def test_assert_close_passes_within_and_fails_outside_the_dtype_tolerance():
    e = np.ones(100)
    assert_close((e + 5e-5).astype(np.float32), e)  # float32: 1e-4 + 1e-4
    with pytest.raises(AssertionError):
        assert_close((e + 5e-4).astype(np.float32), e)
    assert_close((e + 5e-4).astype(np.float16), e)  # float16 allows it
    assert_close((e + 1e-2).astype(ml_dtypes.bfloat16), e)


def test_mismatch_report_names_count_worst_index_and_values():
    e = np.zeros((4, 5), np.float32)
    a = e.copy()
    a[2, 3] = 1.0
    a[1, 1] = 0.5
    with pytest.raises(AssertionError) as info:
        assert_close(a, e, msg="kernel x")
    text = str(info.value)
    assert text.startswith("kernel x: not close: 2 of 20 elements (10.00%)")
    assert "greatest absolute difference 1 at index (2, 3): actual 1.0, expected 0.0" in text


def test_nan_and_inf_handling():
    a = np.array([1.0, np.nan, np.inf])
    assert_close(a, a.copy(), equal_nan=True)
    with pytest.raises(AssertionError, match="involve NaN"):
        assert_close(a, a.copy())
    with pytest.raises(AssertionError):
        assert_close(np.array([np.inf]), np.array([-np.inf]))
    with pytest.raises(AssertionError):
        assert_close(np.array([1e300]), np.array([np.inf]))


def test_shape_and_dtype_checks_and_tuples():
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_close(np.zeros(3), np.zeros(4))
    with pytest.raises(AssertionError, match="dtype mismatch"):
        assert_close(np.zeros(3, np.float32), np.zeros(3), check_dtype=True)
    with pytest.raises(AssertionError, match="output 1"):
        assert_close((np.zeros(2), np.ones(2)), (np.zeros(2), np.zeros(2)))


def test_seeded_inputs_repeat():
    assert np.array_equal(randn((3, 4), seed=7), randn((3, 4), seed=7))
    assert not np.array_equal(randn((3, 4), seed=7), randn((3, 4), seed=8))
    assert randn((2, 2), "bfloat16").dtype == ml_dtypes.bfloat16
    r = rand((1000,), seed=1, low=2.0, high=3.0)
    assert r.min() >= 2.0 and r.max() < 3.0
    i = randint((100,), "int8", seed=1, low=-3, high=3)
    assert i.dtype == np.int8 and i.min() >= -3 and i.max() < 3


def _double(x):
    return x * 2


def _double_wrong(x):
    return x * 2 + 1e-2


def test_reference_store_saves_once_then_compares(tmp_path):
    x = randn((8, 3), "bfloat16", seed=3)
    ref = Reference(tmp_path / "refs" / "double", seed=3)
    out = ref.check(_double, (x,), expected=lambda v: (v.astype(np.float32) * 2).astype(ml_dtypes.bfloat16))
    assert out.dtype == ml_dtypes.bfloat16
    m = json.loads((tmp_path / "refs" / "double.json").read_text())
    assert m["seed"] == 3 and m["inputs"] == [{"shape": [8, 3], "dtype": "bfloat16"}]
    assert m["tolerance"] == {"atol": 2e-2, "rtol": 1.6e-2} and m["fn"].endswith(":_double")
    assert {"tilewright", "numpy", "ml_dtypes", "python"} <= set(m["versions"])
    # later runs use the stored inputs (the ones passed are ignored) and the stored outputs
    ref2 = Reference(tmp_path / "refs" / "double.json")
    ref2.check(_double)
    with pytest.raises(AssertionError, match="reference"):
        Reference(tmp_path / "refs" / "double").check(lambda v: v.astype(np.float32) * 3)


def test_reference_without_store_or_inputs_is_a_clear_error(tmp_path):
    with pytest.raises(tw.TilewrightError, match="no reference stored"):
        Reference(tmp_path / "none").check(_double)


def test_cli_check_runs_a_reference(tmp_path, capsys):
    from tilewright.cli import main
    Reference(tmp_path / "r").check(_double, (randn((4,), seed=0),))
    spec = f"{__file__}:_double"
    assert main(["check", str(tmp_path / "r"), "--fn", spec]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["check", str(tmp_path / "r"), "--fn", f"{__file__}:_double_wrong"]) == 1
    assert main(["check", str(tmp_path / "missing")]) == 2
