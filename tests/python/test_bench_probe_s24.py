"""bench/peaks.cpp's copy probe as session 24 (h-decode12) left it: passes split as the library's pool
splits a grid (each thread its share's 2 MiB chunks, then the others' remaining ones), the read-only
pass of paged decode's reference, and how bench/run.py names the read figure beside the copy goal."""
import ctypes
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bench_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import run
    finally:
        sys.path.pop(0)
    return run


def _arrays(lib, p):
    n = int(lib.tw_copy_probe_bytes(p) / 2 / 4)
    cp = ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p))  # CopyProbe {int; size_t; float*; float*; ...}
    src = np.ctypeslib.as_array(ctypes.cast(cp[2], ctypes.POINTER(ctypes.c_float)), (n,))
    dst = np.ctypeslib.as_array(ctypes.cast(cp[3], ctypes.POINTER(ctypes.c_float)), (n,))
    return n, src, dst


def test_copy_probe_chunks_cover_every_element():
    """Shares of several 2 MiB chunks with a partial last one (and the last share's tail), on 1, 2 and
    3 threads (more threads than this machine's cores): one pass copies every element exactly, with
    streaming and with regular stores, pass after pass (the team sleeps and wakes between them)."""
    run = _bench_module()
    lib = run.build_peaks()
    for threads in (1, 2, 3):
        nbytes = (5 << 20) + 3 * 64 * 4 * threads
        p = lib.tw_copy_probe_new(threads, nbytes)
        assert p
        try:
            n, src, dst = _arrays(lib, p)
            assert n == (nbytes // 4) // (64 * threads) * (64 * threads)
            assert np.array_equal(src, (np.arange(n) & 1023).astype(np.float32))
            for nt in (0, 1, 0, 1):
                dst[:] = -1
                assert lib.tw_copy_probe_run(p, nt) > 0
                assert np.array_equal(dst, src)
        finally:
            lib.tw_copy_probe_free(p)


def test_read_pass_reads_every_element_and_writes_none():
    """The read-only pass (paged decode's second reference) reads every element of both arrays once
    (its sum, kept by tw_copy_probe_read_sum, is exact for these values: shares of several chunks,
    a partial last chunk, a share that is not a multiple of 128 floats), writes nothing, and times a
    pass; its session figure (tw_peak_read_gbs) is positive; the copy's bytes are the read's."""
    run = _bench_module()
    lib = run.build_peaks()
    for threads in (1, 2, 3):
        p = lib.tw_copy_probe_new(threads, (5 << 20) + 64 * 4 * threads)
        assert p
        try:
            n, src, dst = _arrays(lib, p)
            assert (n // threads) % 128 == 64  # the read loop's 64-float tail
            src[:] = 1.0
            dst[:] = 2.0
            dst[-1] = 5.0  # the last element of the last share
            for _ in range(3):
                assert lib.tw_copy_probe_read(p) > 0
                assert lib.tw_copy_probe_read_sum(p) == 3.0 * n + 3.0
            assert np.all(src == 1.0) and np.all(dst[:-1] == 2.0) and dst[-1] == 5.0
            assert lib.tw_copy_probe_bytes(p) == 2 * n * 4
        finally:
            lib.tw_copy_probe_free(p)
        assert lib.tw_peak_read_gbs(threads, float(1 << 20), 2) > 0


def test_paged_goal_names_the_read_beside_the_copy():
    """The paged_bw goal stays "% of the interleaved copy"; the read-only pass is named after it and
    does not change the verdict; a case without a read pass (the row kernels) reads as before."""
    run = _bench_module()
    case = dict(group="paged", threads=2, check=dict(ok=True), tilewright=dict(rate=35.0),
                copy_interleaved=dict(rate=50.0, read=dict(rate=62.5)), pct_copy_interleaved=70.0,
                pct_read_interleaved=56.0)
    text, met = run.copy_goal(case, 56.0)
    assert met is True
    assert text == ("70% of the interleaved copy (35.0 of 50.0 GB/s; 62% of the session probe's 56.0); "
                    "56% of the interleaved read's 62.5 GB/s")
    assert run.copy_goal(dict(case, pct_copy_interleaved=69.9, pct_read_interleaved=99.0), 56.0)[1] is False
    rows = dict(case, group="rowwise", copy_interleaved=dict(rate=50.0))
    del rows["pct_read_interleaved"]
    assert run.copy_goal(rows, 56.0)[0] == "70% of the interleaved copy (35.0 of 50.0 GB/s; 62% of the session probe's 56.0)"
