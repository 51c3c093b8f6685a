"""Session 33: the `if` forms in a T.Parallel map that were still errors on ascend910b after session 32 run as on
cpu (h-elifcond33; issue 13; docs/ascend.md "Session 33: conditions on clobbered tiles, scalar conditions and
row ifs in a map (h-elifcond33)"): a condition (or a let it uses) reading a tile that a store of the `if` writes
before the condition's last use (bound before the stores: cpu evaluates it once, before either arm); a
condition free of the map (a scalar parameter) beside other statements or nested; an `if` on the row index
around inner T.Parallel loops. Each kernel runs on cpu and on ascend910b (simulator, checker on:
`prof["reports"] == []`) against numpy, exact (small integers and halves: exact in every dtype tested, NaN in
the float inputs compared as NaN); int32 / float16 / float32 / bfloat16 / int8, maps of 1, 7, 37 and 129
elements. Random if-trees (`random_tree`) run on both targets and must agree exactly.
"""
import importlib.util
import pathlib
import random
import sys

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ascend_util import TARGET, run_checked  # noqa: E402
from test_elif32_s32 import _run, _values  # noqa: E402

TARGETS = ["cpu", TARGET]
DTYPES = ["int32", "float16", "float32", "bfloat16", "int8"]
# every dtype at 37 elements, float32 at 1, 7 and 129 too, int8 at 1 (CI time: a case is a compile per target)
SIZED = [(dt, 37) for dt in DTYPES] + [("float32", 1), ("float32", 7), ("float32", 129), ("int8", 1)]


def _with_nan(x):
    """A NaN in a float input (every second element from the third on is a comparison's NaN)."""
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        x = x.copy()
        x[2::5] = np.nan
    return x


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(g, w, equal_nan=True), (got, want)


# --------------------------------------------------------------------------- conditions and lets on clobbered tiles
def _clobbered(dt, n):
    @T.prim_func
    def k(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt), Z: T.Tensor((n,), dt), W: T.Tensor((n,), dt)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dt)
            y = T.alloc_fragment((n,), dt)
            z = T.alloc_fragment((n,), dt)
            w = T.alloc_fragment((n,), dt)
            T.copy(X, x)
            for i in T.Parallel(n):
                w[i] = x[i] * 2
                t = x[i] + 1  # x before the if: its arm stores x before it reads t
                if w[i] > 2:  # the tile a store before the if wrote
                    z[i] = 1
                else:
                    z[i] = 0
                if x[i] > 1:  # x is stored first in the arm; the condition is x's before the if
                    x[i] = x[i] - 1
                    y[i] = x[i] * 2 + t
                elif x[i] < -1:
                    y[i] = t * 2 - x[i]
                else:
                    y[i] = t
            T.copy(x, X)
            T.copy(y, Y)
            T.copy(z, Z)
            T.copy(w, W)
    return k


@pytest.mark.parametrize("dt,n", SIZED)
@pytest.mark.parametrize("target", TARGETS)
def test_condition_and_let_on_tiles_the_if_stores(target, dt, n):
    x0 = _with_nan(_values(dt, (n,), 30 + n))
    x = x0.copy()
    y, z, w = _run(_clobbered(dt, n), target, [-3, -2, -1], x)
    f = x0.astype(np.float64)
    c = f > 1
    _same(x, np.where(c, f - 1, f).astype(x0.dtype))
    _same(y, np.where(c, 3 * f - 1, np.where(f < -1, f + 2, f + 1)).astype(x0.dtype))
    _same(z, (2 * f > 2).astype(x0.dtype))
    _same(w, (2 * f).astype(x0.dtype))


# --------------------------------------------------------------------------- conditions on scalars
def _scalars(dt, n):
    @T.prim_func
    def k(X: T.Tensor((n,), dt), Y: T.Tensor((n,), dt), Z: T.Tensor((n,), dt), s: T.float32, m: T.int32):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), dt)
            y = T.alloc_fragment((n,), dt)
            z = T.alloc_fragment((n,), dt)
            T.copy(X, x)
            for i in T.Parallel(n):
                y[i] = x[i] + 1
                if s > 0.0:  # free of the map, beside a store: a select on the scalar
                    z[i] = y[i] * 2
                elif m >= 0 and m < n:
                    z[i] = x[m]  # read where m is in range only, as on cpu
                else:
                    z[i] = -1
                if x[i] > 0:
                    if m > 2:  # nested
                        y[i] = 0
            T.copy(y, Y)
            T.copy(z, Z)
    return k


