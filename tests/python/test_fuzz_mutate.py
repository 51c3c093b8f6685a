"""A fixed-seed corpus of the mutation fuzzer (tests/fuzz/fuzz_mutate.py): mutants of the example
kernels, compiled and run for cpu and ascend910b in child processes, give no signal, no hang, no
non-Tilewright exception from inside tilewright and no error without a source line. `make
fuzz-mutate` runs 10,000; this corpus keeps `make test` short (about a minute on 2 cores; the
compiled mutants are cached in build/fuzz-cache between runs)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))

import fuzz_mutate  # noqa: E402


def test_fixed_seed_corpus(tmp_path):
    counts, failures = fuzz_mutate.fuzz(seed=20261201, count=24, jobs=2, timeout=180.0, keep=str(tmp_path),
                                        cache_dir=os.path.join(ROOT, "build", "fuzz-cache"), log=lambda s: None)
    assert sum(counts.values()) == 24
    assert not failures, "\n".join(f"{f['kind']}: {f['example']} {f['target']} seed={f['seed']}: "
                                   f"{f.get('msg', f.get('signal', ''))}\n{f.get('tb', f.get('stderr', ''))}"
                                   for f in failures)
