"""Session 37 (h-hunt37, issue 13: the simulator as the guard): reproducers of the hunt's findings
(/work/hunt37-findings.txt; docs/testing.md "Session 37: hunt (h-hunt37)"). Exact integer references on
Python ints under the language's rules (docs/language.md: integers computed in int64, wrapped on store;
`x >> n` wraps x into its type first)."""
import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from ascend_util import TARGET, run_checked


def _wrap32(v):
    return ((v + 2**31) % 2**32) - 2**31


@tw.jit(out_idx=[-2, -1])
def bool_arith(M, N):
    """F2: a bool converted to int32, then arithmetic past int32 before the store: a comparison sees the
    int64 value (Y), a shift the value wrapped into int32 (Z)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int32"), Z: T.Tensor((M, N), "int32")):
        with T.Kernel(1) as _:
            x = T.alloc_fragment((M, N), "int8")
            y = T.alloc_fragment((M, N), "int32")
            z = T.alloc_fragment((M, N), "int32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(M, N):
                y[i, j] = ((T.cast(x[i, j] != 0, "int32") - 127) * 20000000) < 0
                z[i, j] = ((T.cast(T.cast(x[i, j], "bool"), "int32") - 127) * 20000000) >> 4
            T.copy(y, Y[0, 0])
            T.copy(z, Z[0, 0])

    return main


@pytest.mark.parametrize("shape", [(3, 17), (1, 1)])
def test_f2_bool_converted_to_int_is_computed_in_int64_on_cpu(shape):
    """cpu computed `T.cast(cond, "int32") - 127` in C++'s 32-bit int (a C++ bool promoted), so the product
    overflowed (undefined behaviour): Y was 0, Z -134217728 everywhere. ascend910b's Z agrees (no report);
    its Y is the documented `int32 overflow` report (the Muls leaves int32), not run here."""
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    x.flat[0] = 0
    b = (x != 0).astype(np.int64)
    y_ref = ((b - 127) * 20000000 < 0).astype(np.int32)
    z_ref = np.vectorize(lambda v: _wrap32(v) >> 4)((b - 127) * 20000000).astype(np.int32)
    y, z = bool_arith(*shape)(x)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(z, z_ref)
    prof = bool_arith(*shape, target=TARGET).profile(x)
    np.testing.assert_array_equal(prof.outputs[1], z_ref)
    assert all("int32 overflow" in r for r in prof["reports"]) and prof["reports"]
