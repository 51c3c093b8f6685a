"""Session 34 API misuse hunt (h-api34): the public entry points given the wrong kind of object, bad
arguments or a bad cache directory. Each is a TilewrightError at the user's line (never one in
python/tilewright), naming the fix. Findings F1.. of docs/testing.md "Session 34: api34"."""
import functools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T
from tilewright.testing import randn

sys.path.insert(0, os.path.dirname(__file__))
from tw_test_util import located  # noqa: E402

HERE = os.path.abspath(__file__)
PACKAGE = os.path.dirname(os.path.abspath(tw.__file__))


@tw.jit(out_idx=[-1])  # @FACTORY
def twice(N):
    @T.prim_func
    def twice_k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = X[i] * 2.0
    return twice_k


def test_f1_a_jit_factory_given_to_compile_or_prim_func_is_an_error_at_the_users_line():
    # The parser read the jit wrapper's source: "'with' is only used for ..." at jit.py:4:5.
    err = located(lambda: tw.compile(twice, target="cpu"), HERE, "@F1A", "'twice' is a @tw.jit kernel factory",  # @F1A
                  "call it with its arguments", "@T.prim_func")
    assert f"defined at {HERE}:" in err.message and PACKAGE not in str(err)

    def decorated_twice():
        @T.prim_func  # @F1B
        @tw.jit
        def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    Y[i] = X[i]
        return k
    located(decorated_twice, HERE, "@F1B", "'k' is a @tw.jit kernel factory")
    located(lambda: tw.compile(functools.partial(twice, 8)), HERE, "@F1C", "cannot compile functools.partial",  # @F1C
            "a kernel is a Python function")
    located(lambda: T.prim_func(len), HERE, "@F1D", "cannot compile <built-in function len>")  # @F1D
    ns = {}
    exec("def f(X):\n    return X\n", ns)
    located(lambda: tw.compile(ns["f"]), HERE, "@F1E", "cannot read the source of 'f'", "defined in a .py file")  # @F1E


