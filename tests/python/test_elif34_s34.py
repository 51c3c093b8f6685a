"""Session 34: long elif chains in a T.Parallel map on ascend910b (h-elif34; issue 13; docs/ascend.md "Session 34:
elif chains linear in their arms (h-elif34)"). A nested if binds its condition and the paths to its arms as lets,
guarded once along the path, and legalize_vector computes a condition read again into a tile once, so the program
grows by the same number of instructions with every arm (session 33: a seven-arm int32 chain took 547 s to
compile, its program doubling with every arm). Each chain runs on cpu and on ascend910b (simulator, checker on:
`prof["reports"] == []`) against numpy, exact (small integers and halves, NaN in float inputs): int32 / float32 /
float16 / bfloat16, 7 and 10 arms over a 3 x 13 map (a tail in every row); and the Program's instruction count
(not a timing) grows linearly from 4 to 8 arms. And `T.where(x[i, j] < 1 and j < 5, 1, 0)` (a data condition,
then one free of the data), a segmentation fault of the compiler on ascend910b before, against numpy; bfloat16
index masks nested under a scalar, data or index `if` (session 33's open finding in its T.where form).
"""
import pathlib
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from test_elif32_s32 import _values  # noqa: E402
from test_elifcond33_s33 import _same, _with_nan, load_kernel  # noqa: E402

R, C = 3, 13


def _cond(k):
    """The condition of arm k: on the data (x > 4 - k), every third one on the column index (j < k + 1)."""
    return (f"j < {k + 1}", lambda x, j: j < k + 1) if k % 3 == 2 else (f"x[i, j] > {4 - k}", lambda x, j: x > 4 - k)


def _chain_source(dt, arms):
    """if / elif x arms - 2 / else; each arm stores y from x and y (int32: guarded arithmetic) and z from the y it
    has just stored (the stores in order)."""
    body = []
    for k in range(arms - 1):
        body += [f"                {'elif' if k else 'if'} {_cond(k)[0]}:",
                 f"                    y[i, j] = x[i, j] * 2 - y[i, j] + {k}",
                 "                    z[i, j] = y[i, j] + x[i, j]"]
    body += ["                else:", "                    y[i, j] = x[i, j] - 1"]
    shape = f"({R}, {C})"
    return f"""import tilewright.language as T


@T.prim_func
def kernel(X: T.Tensor({shape}, "{dt}"), Y0: T.Tensor({shape}, "{dt}"), Y: T.Tensor({shape}, "{dt}"),
           Z: T.Tensor({shape}, "{dt}")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment({shape}, "{dt}")
        y = T.alloc_fragment({shape}, "{dt}")
        z = T.alloc_fragment({shape}, "{dt}")
        T.copy(X, x)
        T.copy(Y0, y)
        T.fill(z, 0)
        for i, j in T.Parallel({R}, {C}):
""" + "\n".join(body) + """
        T.copy(y, Y)
        T.copy(z, Z)
"""


def _chain_ref(x, y0, arms):
    f, g, j = x.astype(np.float64), y0.astype(np.float64), np.arange(C)[None, :]
    y, z = f - 1, np.zeros_like(f)
    for k in reversed(range(arms - 1)):  # the first arm whose condition holds
        c = _cond(k)[1](f, j)
        y, z = np.where(c, 2 * f - g + k, y), np.where(c, 3 * f - g + k, z)
    return y.astype(x.dtype), z.astype(x.dtype)


@pytest.mark.parametrize("arms", [7, 10])
@pytest.mark.parametrize("dt", ["int32", "float32", "float16", "bfloat16"])
def test_long_elif_chain(dt, arms, tmp_path):
    prim = load_kernel(_chain_source(dt, arms), tmp_path)
    x, y0 = _with_nan(_values(dt, (R, C), 80 + arms)), _values(dt, (R, C), 90 + arms)
    want = _chain_ref(x, y0, arms)
    for target in ["cpu", TARGET]:
        k = tw.compile(prim, target=target, out_idx=[-2, -1])
        got = k(x, y0) if target == "cpu" else run_checked(k, x, y0)
        for g, w in zip(got, want):
            _same(g, w)


def _instructions(prim):
    """The Program's instructions (the lowered Ascend program's lines of vector, scalar and move instructions)."""
    text = tw.compile(prim, target=TARGET, out_idx=[-2, -1]).get_source("ascend_program")
    return sum(1 for line in text[text.index("AIV:"):].splitlines() if line.strip().startswith(("V ", "S ", "MTE")))


