"""The CPU runtime's math functions (src/target/cpu/include/tw_cpu/math.h) are meant to be
auto-vectorised by g++ -O3 wherever a generated kernel maps them over a row. g++ refuses to
if-convert a float `c ? a : b` whose arms hold floating-point arithmetic when the target has no
masked vector operations (AVX2, SSE2: "control flow in loop"), so a function written that way ran
one element at a time there while the AVX-512 build was vectorised. This test compiles one loop
per function for each code path the runtime has (-march=x86-64, haswell, native) and reads g++'s
vectorisation report: every loop must be vectorised."""
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "src" / "target" / "cpu" / "include"

FUNCTIONS = ["exp", "exp2", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "erf"]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")


def _source():
    # one function per line: the report names the loop by its line number
    lines = ['#include "tw_cpu/math.h"']
    for f in FUNCTIONS:
        lines.append(f"void loop_{f}(const float* __restrict x, float* __restrict y, int n) {{ "
                     f"_Pragma(\"GCC ivdep\") for (int i = 0; i < n; ++i) y[i] = tw_cpu::{f}(x[i]); }}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("march", ["x86-64", "haswell", "native"])
def test_math_functions_vectorise(tmp_path, march):
    src = tmp_path / "loops.cpp"
    src.write_text(_source())
    r = subprocess.run(["g++", "-std=c++20", "-O3", f"-march={march}", f"-I{INCLUDE}", "-c", str(src),
                        "-o", str(tmp_path / "loops.o"), "-fopt-info-vec-optimized"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    vectorised = {int(m.group(1)) for m in re.finditer(r"loops\.cpp:(\d+):\d+: optimized: loop vectorized",
                                                        r.stdout + r.stderr)}
    missed = [f for i, f in enumerate(FUNCTIONS, start=2) if i not in vectorised]
    assert not missed, f"-march={march}: g++ did not vectorise the loops over {missed}"
