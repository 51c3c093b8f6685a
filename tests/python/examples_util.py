"""Loading the example scripts (examples/*.py, examples/ascend/*.py) as modules in the tests."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def load_example(name, module_name=None):
    """Imports examples/<name>.py (name may be "ascend/gemm_expert"), with examples/ on sys.path
    for its `_check` import."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    spec = importlib.util.spec_from_file_location(module_name or "tw_example_" + name.replace("/", "_"),
                                                  os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
