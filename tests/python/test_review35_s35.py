"""Session 35's review of h-mul35, h-masktile35 and h-api35 (h-review35; docs/testing.md "Session 35: review").

R1 (h-mul35): an int32 product inside a `^` / `+` whose own value is seen unwrapped (a comparison) was
computed modulo 2^32 on ascend910b, silently: `((x * n) ^ 0) < 0` and `x * y + n < 0` gave the wrapped
product's answer where the language (and cpu) compare the int64 value. An operand of + - * & | ^ ~ is now
wrapped only where that operation's value is (or under an & with a constant in [0, 2^31), or left of >>):
elsewhere it keeps the one Mul and the simulator's `int32 overflow` report where it leaves int32.
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET  # noqa: E402

N = 21
I32 = np.iinfo(np.int32)


@T.prim_func
def _seen(X: T.Tensor((N,), "int32"), X2: T.Tensor((N,), "int32"), n: T.int32, Y: T.Tensor((4, N), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((N,), "int32")
        x2 = T.alloc_fragment((N,), "int32")
        y = T.alloc_fragment((4, N), "int32")
        T.copy(X, x)
        T.copy(X2, x2)
        for j in T.Parallel(N):
            y[0, j] = T.if_then_else(((x[j] * n) ^ 0) < 0, 1, 0)  # R1: the ^ is seen, so is the product
            y[1, j] = T.if_then_else(x[j] * x2[j] + n < 0, 1, 0)  # R1: the + is seen
            y[2, j] = T.if_then_else(((x[j] * 1103515245 + n) & 0xFFFF) < 30000, 1, 0)  # masked: wrapped
            y[3, j] = ((x[j] * n + x2[j]) >> 16) & 255  # left of >>: wrapped
        T.copy(y, Y)


def _w32(v):
    return ((np.asarray(v, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _expected(x, x2, n):
    x, x2 = x.astype(np.int64), x2.astype(np.int64)
    return np.stack([((x * n) < 0).astype(np.int64), (x * x2 + n < 0).astype(np.int64),
                     ((_w32(x * 1103515245 + n) & 0xFFFF) < 30000).astype(np.int64),
                     (_w32(x * n + x2) >> 16) & 255]).astype(np.int32)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_r1_products_inside_a_seen_operation_are_not_wrapped(target):
    rng = np.random.default_rng(35)
    small = rng.integers(-3000, 3000, N).astype(np.int32)  # every product inside int32
    k = tw.compile(_seen, target=target, out_idx=[-1])
    for n in [0, 7, -46000]:
        want = _expected(small, small[::-1].copy(), n)
        got = k(small, small[::-1].copy(), n) if target == "cpu" else k.profile(small, small[::-1].copy(), n)
        if target != "cpu":
            assert got["reports"] == [], got["reports"]
            got = got.outputs
        np.testing.assert_array_equal(got, want)
    if target == "cpu":
        return
    big = np.array([2 ** 16, -2 ** 16, I32.max, I32.min] + [3] * (N - 4), np.int32)
    x2 = np.full(N, 2 ** 16, np.int32)
    p = k.profile(big, x2, 46341)  # 2^16 * 46341 leaves int32: seen, so a report (it was a silent wrong bit)
    assert any(re.search(r"test_review35_s35\.py:\d+: int32 overflow: int32 Muls? gives", r) for r in p["reports"]), \
        p["reports"]


def test_the_ascendc_readme_says_an_accumulated_output_must_start_at_zero(tmp_path):
    """h-api35 zeroes an out_idx output only T.atomic_add writes (the simulator before the launch, the printed
    main.cpp every output); the exported project's README said nothing, so a host of one's own returned
    garbage plus the sum. It now names that output (and only it)."""
    from test_api35_s35 import scatter_add
    tw.compile(scatter_add(5, 16, "float32"), target=TARGET, out_idx=[-1]).export(str(tmp_path))
    readme = (tmp_path / "scatter" / "README.md").read_text()
    lines = [ln for ln in readme.splitlines() if "zero it before every launch" in ln]
    assert len(lines) == 1 and lines[0].startswith("- `Out` float32"), readme


@T.prim_func
def _chain_3d(X: T.Tensor((5, 19), "int32"), n: T.int32, Y: T.Tensor((1, 5, 19), "int32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((5, 19), "int32")
        y = T.alloc_fragment((1, 5, 19), "int32")
        T.copy(X, x)
        for i, j in T.Parallel(5, 19):
            if j < 1 and i < n:
                y[0, i, j] = x[i, j] + 1
            elif j < 3 and i < n:
                y[0, i, j] = x[i, j] + 2
            else:
                y[0, i, j] = x[i, j]
        T.copy(y, Y)


# R2 (fixed on h-port36): an int32 elif chain storing y[0, i, j] of a (1, m, n) tile from a 2-D map was an
# ascend910b error whose hint (the if inside the inner T.Parallel loop) was what the kernel already did; the same
# chain into an (m, n) tile compiled. serial_maps read y[0, i, j] as a strided store; a unit dim indexed by 0 is
# now skipped there (test_port36_s36.py tests the (m, 1, n) and serial-loop forms).
def test_r2_an_int32_elif_chain_into_a_3d_tile_compiles_on_ascend():
    x = np.arange(-40, 55, dtype=np.int32).reshape(5, 19)
    want = tw.compile(_chain_3d, target="cpu", out_idx=[-1])(x, 3)
    k = tw.compile(_chain_3d, target=TARGET, out_idx=[-1])
    p = k.profile(x, 3)
    assert p["reports"] == []
    np.testing.assert_array_equal(p.outputs, want)


DM, DN, DB = 37, 45, 16


@T.prim_func
def _dropout_hash(X: T.Tensor((DM, DN), "float16"), seed: T.int32, Y: T.Tensor((DM, DN), "float16")):
    """A users' hash dropout: a multiplicative hash of the element index, a murmur-like mix, 24 bits to [0, 1)."""
    with T.Kernel(T.ceildiv(DM, DB)) as bx:
        x = T.alloc_fragment((DB, DN), "float16")
        y = T.alloc_fragment((DB, DN), "float16")
        T.copy(X[bx * DB, 0], x)
        for i, j in T.Parallel(DB, DN):
            h = ((bx * DB + i) * DN + j) * -1640531535 + seed
            h2 = (h ^ (h >> 16)) * 73244475
            keep = T.cast(h2 & 0xFFFFFF, "float32") * (1.0 / 16777216) >= 0.25
            y[i, j] = T.if_then_else(keep, x[i, j] * T.float16(4.0 / 3), T.float16(0))
        T.copy(y, Y[bx * DB, 0])