def test_f2_a_kernel_under_another_decorator_is_read_with_its_own_file_and_scope(tmp_path, monkeypatch):
    # A decorator keeping __wrapped__ (functools.wraps) from another module: the file was the
    # decorator's, the lines the kernel's; the wrapper's closure bound the kernel's names.
    (tmp_path / "api34_deco.py").write_text(textwrap.dedent("""
        import functools
        def logged(f):
            @functools.wraps(f)
            def w(*a, **k):
                return f(*a, **k)
            return w
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from api34_deco import logged
    f = 3.0  # the wrapper's closure has an 'f' too: the kernel function

    @T.prim_func
    @logged
    def scaled(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i] * f
    x = randn((8,), seed=34)
    np.testing.assert_array_equal(tw.compile(scaled, out_idx=[-1])(x), x * np.float32(3.0))

    def broken():
        @T.prim_func
        @logged
        def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    Y[i] = X[i] * not_defined_anywhere  # noqa: F821  # @F2
        return k
    located(broken, HERE, "@F2", "'not_defined_anywhere' is not defined")


def test_f3_f5_f6_jit_misuse_is_located():
    located(lambda: tw.compile(twice(8).__class__), HERE, "@F3", "cannot compile <class")  # @F3
    located(lambda: twice(8, target="tpu"), HERE, "@F3B", "unknown target 'tpu'")  # @F3B

    @tw.jit  # @F5
    def returns_nothing(n):
        pass
    located(lambda: returns_nothing(3), HERE, "@F5", "must return a @T.prim_func", "return main")
    located(lambda: twice(8, 16), HERE, "@F6", "'twice(N)': too many positional arguments")  # @F6
    located(lambda: twice(M=8), HERE, "@F6B", "'twice(N)': missing a required argument: 'N'")  # @F6B


def test_f4_jit_of_a_non_function():
    located(lambda: tw.jit(5), HERE, "@F4", "@tw.jit decorates a kernel factory", "got 5")  # @F4
    located(lambda: tw.jit(len), HERE, "@F4B", "got <built-in function len>")  # @F4B


def test_f7_prim_func_twice_is_the_same_prim_func():
    @T.prim_func
    def copy8(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i]
    assert T.prim_func(copy8) is copy8  # AttributeError: 'PrimFunc' object has no attribute '__name__'


def test_f8_out_idx_takes_numpy_ints_and_refuses_bools():
    prim = twice.__wrapped__(8)
    x = randn((8,), seed=8)
    np.testing.assert_array_equal(tw.compile(prim, out_idx=np.int64(-1))(x), x * 2)  # TypeError: not iterable
    located(lambda: tw.compile(prim, out_idx=True), HERE, "@F8", "out_idx True is not a parameter index")  # @F8
    located(lambda: tw.compile(prim, out_idx=[np.array([1])]), HERE, "@F8B", "is not a parameter index")  # @F8B


def test_f10_kernel_methods_with_bad_arguments():
    k = twice(8)
    located(lambda: k.get_source(5), HERE, "@F10", "get_source() takes a language name (a str), got 5")  # @F10
    located(lambda: k.get_source("cuda"), HERE, "@F10B", "no 'cuda' source", "get_source(\"c++\")")  # @F10B
    located(lambda: k.get_ir("nope"), HERE, "@F10C", "no IR stage 'nope'")  # @F10C
    sim = twice(8, target="ascend910b")
    x = randn((8,), seed=10)
    located(lambda: sim.profile(x, functional="no"), HERE, "@F10D", "profile(functional=...) takes a bool")  # @F10D
    np.testing.assert_array_equal(sim.profile(x, functional=np.bool_(True)).outputs, x * 2)


def test_f11_f12_f14_benchmark_autotune_and_ceildiv_arguments():
    located(lambda: tw.do_bench(5), HERE, "@F11", "do_bench: 5 is not callable")  # @F11
    located(lambda: tw.do_bench(lambda: None, rep=0), HERE, "@F11B", "rep (0) > 0")  # @F11B
    located(lambda: tw.autotune([tw.Config(N=8)], key=5)(twice), HERE, "@F12", "key 5 is not a list")  # @F12
    assert tw.autotune([tw.Config(N=8)], key="N")(twice).key == ["N"]  # a str was split into its letters
    located(lambda: tw.autotune([])(twice), HERE, "@F12B", "needs at least one configuration")  # @F12B
    located(lambda: T.ceildiv(128, 0), HERE, "@F14", "T.ceildiv(128, 0): division by zero")  # @F14


@pytest.mark.parametrize("shape", [(-1, 3), (2.5,), (float("nan"),), 1.5, (True,), (1 << 40, 1 << 40)])
def test_f13_testing_inputs_of_a_bad_shape(shape):
    for make in (tw.testing.randn, tw.testing.rand, tw.testing.randint):
        located(lambda: make(shape), HERE, "@F13", "shape")  # @F13
    assert tw.testing.randn(np.int64(3)).shape == (3,) and tw.testing.randint((0, 2)).shape == (0, 2)


def test_f15_cache_stats_of_a_cache_dir_that_is_a_file(tmp_path):
    # "trust: ok (yours, mode -rw-r--r--)" for a file; "chmod 700 it" for /dev/null
    (tmp_path / "file").write_text("")
    env = dict(os.environ, TW_CACHE_DIR=str(tmp_path / "file"))
    r = subprocess.run([sys.executable, "-m", "tilewright", "cache", "stats"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "trust     : REFUSED: not a directory" in r.stdout, r.stdout + r.stderr


def test_f16_precompile_errors_of_its_threads_are_at_its_call():
    # user_location() in a pool thread found concurrent/futures/thread.py
    located(lambda: tw.precompile([(twice, (8,), "tpu")], progress=False), HERE, "@F16", "unknown target 'tpu'")  # @F16
    located(lambda: tw.precompile([(lambda n: 5, (3,))], progress=False), HERE, "@F16B",  # @F16B
            "returned 5, not a compiled kernel")


def test_f17_out_idx_naming_an_input_of_a_tile_loops_kernel_is_refused():
    # X became an output: allocated, never written, the kernel took no input and returned garbage
    def copy8(X: tw.Tensor((8,), "float32")):
        out = tw.output((8,), dtype="float32")
        for i in range(1):
            t = tw.load(X, (0,), (8,))
            tw.store(out, (0,), t)
        return out
    located(lambda: tw.compile(copy8, out_idx=[0]), HERE, "@F17", "out_idx names input 'X'", "tw.output")  # @F17
    x = randn((8,), seed=17)
    np.testing.assert_array_equal(tw.compile(copy8, out_idx=[-1])(x), x)  # naming its output stays harmless


def test_f18_an_output_the_kernel_never_writes_is_an_error():
    # Z was returned as uninitialised memory (no report on cpu, in checked mode or in the simulator)
    @T.prim_func
    def writes_y(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32"), Z: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i]
    located(lambda: tw.compile(writes_y, out_idx=[-1]), HERE, "@F18", "never writes its output 'Z'",  # @F18
            "here 'Y'")

    def two_outputs(X: tw.Tensor((8,), "float32")):
        out = tw.output((8,), dtype="float32")
        out2 = tw.output((8,), dtype="float32")
        for i in range(1):
            t = tw.load(X, (0,), (8,))
            tw.store(out, (0,), t)
        return out, out2
    located(lambda: tw.compile(two_outputs), HERE, "@F18B", "never writes its output 'out2'", "tw.store")  # @F18B

    @T.prim_func
    def writes_nothing(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X[0], t)
    # the hint named an empty list ("here ") where the kernel writes no tensor
    located(lambda: tw.compile(writes_nothing, out_idx=[-1]), HERE, "@F18C", "never writes its output 'Y'",  # @F18C
            "writes none of its tensor parameters")