@pytest.mark.parametrize("dt,n", [("float32", 1), ("bfloat16", 37), ("int8", 7)])
@pytest.mark.parametrize("target", TARGETS)
def test_conditions_on_scalars(target, dt, n):
    x = _with_nan(_values(dt, (n,), 40 + n))
    f = x.astype(np.float64)
    k = tw.compile(_scalars(dt, n), target=target, out_idx=[-4, -3])
    for s, m in [(1.5, 3), (-1.0, n - 1), (float("nan"), n + 5), (0.0, -7), (-2.0, 2 ** 31 - 1)]:
        y, z = k(x, s, m) if target == "cpu" else run_checked(k, x, s, m)
        other = f[m] if 0 <= m < n else -1
        _same(y, np.where((f > 0) & (m > 2), 0, f + 1).astype(x.dtype))
        _same(z, np.where(s > 0, 2 * (f + 1), np.full(n, other)).astype(x.dtype))


# --------------------------------------------------------------------------- an if on the row around inner maps
R2, C2 = 6, 37


def _rows(dt):
    @T.prim_func
    def k(X: T.Tensor((R2, C2), dt), V: T.Tensor((R2,), dt), Y: T.Tensor((R2, C2), dt), m: T.int32):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R2, C2), dt)
            v = T.alloc_fragment((R2,), dt)
            y = T.alloc_fragment((R2, C2), dt)
            T.copy(X, x)
            T.copy(V, v)
            T.copy(X, y)
            for i in T.Parallel(R2):
                if i < m:  # a row bound from a scalar
                    for j in T.Parallel(C2):
                        y[i, j] = x[i, j] * 2
                elif v[i] > 0:  # a row condition on tile data
                    for j in T.Parallel(C2):
                        y[i, j] = x[i, j] + v[i]
                else:
                    for jj in T.Parallel(C2):
                        y[i, jj] = 0
            T.copy(y, Y)
    return k


@pytest.mark.parametrize("dt", ["float16", "int32"])
@pytest.mark.parametrize("target", TARGETS)
def test_row_if_around_inner_maps(target, dt):
    x = _with_nan(_values(dt, (R2, C2), 50))
    v = _with_nan(_values(dt, (R2,), 51))
    f, g = x.astype(np.float64), v.astype(np.float64)[:, None]
    k = tw.compile(_rows(dt), target=target, out_idx=[-2])
    for m in (2, 0):
        y = k(x, v, m) if target == "cpu" else run_checked(k, x, v, m)
        i = np.arange(R2)[:, None]
        _same(y, np.where(i < m, 2 * f, np.where(g > 0, f + g, 0)).astype(x.dtype))


# --------------------------------------------------------------------------- an arm's let used after its arm's store
def _arm_let_2d(dt):
    """hunt33 F12's form (an index condition, 3 x 37) with an elif arm binding a let too (the let before the if:
    test_elif32_s32's test_let_on_a_tile_stored_before_the_last_store)."""
    @T.prim_func
    def k(X: T.Tensor((3, 37), dt), Y: T.Tensor((3, 37), dt), Z: T.Tensor((3, 37), dt)):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((3, 37), dt)
            z = T.alloc_fragment((3, 37), dt)
            T.copy(X, y)
            T.copy(X, z)
            for i, j in T.Parallel(3, 37):
                if j < 7:
                    t = y[i, j] * 2  # y's value before the arm's store
                    y[i, j] = 1
                    z[i, j] = t
                elif y[i, j] > 0:
                    u = y[i, j] + 1
                    y[i, j] = 0
                    z[i, j] = u - y[i, j]
            T.copy(y, Y)
            T.copy(z, Z)
    return k