@T.prim_func
def _dropout_xorshift(X: T.Tensor((DM, DN), "float32"), S: T.Tensor((DM, DN), "int32"), seed: T.int32,
                      Y: T.Tensor((DM, DN), "float32")):
    """Per-element states: xorshift32, then a PCG-like multiply-add, 16 bits of it against a threshold."""
    with T.Kernel(T.ceildiv(DM, DB)) as bx:
        x = T.alloc_fragment((DB, DN), "float32")
        s = T.alloc_fragment((DB, DN), "int32")
        y = T.alloc_fragment((DB, DN), "float32")
        T.copy(X[bx * DB, 0], x)
        T.copy(S[bx * DB, 0], s)
        for i, j in T.Parallel(DB, DN):
            t = s[i, j] ^ (s[i, j] << 13)
            t2 = t ^ (t >> 17)
            t3 = (t2 ^ (t2 << 5)) * 747796405 + seed
            y[i, j] = T.if_then_else(((t3 >> 8) & 0xFFFF) < 40000, x[i, j], 0.0)
        T.copy(y, Y[bx * DB, 0])


def _dropout_refs(x16, x32, s, seed):
    i, j = np.arange(DM)[:, None], np.arange(DN)[None, :]
    h = _w32((i * DN + j) * -1640531535 + seed)
    h2 = _w32((h ^ (h >> 16)) * 73244475)
    keep = (h2 & 0xFFFFFF).astype(np.float32) * np.float32(1.0 / 16777216) >= 0.25
    a = np.where(keep, (x16.astype(np.float32) * np.float32(np.float16(4.0 / 3))).astype(np.float16), np.float16(0))
    s = s.astype(np.int64)
    t = _w32(s ^ (s << 13))
    t2 = t ^ (t >> 17)
    t3 = _w32(_w32(t2 ^ (t2 << 5)) * 747796405 + seed)
    return a, np.where(((t3 >> 8) & 0xFFFF) < 40000, x32, 0).astype(np.float32)


@pytest.mark.parametrize("target", ["cpu", TARGET])
def test_hash_dropouts_as_users_write_them(target):
    """h-mul35's forms in two RNG dropouts (no finding): == numpy's int32 wrapping, no report, at seeds 0 and
    INT32_MIN (the hash's + seed spans int32)."""
    rng = np.random.default_rng(0)
    x16 = rng.standard_normal((DM, DN)).astype(np.float16)
    x32 = rng.standard_normal((DM, DN)).astype(np.float32)
    s = rng.integers(I32.min, I32.max, (DM, DN), endpoint=True).astype(np.int32)
    ka = tw.compile(_dropout_hash, target=target, out_idx=[-1])
    kb = tw.compile(_dropout_xorshift, target=target, out_idx=[-1])
    for seed in [0, int(I32.min)]:
        want_a, want_b = _dropout_refs(x16, x32, s, seed)
        if target == "cpu":
            got_a, got_b = ka(x16, seed), kb(x32, s, seed)
        else:
            pa, pb = ka.profile(x16, seed), kb.profile(x32, s, seed)
            assert pa["reports"] == [] and pb["reports"] == [], pa["reports"] + pb["reports"]
            got_a, got_b = pa.outputs, pb.outputs
        np.testing.assert_array_equal(got_a, want_a)
        np.testing.assert_array_equal(got_b, want_b)
        assert 0.6 < (want_a != 0).mean() < 0.9  # the hash keeps about 3 in 4
