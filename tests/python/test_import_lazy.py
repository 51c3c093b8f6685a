"""`import tilewright` stays light: ml_dtypes (whose extension takes about a second to load on
some machines) is imported only when a kernel returns a bfloat16 array, and bfloat16 still works
then. Run in a fresh interpreter, since this test session has imported ml_dtypes already."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tilewright as tw
    import tilewright.language as T

    assert "ml_dtypes" not in sys.modules, "import tilewright imported ml_dtypes"

    def kernel(out_dtype):
        @T.prim_func
        def main(X: T.Tensor((16,), "float32"), Z: T.Tensor((16,), out_dtype)):
            with T.Kernel(1) as bx:
                for i in T.Parallel(16):
                    Z[i] = X[i] * 2 + 1
        return tw.compile(main, out_idx=[-1], target="cpu")

    x = np.arange(16, dtype=np.float32) / 4
    np.testing.assert_array_equal(kernel("float32")(x), x * 2 + 1)
    assert "ml_dtypes" not in sys.modules, "a float32 kernel imported ml_dtypes"

    z = kernel("bfloat16")(x)  # first bfloat16 output: ml_dtypes is imported now
    import ml_dtypes
    assert z.dtype == ml_dtypes.bfloat16, z.dtype
    np.testing.assert_array_equal(z.astype(np.float32), x * 2 + 1)  # exact in bfloat16
    print("ok")
""")


def test_import_does_not_load_ml_dtypes_until_a_bf16_output(tmp_path):
    script = tmp_path / "lazy_import.py"  # a file: the kernels' source must be readable
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "ok"
