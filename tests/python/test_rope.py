"""examples/rope.py: RoPE (half-split and interleaved) and the QK projection with RoPE in its
epilogue, against a float64 reference at random positions (any order), odd token counts (tails of
the row block, one token), head dims 2-128, each dtype with the testing module's tolerance."""
import pathlib
import sys

import numpy as np
import pytest

from tilewright.testing import assert_close, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import rope  # noqa: E402


@pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
@pytest.mark.parametrize("tokens,heads,dim", [(77, 4, 64), (1, 1, 2), (33, 3, 128), (32, 2, 6)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_rope_matches_reference(interleaved, tokens, heads, dim, dtype):
    rng = np.random.default_rng(tokens + dim)
    cos, sin = rope.tables(512, dim)
    pos = rng.integers(0, 512, size=tokens).astype(np.int32)
    x = randn((tokens, heads, dim), dtype, seed=rng)
    y = rope.rope(tokens, heads, dim, 512, interleaved, dtype=dtype)(x, cos, sin, pos)
    assert_close(y, rope.reference(x, cos, sin, pos, interleaved))


@pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
@pytest.mark.parametrize("tokens,hidden,heads,dim", [(77, 96, 2, 64), (5, 130, 1, 32)])
def test_qk_projection_with_rope_epilogue(interleaved, tokens, hidden, heads, dim):
    rng = np.random.default_rng(7)
    cos, sin = rope.tables(256, dim)
    pos = rng.integers(0, 256, size=tokens).astype(np.int32)
    x = randn((tokens, hidden), seed=rng)
    w = randn((hidden, heads * dim), seed=rng, scale=hidden ** -0.5)
    out = rope.qk_rope_proj(tokens, hidden, heads, dim, 256, interleaved)(x, w, cos, sin, pos)
    proj = (x.astype(np.float64) @ w.astype(np.float64)).reshape(tokens, heads, dim)
    assert_close(out, rope.reference(proj, cos, sin, pos, interleaved))


def test_position_zero_is_the_identity_and_rotation_keeps_the_norm():
    cos, sin = rope.tables(16, 64)
    x = randn((8, 2, 64), seed=3)
    for il in (False, True):
        kern = rope.rope(8, 2, 64, 16, il)
        assert_close(kern(x, cos, sin, np.zeros(8, np.int32)), x)
        y = kern(x, cos, sin, np.arange(8, dtype=np.int32))
        assert_close(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1))


@pytest.mark.parametrize("interleaved,tokens,heads,dim,dtype", [
    (False, 21, 2, 32, "float32"), (False, 33, 2, 64, "bfloat16"),
    (True, 21, 2, 32, "float32"), (True, 1, 1, 2, "float32"), (True, 33, 2, 64, "bfloat16"), (True, 9, 1, 6, "float16"),
    (True, 5, 3, 128, "float16")])
def test_rope_on_ascend_matches_cpu_and_reference(interleaved, tokens, heads, dim, dtype):
    """The same kernel unchanged on the 910B simulator (checker on: no report); the interleaved form
    reads its pairs and writes them back with Gathers (docs/ascend.md "Gathers"). (The half-split
    form reads x[i, j + dim/2] with vector operands, which start on 32 B: dim/2 a multiple of 8
    float32 elements.)"""
    from ascend_util import run_checked
    rng = np.random.default_rng(11 + dim)
    cos, sin = rope.tables(64, dim)
    pos = rng.integers(0, 64, size=tokens).astype(np.int32)
    x = randn((tokens, heads, dim), dtype, seed=rng)
    y = run_checked(rope.rope(tokens, heads, dim, 64, interleaved, dtype=dtype, target="ascend910b"), x, cos, sin, pos)
    assert_close(y, rope.reference(x, cos, sin, pos, interleaved))
    assert_close(y, rope.rope(tokens, heads, dim, 64, interleaved, dtype=dtype)(x, cos, sin, pos))


@pytest.mark.parametrize("interleaved", [False, True], ids=["half_split", "interleaved"])
@pytest.mark.parametrize("tokens,hidden,heads,dim,dtype", [
    (45, 96, 2, 64, "float32"),   # a tail block of 13 tokens: rows past `tokens` are skipped
    (5, 130, 1, 32, "float16"),   # one block, AIV 1's rows all past the end
    (40, 64, 1, 128, "bfloat16"), (1, 64, 2, 64, "float16")])
def test_qk_rope_proj_on_ascend_matches_cpu_and_reference(interleaved, tokens, hidden, heads, dim, dtype):
    """The same kernel unchanged on the 910B simulator (checker on): the Cube computes X @ W, each
    AIV gathers the table rows of the block_M / 2 tokens it owns (`for r in T.serial(block_M)` is
    a row loop, split like a map's rows: split_cube_vector) and rotates its half of the
    accumulator."""
    from ascend_util import run_checked
    rng = np.random.default_rng(tokens + dim)
    cos, sin = rope.tables(96, dim)
    pos = rng.integers(0, 96, size=tokens).astype(np.int32)
    x = randn((tokens, hidden), dtype, seed=rng)
    w = randn((hidden, heads * dim), dtype, seed=rng, scale=hidden ** -0.5)
    kern = rope.qk_rope_proj(tokens, hidden, heads, dim, 96, interleaved, dtype=dtype, target="ascend910b")
    out = run_checked(kern, x, w, cos, sin, pos)
    proj = (x.astype(np.float64) @ w.astype(np.float64)).reshape(tokens, heads, dim)
    assert_close(out, rope.reference(proj, cos, sin, pos, interleaved))
    assert_close(out, rope.qk_rope_proj(tokens, hidden, heads, dim, 96, interleaved, dtype=dtype)(x, w, cos, sin, pos))
