"""Session 39 (h-sync39, issue 13): insert_sync orders a core's writes of the same GM bytes. One pipe's
copies may overlap, so a store followed by another store or a T.atomic_add into the same bytes needs
PipeBarrier<PIPE_MTE3> (FIX for Fixpipe) between them; before, GM write-after-write was left unordered
and the simulator's checker reported a same-pipe hazard. Two atomic adds commute and stay unordered.
Each form runs on cpu and on ascend910b (checker on: a report fails), against numpy; the other GM
orders of one core (a store read back, an in-place kernel) are checked alongside."""
import os
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, os.path.dirname(__file__))
from ascend_util import TARGET, run_checked_partial, run_on  # noqa: E402

F = "float32"


def store_then_atomic():  # unwritten39 F1: a plain store, then an atomic add into the same bytes
    @T.prim_func
    def k(X: T.Tensor((8,), F), Y: T.Tensor((8,), F)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), F)
            T.copy(X, t)
            T.copy(t, Y)
            T.atomic_add(Y[0], t)
    return k, lambda x: 2 * x, 8


def _add_then(second):  # an atomic add into Y, then `second` (a store or another add) of the same tile
    @T.prim_func
    def k(X: T.Tensor((8,), F), Y: T.Tensor((8,), F)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), F)
            T.copy(X, t)
            T.atomic_add(Y[0], t)
            if second == "store":
                T.copy(t, Y)
            else:
                T.atomic_add(Y[0], t)
    return k


def atomic_then_store():  # the store after the add wins
    return _add_then("store"), lambda x: x, 8


def overlapping_stores():  # windows [0, 8), [4, 12), [8, 16): each later one wins where they meet
    @T.prim_func
    def k(X: T.Tensor((16,), F), Y: T.Tensor((16,), F)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), F)
            u = T.alloc_fragment((8,), F)
            T.copy(X[0], t)
            T.copy(X[8], u)
            T.copy(t, Y[0])
            T.copy(u, Y[4])
            T.copy(t, Y[8])

    def ref(x):
        y = np.empty(16, np.float32)
        y[0:8], y[4:12], y[8:16] = x[0:8], x[8:16], x[0:8]
        return y
    return k, ref, 16


def stored_twice_per_block():  # each of 4 blocks stores its tile, doubles it, stores it again
    @T.prim_func
    def k(X: T.Tensor((64,), F), Y: T.Tensor((64,), F)):
        with T.Kernel(4) as b:
            t = T.alloc_fragment((16,), F)
            T.copy(X[b * 16], t)
            T.copy(t, Y[b * 16])
            for j in T.Parallel(16):
                t[j] = t[j] * 2.0
            T.copy(t, Y[b * 16])
    return k, lambda x: 2 * x, 64


def store_read_back():  # read-after-write through GM (MTE3 then MTE2), then a store over it
    @T.prim_func
    def k(X: T.Tensor((8,), F), Y: T.Tensor((8,), F)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), F)
            u = T.alloc_fragment((8,), F)
            T.copy(X, t)
            T.copy(t, Y)
            T.copy(Y, u)
            for j in T.Parallel(8):
                u[j] = u[j] + 1.0
            T.copy(u, Y)
    return k, lambda x: x + 1, 8


def atomic_twice():  # two atomic adds into the same bytes: they commute (no barrier needed)
    return _add_then("add"), lambda x: 2 * x, 8


FORMS = [store_then_atomic, atomic_then_store, overlapping_stores, stored_twice_per_block, store_read_back,
         atomic_twice]


@pytest.mark.parametrize("target", ["cpu", TARGET])
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_gm_written_twice_by_one_core(form, target):
    k, ref, n = form()
    x = np.arange(1, n + 1, dtype=np.float32) * np.float32(0.5)
    if form is atomic_then_store and target != "cpu":  # its add into the not yet written Y is reported
        got = run_checked_partial(tw.compile(k, target=target, out_idx=[-1]), x)
    elif form is atomic_then_store:  # so is it on cpu in checked mode (session 40): Y passed in
        got = np.zeros(n, np.float32)
        tw.compile(k, target="cpu")(x, got)
    else:
        got = run_on(k, target, [-1], x)
    np.testing.assert_array_equal(got, ref(x))


def test_barrier_between_the_store_and_the_add():
    """The printed AscendC has the barrier between the two MTE3 copies; two atomic adds get none."""
    k, _, _ = store_then_atomic()
    src = tw.compile(k, target=TARGET, out_idx=[-1]).get_source()
    body = src[src.index("SetAtomicAdd") - 400:src.index("SetAtomicAdd")]
    assert "PipeBarrier<PIPE_MTE3>" in body, src
    k, _, _ = atomic_twice()
    assert "PipeBarrier<PIPE_MTE3>" not in tw.compile(k, target=TARGET, out_idx=[-1]).get_source()


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_in_place(target):
    """X is input and output: loaded, tripled, stored, loaded again, incremented, stored (GM RAW / WAR /
    WAW of one tensor on one core)."""
    @T.prim_func
    def k(X: T.Tensor((8,), F)):
        with T.Kernel(1) as b:
            t = T.alloc_fragment((8,), F)
            T.copy(X, t)
            for j in T.Parallel(8):
                t[j] = t[j] * 3.0
            T.copy(t, X)
            T.copy(X, t)
            for j in T.Parallel(8):
                t[j] = t[j] + 1.0
            T.copy(t, X)
    x = np.arange(8, dtype=np.float32)
    want = 3 * x + 1
    kern = tw.compile(k, target=target)
    if target == "cpu":
        kern(x)
    else:
        prof = kern.profile(x)
        assert prof["reports"] == [], "\n".join(prof["reports"])
        x = prof.inputs[0] if hasattr(prof, "inputs") else x
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_fixpipe_then_atomic_fixpipe(target):
    """A gemm result stored (Fixpipe on FIX), then added into the same bytes (atomic Fixpipe): FIX's
    copies are ordered like MTE3's."""
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), F)):
        with T.Kernel(1) as b:
            a = T.alloc_shared((16, 16), "float16")
            bb = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), F)
            T.copy(A, a)
            T.copy(B, bb)
            T.clear(c)
            T.gemm(a, bb, c)
            T.copy(c, C)
            T.atomic_add(C[0, 0], c)
    rng = np.random.default_rng(39)
    A = rng.integers(-4, 5, (16, 16)).astype(np.float16)  # exact products and sums in fp32
    B = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    got = run_on(k, target, [-1], A, B)
    np.testing.assert_array_equal(got, 2 * (A.astype(np.float32) @ B.astype(np.float32)))
