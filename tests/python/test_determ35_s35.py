"""Session 35: the compiler's output does not depend on what the process compiled before (h-determ35; issue 13).

examples/moe.py's topk_gating compiled to two ascend910b Programs (21810 or 21951 simulated cycles) depending on the
heap: mark_nan_unobserved tried its candidate reductions in address order, and dropping one (the top-k rounds' max)
makes another (the softmax's row max) provable. Each child process below compiles a set of kernels (moe's four, topk_gating at two shapes,
a masked-attention block mask and causal prefill, paged decode, a seven-arm elif chain, a gemm) in its own order,
with another kernel compiled first, and with the heap shuffled between compiles (malloc / free of small blocks:
what compiling other kernels does to the addresses, made repeatable); the AscendC kernel, the printed Ascend
Program and the generated C++ must be byte-identical in every child and every round.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parent.parent / "examples"


# the kernels also compared on cpu (a C++ compile each: grouped_gemm's takes 18 s of CPU time, left out)
CPU = {"topk_gating", "combine", "block_mask", "elif_chain"}


def _kernels(folder):
    """name -> target -> compiled kernel (small shapes with tails: compile only)."""
    sys.path[:0] = [str(EXAMPLES), str(HERE)]
    import gemm
    import masked_attention
    import moe
    import paged_attention
    import tilewright as tw
    from test_elif34_s34 import _chain_source
    from test_elifcond33_s33 import load_kernel

    chain = load_kernel(_chain_source("float32", 7), folder)
    rows = moe.padded_rows(100, 8, 2, 32)
    return {
        "topk_gating": lambda t: moe.topk_gating(100, 8, 2, target=t),
        "topk_gating_k4": lambda t: moe.topk_gating(20, 4, 4, target=t),  # h-mul35's: 27789 or 28138 cycles
        "align_by_expert": lambda t: moe.align_by_expert(100, 8, 2, 32, target=t),
        "grouped_gemm": lambda t: moe.grouped_gemm(100, 96, 80, 8, 2, block_M=32, target=t),
        "combine": lambda t: moe.combine(100, 80, 2, rows, target=t),
        "block_mask": lambda t: masked_attention.block_mask_kernel(70, 90, 64, 64, target=t),
        "prefill_causal": lambda t: masked_attention.attention_prefill(1, 2, 1, 70, 90, 64, causal=True, target=t),
        "paged_decode": lambda t: paged_attention.paged_decode(3, 4, 2, 64, 16, 16, 4, target=t),
        "elif_chain": lambda t: tw.compile(chain, target=t, out_idx=[-2, -1]),
        "gemm": lambda t: gemm.matmul(70, 90, 130, target=t),
    }


def _child(spec):
    """Compiles spec["first"], then spec["order"] spec["rounds"] times for ascend910b with the heap shuffled by seed
    round + spec["seed"] (the first round also the CPU kernels for cpu); prints {"name target": [hash of the
    sources per round]} as JSON."""
    import ctypes
    import random
    import tempfile

    import tilewright as tw

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    kernels = _kernels(tempfile.mkdtemp())
    kernels[spec["first"]]("ascend910b")
    out = {}
    held = []
    for rnd in range(spec["rounds"]):
        rng = random.Random(spec["seed"] + rnd)
        ptrs = [libc.malloc(rng.choice([16, 32, 48, 64, 96, 128, 256])) for _ in range(rng.randint(500, 3000))]
        for p in rng.sample(ptrs, len(ptrs) // 2):
            libc.free(p)
        held.append(ptrs)  # the rest stay allocated: the next compile's blocks land in the holes
        tw.clear_cache(disk=True)  # compile again, not load the last round's result
        for name in spec["order"]:
            for t in ["ascend910b"] + (["cpu"] if rnd == 0 and name in CPU else []):
                k = kernels[name](t)
                langs = ["c++"] if t == "cpu" else ["ascendc", "ascend_program"]
                text = "\n".join(k.get_source(lang) for lang in langs)
                out.setdefault(f"{name} {t}", []).append(hashlib.sha256(text.encode()).hexdigest())
    print(json.dumps(out))


def _run(spec, cache):
    env = dict(os.environ, TW_CACHE_DIR=str(cache), TW_PROGRESS="0")
    r = subprocess.run([sys.executable, __file__, json.dumps(spec)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_sources_do_not_depend_on_what_was_compiled_before(tmp_path):
    names = ["topk_gating", "topk_gating_k4", "align_by_expert", "grouped_gemm", "combine", "block_mask", "prefill_causal",
             "paged_decode", "elif_chain", "gemm"]
    runs = [_run({"order": names, "first": "elif_chain", "rounds": 4, "seed": 0}, tmp_path / "a"),
            _run({"order": names[::-1], "first": "grouped_gemm", "rounds": 4, "seed": 4}, tmp_path / "b")]
    seen = {}
    for run in runs:
        for key, hashes in run.items():
            seen.setdefault(key, set()).update(hashes)
    assert set(seen) == {f"{n} ascend910b" for n in names} | {f"{n} cpu" for n in CPU}
    differ = sorted(key for key, hashes in seen.items() if len(hashes) > 1)
    assert not differ, f"sources that depend on the process's history: {differ}"


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
