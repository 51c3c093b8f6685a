"""Helpers shared by the Python tests: loading the example scripts as modules, finding a marked
source line of a test file (for the line numbers that errors must name) and checking that an
error names it."""
import importlib.util
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def load_example(name, module_name=None):
    """Imports examples/<name>.py (name may be "ascend/gemm_expert"), with examples/ on sys.path
    for its sibling imports."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    spec = importlib.util.spec_from_file_location(module_name or "tw_example_" + name.replace("/", "_"),
                                                  os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def marked_line(path, marker):
    """(line number, source line) of the first line of `path` with the comment `# marker`."""
    pattern = re.compile(r"# %s(?![\w@])" % re.escape(marker))
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if pattern.search(line):
                return i, line.rstrip("\n")
    raise AssertionError(f"marker {marker} not found in {path}")


def assert_located(exc_info, path, marker, message):
    """The exception of pytest.raises(...) `exc_info` is a TilewrightError whose message contains
    `message`, at the line of `path` marked `# marker`."""
    from tilewright import TilewrightError
    e = exc_info.value
    assert isinstance(e, TilewrightError), repr(e)
    assert message in e.message, e.message
    assert (e.file, e.line) == (path, marked_line(path, marker)[0]), str(e)


def located(fn, path, marker, *parts):
    """fn() raises a TilewrightError at the line of `path` marked `# marker` whose message (and
    hint) hold every one of `parts`; returns the error."""
    import pytest
    from tilewright import TilewrightError
    with pytest.raises(TilewrightError) as e:
        fn()
    err = e.value
    assert err.file == path and err.line == marked_line(path, marker)[0], (err.file, err.line, err.message)
    text = err.message + " | " + (err.hint or "")
    for p in parts:
        assert p in text, text
    return err


def small_ints(shape, dtype, seed, lo=-3, hi=4):
    """Small integers in `dtype`: exact in every dtype, sums exact in float32."""
    import numpy as np
    import tilewright as tw
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(tw.testing.np_dtype(dtype))
