"""One kernel on cpu and on ascend910b: the check tests/pyversions/run.sh runs per Python version
(tests/python/tune_kernels.py's add_one factory, untuned)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import tilewright as tw  # noqa: E402
from tune_kernels import add_one  # noqa: E402

a = np.arange(1000, dtype=np.float32)
tw.testing.assert_close(add_one.fn(1000)(a), a + 1)
tw.testing.assert_close(add_one.fn(1000, target="ascend910b")(a), a + 1)
print("PYTHON", sys.version.split()[0], "OK: import + one kernel on cpu and ascend910b")
