"""Session 41 (h-selfread41, issue 13; hunt40 F2 / F5): a T.Parallel map whose iterations depend on each other is
one located compile-time error on every target (transform/independent_maps.h), where cpu ran it in loop order (a
silent answer that depended on that order) and ascend910b refused it with a message of its own; the forms whose
iterations each touch their own elements (in-place RoPE, a row vector, a column scan over a serial loop) run on both
targets against float64. And an operand's error on ascend910b points at the let that reads it (F5)."""
import re

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

from ascend_util import run_on

TARGETS = ("cpu", "ascend910b")
M, N = 4, 16


def _kernel(form):
    """A (M, N) float32 kernel: x = X, the map `form`, Y = x (s: a (M,) tile of 1.5, idx: int32 I)."""
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), I: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            idx = T.alloc_fragment((M, N), "int32")
            T.copy(X, x)
            T.copy(I, idx)
            T.fill(s, 1.5)
            # ---- refused on both targets
            if form == "roll":
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, j] + x[(i + 1) % M, j]
            elif form == "reverse_rows":
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[M - 1 - i, j]
            elif form == "reverse_1d":
                for i in T.Parallel(M):
                    s[i] = s[M - 1 - i]
            elif form == "shift_columns":
                for i, j in T.Parallel(M, N - 1):
                    x[i, j] = x[i, j + 1]
            elif form == "by_column_0":
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, j] / x[i, 0]
            elif form == "let_of_the_next_row":
                for i, j in T.Parallel(M - 1, N):
                    nxt = x[i + 1, j]  # LET
                    x[i, j] = x[i, j] - nxt
            elif form == "per_row_store":
                for i, j in T.Parallel(M, N):
                    s[i] = x[i, j]
            elif form == "gather_of_the_stored_tile":
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, idx[i, j]]
            # ---- accepted: each iteration touches its own elements of the tile it writes
            elif form == "rope_interleaved_in_place":  # reads and writes its own pair of columns
                for i, j in T.Parallel(M, N // 2):
                    a = x[i, 2 * j]
                    b = x[i, 2 * j + 1]
                    x[i, 2 * j] = a * 0.6 - b * 0.8
                    x[i, 2 * j + 1] = b * 0.6 + a * 0.8
            elif form == "rope_halves_in_place":  # halves of 8 float32 columns: 32 B aligned on ascend910b
                for i, j in T.Parallel(M, N // 2):
                    a = x[i, j]
                    b = x[i, j + N // 2]
                    x[i, j] = a * 0.6 - b * 0.8
                    x[i, j + N // 2] = b * 0.6 + a * 0.8
            elif form == "own_element_and_row_vector":  # a tile the map does not write, read at any element
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, j] * s[i] + s[M - 1 - i]
            elif form == "column_scan":  # the map is over rows, the column a serial loop's: column j - 1 not stored
                for j in T.serial(1, N):
                    for i in T.Parallel(M):
                        x[i, j] = x[i, j] + x[i, j - 1]
            else:  # guarded_shift: iterations j < N / 2 read columns N / 2.., which no iteration stores (the guard)
                for i, j in T.Parallel(M, N):
                    if j < N // 2:
                        x[i, j] = x[i, j + N // 2]
            T.copy(x, Y)
    return k


REFUSED = [  # form, what the error says
    ("roll", r"'x' at x\[i, j\] and reads it at x\[\(i \+ 1\) % 4, j\]: iteration \(i=0, j=0\) reads the element "
             r"that iteration \(i=1, j=0\) stores"),
    ("reverse_rows", r"'x' at x\[i, j\] and reads it at x\[3 - i, j\]: iteration \(i=0, j=0\) reads the element that "
                     r"iteration \(i=3, j=0\) stores"),
    ("reverse_1d", r"'s' at s\[i\] and reads it at s\[3 - i\]: iteration \(i=0\) reads the element that iteration "
                   r"\(i=3\) stores"),
    ("shift_columns", r"reads it at x\[i, j \+ 1\]: iteration \(i=0, j=0\) reads the element that iteration \(i=0, j=1\)"),
    ("by_column_0", r"reads it at x\[i, 0\]: iteration \(i=0, j=1\) reads the element that iteration \(i=0, j=0\)"),
    ("let_of_the_next_row", r"reads it at x\[i \+ 1, j\]"),
    ("per_row_store", r"'s' from several iterations at one element: the store s\[i\] \(it does not use every loop "
                      r"index: not j\) writes the same element at iterations \(i=0, j=0\) and \(i=0, j=1\)"),
    ("gather_of_the_stored_tile", r"reads it at x\[i, idx\[i, j\]\]: iteration \(i=0, j=1\) may read an element "
                                  r"another iteration stores"),
]


@pytest.mark.parametrize("form, what", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_on_both_targets_with_one_error(form, what):
    messages = []
    for target in TARGETS:
        with pytest.raises(tw.TilewrightError) as e:
            tw.compile(_kernel(form), target=target, out_idx=[-1])
        messages.append(str(e.value))
    assert messages[0] == messages[1], messages  # the same error, at the same line, on both targets
    msg = messages[0]
    assert "test_selfread41.py:" in msg and "T.Parallel map stores into " in msg, msg
    assert re.search(what, msg), msg
    assert "must not depend on each other" in msg, msg
    tile = "s" if form == "reverse_1d" else "x"
    hint = "use a reduction" if form == "per_row_store" else f"T.copy({tile}, {tile}_old) before the map"
    assert hint in msg.split("hint:")[-1], msg


def test_the_let_is_located_at_its_line():
    """The read at another iteration's element is the let's value: the error is at the let, not at its use."""
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_kernel("let_of_the_next_row"), target="cpu", out_idx=[-1])
    assert "# LET" in str(e.value).splitlines()[1], str(e.value)


def _reference(form, x):
    x = x.astype(np.float64).copy()
    h = N // 2
    if form == "rope_interleaved_in_place":
        a, b = x[:, 0::2].copy(), x[:, 1::2].copy()
        x[:, 0::2], x[:, 1::2] = a * 0.6 - b * 0.8, b * 0.6 + a * 0.8
    elif form == "rope_halves_in_place":
        a, b = x[:, :h].copy(), x[:, h:].copy()
        x[:, :h], x[:, h:] = a * 0.6 - b * 0.8, b * 0.6 + a * 0.8
    elif form == "own_element_and_row_vector":
        x = x * 1.5 + 1.5
    elif form == "column_scan":
        x = np.cumsum(x, axis=1)
    else:
        x[:, :h] = x[:, h:]
    return x


ACCEPTED = ["rope_interleaved_in_place", "rope_halves_in_place", "own_element_and_row_vector", "column_scan",
            "guarded_shift"]


@pytest.mark.parametrize("form", ACCEPTED)
@pytest.mark.parametrize("target", TARGETS)
def test_accepted_forms_match_float64(form, target):
    rng = np.random.default_rng(41)
    x = rng.standard_normal((M, N)).astype(np.float32)
    ix = np.zeros((M, N), np.int32)
    got = run_on(_kernel(form), target, [-1], x, ix)
    np.testing.assert_allclose(got, _reference(form, x), rtol=1e-5, atol=1e-5, err_msg=f"{form} {target}")


# ------------------------------------------------------------------------------------------------------ hunt40 F5
def test_misaligned_let_value_points_at_the_let():
    """RoPE with D = 66 on ascend910b: b = x[i, j + 33] starts 4 bytes into a 32 B block; the caret is at the let
    that reads it, not at `b * ...` where it is used."""
    D, half, bm = 66, 33, 8

    @T.prim_func
    def k(X: T.Tensor((bm, D), "float32"), Y: T.Tensor((bm, D), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((bm, D), "float32")
            y = T.alloc_fragment((bm, D), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(bm, half):
                a = x[i, j]
                b = x[i, j + half]
                y[i, j] = a * T.cos(x[i, j]) - b * T.sin(x[i, j])
                y[i, j + half] = b * T.cos(x[i, j]) + a * T.sin(x[i, j])
            T.copy(y, Y)

    with pytest.raises(tw.TilewrightError, match=r"at an element which starts 4 bytes into a 32 B block") as e:
        tw.compile(k, target="ascend910b", out_idx=[-1])
    msg = str(e.value)
    assert "b = x[i, j + half]" in msg.splitlines()[1], msg  # the source line the caret is under
