"""Shared helpers of the examples: fixed-seed inputs, tolerances per dtype, a verdict."""
import sys

import ml_dtypes
import numpy as np

# Stated tolerances (max |ours - reference| <= atol + rtol * |reference|), per output dtype.
TOLERANCES = {
    "float32": (1e-4, 1e-4),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 1.6e-2),
    "int32": (0, 0),
}


def np_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def randn(rng, shape, dtype="float32", scale=1.0):
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np_dtype(dtype))


def close(name, got, ref, dtype, atol=None, rtol=None):
    """Prints the max error of got vs ref (float64) and returns whether it is within tolerance."""
    a, r = TOLERANCES[dtype]
    atol = a if atol is None else atol
    rtol = r if rtol is None else rtol
    got64 = np.asarray(got).astype(np.float64)
    ref64 = np.asarray(ref).astype(np.float64)
    err = np.abs(got64 - ref64)
    ok = bool(np.all(err <= atol + rtol * np.abs(ref64))) and got64.shape == ref64.shape
    print(f"  {name}: max abs err {float(err.max()) if err.size else 0.0:.3e} "
          f"(atol {atol:g}, rtol {rtol:g}) {'OK' if ok else 'MISMATCH'}")
    return ok


def finish(ok):
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)