def test_elif_chain_program_grows_linearly(tmp_path):
    """int32 (the guarded form): every arm from 4 to 8 adds the same instructions, within 10 % (paths computed
    again at every store grew the program quadratically, guards of guards doubled it with every arm)."""
    n = {a: _instructions(load_kernel(_chain_source("int32", a), tmp_path)) for a in (4, 6, 8)}
    first, second = n[6] - n[4], n[8] - n[6]
    assert first > 0 and abs(second - first) <= 0.1 * first, n


def _data_and_other(dt, form):
    @T.prim_func
    def k(X: T.Tensor((R, C), dt), Y: T.Tensor((R, C), dt), m: T.int32):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), dt)
            y = T.alloc_fragment((R, C), dt)
            T.copy(X, x)
            for i, j in T.Parallel(R, C):
                if form == "index":
                    y[i, j] = T.where(x[i, j] < 1 and j < 5, 1, 0)
                elif form == "scalar":
                    y[i, j] = T.where(x[i, j] < 1 and m < 2, 1, 0)
                else:
                    y[i, j] = T.where(x[i, j] < 1 or j < 5, 1, 0)
            T.copy(y, Y)
    return k


@pytest.mark.parametrize("form", ["index", "scalar", "or"])
@pytest.mark.parametrize("dt", ["int32", "float16"])
def test_where_on_data_and_a_condition_free_of_it(dt, form):
    """`T.where(x[i, j] < 1 and j < 5, 1, 0)`, the data condition first, between two scalars: a segmentation
    fault of the compiler on ascend910b before (select_on selected the scalars on the index mask first)."""
    x = _with_nan(_values(dt, (R, C), 95))
    f, j = x.astype(np.float64), np.arange(C)[None, :]
    want = {"index": (f < 1) & (j < 5), "scalar": (f < 1) & (1 < 2), "or": (f < 1) | (j < 5)}[form]
    for target in ["cpu", TARGET]:
        k = tw.compile(_data_and_other(dt, form), target=target, out_idx=[-2])
        _same(k(x, 1) if target == "cpu" else run_checked(k, x, 1), want.astype(x.dtype))


def _bf16_index_masks(form):
    @T.prim_func
    def k(W: T.Tensor((R, C), "bfloat16"), Y: T.Tensor((R, C), "bfloat16"), m: T.int32):
        with T.Kernel(1) as bx:
            w = T.alloc_fragment((R, C), "bfloat16")
            T.copy(W, w)
            for i, j in T.Parallel(R, C):
                if form == "scalar":
                    if m == 3:
                        w[i, j] = 1
                    elif j < 3:  # an index mask under a select on a scalar
                        w[i, j] = -2
                elif form == "data":
                    if w[i, j] > 0:
                        if j < 3:  # nested: an index mask under a data condition
                            w[i, j] = -2
                        elif j >= C - 2:
                            w[i, j] = w[i, j] * 2
                else:
                    if j >= 4:
                        if i == 1:  # index masks nested
                            w[i, j] = 3
                        elif w[i, j] < 0:
                            w[i, j] = 0
            T.copy(w, Y)
    return k


@pytest.mark.parametrize("form", ["scalar", "data", "index"])
def test_bfloat16_nested_index_masks(form):
    """Session 33's finding (a bfloat16 index mask under another select, "vector op on bfloat16" when written as
    nested T.where by hand): written as ifs they run, as on cpu."""
    w0 = _with_nan(_values("bfloat16", (R, C), 97))
    f, i, j = w0.astype(np.float64), np.arange(R)[:, None], np.arange(C)[None, :]
    for m in (3, 0):
        want = {"scalar": np.where(m == 3, 1, np.where(j < 3, -2, f)),
                "data": np.where(f > 0, np.where(j < 3, -2, np.where(j >= C - 2, 2 * f, f)), f),
                "index": np.where(j >= 4, np.where(i == 1, 3, np.where(f < 0, 0, f)), f)}[form]
        for target in ["cpu", TARGET]:
            k = tw.compile(_bf16_index_masks(form), target=target, out_idx=[-2])
            _same(k(w0, m) if target == "cpu" else run_checked(k, w0, m), want.astype(w0.dtype))