@pytest.mark.parametrize("dt", ["bfloat16", "int8"])
@pytest.mark.parametrize("target", TARGETS)
def test_arm_lets_under_an_index_condition_and_an_elif(target, dt):
    x = _with_nan(_values(dt, (3, 37), 70))
    y, z = _run(_arm_let_2d(dt), target, [1, 2], x)
    f, j = x.astype(np.float64), np.arange(37)[None, :]
    _same(y, np.where(j < 7, 1, np.where(f > 0, 0, f)).astype(x.dtype))
    _same(z, np.where(j < 7, 2 * f, np.where(f > 0, f + 1, f)).astype(x.dtype))


# --------------------------------------------------------------------------- what stays an error, and its rewrite
def _ragged_rows(form):
    @T.prim_func
    def k(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 8), "float32")
            y = T.alloc_fragment((4, 8), "float32")
            T.copy(X, x)
            T.fill(y, 0.0)
            if form == "rows":
                for i in T.Parallel(4):
                    if i < 2:
                        for j in T.Parallel(8):
                            y[i, j] = x[i, j]
                    else:
                        for j in T.Parallel(4):  # another extent: no one inner map holds both arms
                            y[i, j] = -x[i, j]
            else:
                for i, j in T.Parallel(4, 8):  # the hint's rewrite: the if inside the inner map
                    if i < 2:
                        y[i, j] = x[i, j]
                    elif j < 4:
                        y[i, j] = -x[i, j]
            T.copy(y, Y)
    return k


def test_row_if_around_inner_maps_of_two_extents_names_the_rewrite():
    x = _values("float32", (4, 8), 60)
    i, j = np.arange(4)[:, None], np.arange(8)[None, :]
    want = np.where(i < 2, x, np.where(j < 4, -x, 0)).astype(np.float32)
    _same(_run(_ragged_rows("rows"), "cpu", [-1], x), want)
    with pytest.raises(tw.TilewrightError) as e:
        tw.compile(_ragged_rows("rows"), target=TARGET, out_idx=[-1])
    assert "an if inside a map" in e.value.message and "inside the inner T.Parallel loop" in e.value.hint
    assert "if i < 2:" in e.value.source_line
    for t in TARGETS:
        _same(_run(_ragged_rows("inner"), t, [-1], x), want)


# --------------------------------------------------------------------------- random if-trees, cpu against ascend910b
RT_R, RT_C = 3, 13


