"""Helpers shared by the Python tests: loading the example scripts as modules, and finding a
marked source line of a test file (for the line numbers that errors must name)."""
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