def random_tree(seed, dt):
    """The source of a random kernel: a 3 x 13 map over tiles y, z, w (from Y0, Z0, W0) and x (read only), a
    body of stores, lets and if / elif / else trees up to three deep, then a store; conditions on indices, on
    tile data (NaN in float inputs), on the scalars s (float32) and m (int32), joined with and / or / not;
    values +, -, * 2 of tile reads (x reversed along the row too), lets and small constants."""
    rng = random.Random(seed)
    names = iter(f"t{k}" for k in range(1000))
    tiles = ["y", "z", "w"]

    def leaf(lets):
        r = rng.random()
        if r < 0.5:
            return f"{rng.choice(tiles + ['x'])}[i, j]"
        if r < 0.6:
            return f"x[i, {RT_C - 1} - j]"
        if r < 0.75 and lets:
            return rng.choice(lets)
        return str(rng.choice([-2, -1, 0, 1, 2, 3]))

    def value(lets, depth=0):
        if depth >= 2 or rng.random() < 0.4:
            return leaf(lets)
        op = rng.choice(["+", "-", "*"])
        if op == "*":
            return f"({value(lets, depth + 1)}) * 2"
        return f"{value(lets, depth + 1)} {op} {value(lets, depth + 1)}"

    def cond(lets, depth=0):
        r = rng.random()
        if depth == 0 and r < 0.2:
            return f"{cond(lets, 1)} {rng.choice(['and', 'or'])} {cond(lets, 1)}"
        if depth == 0 and r < 0.25:
            return f"not ({cond(lets, 1)})"
        r = rng.random()
        if r < 0.3:
            return rng.choice([f"j < {rng.randrange(RT_C)}", f"j >= {rng.randrange(RT_C)}", "i == 1",
                               f"(i + j) % 3 == {rng.randrange(3)}", "i * 4 > j"])
        if r < 0.45:
            return rng.choice(["s > 0.0", "s <= 1.0", "m < 2", "m == 3"])
        return f"{value(lets, 1)} {rng.choice(['>', '<', '<=', '>=', '==', '!='])} {value(lets, 1)}"

    def block(ind, depth, lets, count):
        lines = []
        lets = list(lets)
        for _ in range(count):
            r = rng.random()
            if r < 0.15:
                name = next(names)
                lines.append(f"{ind}{name} = {value(lets)}")
                lets.append(name)
            elif r < 0.55 + 0.15 * depth or depth >= 3:
                lines.append(f"{ind}{rng.choice(tiles)}[i, j] = {value(lets)}")
            else:
                lines.append(f"{ind}if {cond(lets)}:")
                lines += block(ind + "    ", depth + 1, lets, rng.randint(1, 2))
                while rng.random() < 0.3:
                    lines.append(f"{ind}elif {cond(lets)}:")
                    lines += block(ind + "    ", depth + 1, lets, rng.randint(1, 2))
                if rng.random() < 0.6:
                    lines.append(f"{ind}else:")
                    lines += block(ind + "    ", depth + 1, lets, rng.randint(1, 2))
        return lines

    body = block(" " * 16, 0, [], rng.randint(2, 3)) + [f"{' ' * 16}{rng.choice(tiles)}[i, j] = {value([])}"]
    shape = f"({RT_R}, {RT_C})"
    params = ", ".join(f"{p}: T.Tensor({shape}, \"{dt}\")" for p in ["X", "Y0", "Z0", "W0", "Y", "Z", "W"])
    allocs = "\n".join(f"        {t} = T.alloc_fragment({shape}, \"{dt}\")\n        T.copy({t.upper()}0, {t})"
                       for t in tiles)
    outs = "\n".join(f"        T.copy({t}, {t.upper()})" for t in tiles)
    return f"""import tilewright.language as T


@T.prim_func
def kernel({params}, s: T.float32, m: T.int32):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment({shape}, "{dt}")
        T.copy(X, x)
{allocs}
        for i, j in T.Parallel({RT_R}, {RT_C}):
""" + "\n".join(body) + f"\n{outs}\n"


def load_kernel(text, folder):
    """The @T.prim_func of `text` from a file (the front end reads real source)."""
    path = pathlib.Path(folder) / f"tree_{abs(hash(text)):x}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


def run_tree(seed, dt, folder):
    """("equal" | "error: <message>" | "differ", detail) for random_tree(seed, dt) on both targets."""
    prim = load_kernel(random_tree(seed, dt), folder)
    rng = np.random.default_rng(seed)
    args = [_with_nan(_values(dt, (RT_R, RT_C), seed * 4 + k)) for k in range(4)]
    s, m = float(rng.choice([1.5, -0.5, np.nan])), int(rng.integers(0, 5))
    got = {}
    for target in TARGETS:
        try:
            k = tw.compile(prim, target=target, out_idx=[-5, -4, -3])
        except tw.TilewrightError as e:
            if target == "cpu":
                raise
            return "error: " + e.message, e
        a = [x.copy() for x in args]
        got[target] = k(*a, s, m) if target == "cpu" else run_checked(k, *a, s, m)
    for g, w in zip(got[TARGET], got["cpu"]):
        if not np.array_equal(g.astype(np.float64), w.astype(np.float64), equal_nan=True):
            return "differ", (g, w)
    return "equal", None


@pytest.mark.parametrize("dt,seeds", [("float32", [3309, 3324]), ("bfloat16", [3427]), ("int32", [3453])])
def test_random_if_trees_agree(dt, seeds, tmp_path):
    """Four small ones of the random programs run offline (docs/ascend.md: no disagreement), equal on both
    targets."""
    for seed in seeds:
        outcome, detail = run_tree(seed, dt, tmp_path)
        assert outcome == "equal", (seed, random_tree(seed, dt), detail)
