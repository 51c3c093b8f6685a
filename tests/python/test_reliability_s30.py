"""Session 30 reliability hunt of deployment, the environment knobs and service use (h-rel30).
Findings F1.. of /work/rel30-findings.md (docs/testing.md "Session 30: reliability of deployment,
knobs and services (h-rel30)"). Attempts that could crash run in child processes, several per child."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = textwrap.dedent('''
    import numpy as np
    import tilewright as tw
    import tilewright.language as T
    M = T.symbolic("M")

    @tw.jit(out_idx=[-1])
    def axpb(a, b):
        @T.prim_func
        def axpb(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 16)) as bx:
                for i in T.Parallel(16):
                    if bx * 16 + i < M:
                        Y[bx * 16 + i] = X[bx * 16 + i] * a + b
        return axpb
''')


def _child(tmp_path, code, env, timeout=300):
    """Runs `code` (after KERNEL) in a child Python with the environment `env` (bytes allowed); an
    exception is printed as `EXC <type> <first line>`."""
    script = tmp_path / "child.py"  # a file: the front end reads the kernel's source
    body = textwrap.indent(KERNEL + textwrap.dedent(code), "    ")
    script.write_text(f"try:\n{body}\nexcept BaseException as e:\n"
                      "    print('EXC', type(e).__name__, str(e).splitlines()[0] if str(e) else '')\n")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=timeout)
    out, err = r.stdout.decode(errors="backslashreplace"), r.stderr.decode(errors="backslashreplace")
    assert r.returncode == 0, (r.returncode, out, err)  # a negative returncode is a signal
    return out, err


def test_f1_f8_knob_values_and_cache_paths_that_are_not_utf8_are_named_not_unicode_errors(tmp_path):
    probe = '''
        y = axpb(2.0, 1.0)(np.ones(3, np.float32))
        print("OK", y.tolist(), repr(tw.cache_info()["disk"]["dir"]))
    '''
    base = {k: v for k, v in os.environb.items() if not k.startswith(b"TW_")}
    base[b"TW_CACHE_DIR"] = os.fsencode(tmp_path / "cache")
    # every knob read through one helper (src/support/env.cpp): the ValueError naming it, the bytes as \xNN
    for var in (b"TW_NUM_THREADS", b"TW_CACHE_MAX_BYTES", b"TW_FROZEN", b"TW_CPU_ARCH"):
        out, _ = _child(tmp_path, probe, {**base, var: b"1\xff"})
        assert f"EXC ValueError environment variable {var.decode()}='1\\xff' is invalid: expected" in out, out
    out, _ = _child(tmp_path, probe, {**base, b"TW_CXX": b"/nonexistent/g++-\xff"})
    assert "EXC TilewrightError" in out and "C++ compiler '/nonexistent/g++-\\xff' was not found" in out, out
    # a cache directory whose name is not UTF-8 works; cache_info gives it as os.fsdecode does; the log lines are
    # text (a UnicodeDecodeError in the log sink was printed to stderr for each line)
    cache = os.fsencode(tmp_path) + b"/c-\xff"
    # F8: the autotuner's store and lock in it (`_C.cache_dir()`, `_C.key_lock`), and `tilewright cache`
    tuning = probe + '''
        from tilewright.autotune import _key_locked, tune_dir
        with _key_locked("key30", "test", print) as lock:
            print("LOCK", lock.lock.held, repr(str(tune_dir())))
        import subprocess, sys
        r = subprocess.run([sys.executable, "-m", "tilewright", "cache", "stats"], capture_output=True)
        print("CLI", r.returncode, b"Traceback" in r.stderr, b"c-\\xff" in r.stdout)
    '''
    out, err = _child(tmp_path, tuning, {**base, b"TW_CACHE_DIR": cache, b"TW_VERBOSE": b"1"})
    assert f"OK [3.0, 3.0, 3.0] {os.fsdecode(cache + b'/kernels')!r}" in out, (out, err)
    assert "UnicodeDecodeError" not in err and "c-\\xff" in err, err
    assert f"LOCK True {os.fsdecode(cache + b'/tune')!r}" in out and "CLI 0 False True" in out, (out, err)
    # an error naming that directory is the TilewrightError with its fix, not a UnicodeDecodeError
    os.chmod(cache, 0o777)
    out, _ = _child(tmp_path, probe, {**base, b"TW_CACHE_DIR": cache})
    assert "EXC TilewrightError" in out and "it is writable by other users" in out and "c-\\xff" in out, out


def test_f2_f3_f4_clear_cache_that_cannot_empty_the_disk_and_the_descriptor_limit_are_located_errors(tmp_path):
    # F3: each loaded library keeps the descriptor number it was loaded through as its name, so the
    # descriptor limit bounds the kernels loaded at once: the error said "no free descriptor ...:
    # Invalid argument" with 6 descriptors open; it now names the limit and the fixes.
    # F4: at the limit, the runtime headers' check could not open them and took them for changed: three
    # rewrites, then "keep failing verification (another process is changing them)".
    # F2: tw.clear_cache(disk=True) on a cache it cannot change (read-only file system; here its usage
    # index a directory) leaked RuntimeError.
    probe = '''
        import os, resource
        x = np.ones(3, np.float32)
        keep = [(axpb(0.0, 1.0), 1.0)]
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

        def limit(free_numbers):  # the limit that leaves this many free descriptor numbers below it
            taken = set(map(int, os.listdir("/proc/self/fd")))
            resource.setrlimit(resource.RLIMIT_NOFILE,
                               ([n for n in range(65536) if n not in taken][free_numbers - 1] + 1, hard))

        for free_numbers in (1, 3):
            limit(free_numbers)
            try:
                for i in range(1, 6):
                    a = float(i + free_numbers * 10)
                    keep.append((axpb(a, 1.0), a + 1.0))
                print("no limit reached")
            except tw.TilewrightError as e:
                print(f"F3 {free_numbers}", e.message.splitlines()[0], "|", e.hint)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert len(keep) > 1 and all(k(x)[0] == y for k, y in keep)  # the kernels loaded still run
        usage = os.path.join(tw.cache_info()["disk"]["dir"], ".usage")
        os.remove(usage)
        os.mkdir(usage)
        try:
            tw.clear_cache(disk=True)
        except tw.TilewrightError as e:
            print("F2", e.line, e.message, "|", e.hint)
    '''
    out, _ = _child(tmp_path, probe, {**os.environ, "TW_CACHE_DIR": str(tmp_path / "cache")})
    f4 = out[out.index("F3 1 "):out.index("F3 3 ")]
    assert "cannot verify the runtime headers: cannot open" in f4 and "RLIMIT_NOFILE" in f4, out
    f3 = out[out.index("F3 3 "):out.index("F2 ")]
    assert "cannot build kernel 'axpb'" in f3 and "no free descriptor number" in f3, out
    assert "the descriptor limit (RLIMIT_NOFILE) is" in f3 and "ulimit -n" in f3, out
    f2 = out[out.index("F2 "):]
    # the child's line: KERNEL's lines, then the probe's `tw.clear_cache` line, in the try: block
    line = (KERNEL + textwrap.dedent(probe)).splitlines().index("    tw.clear_cache(disk=True)") + 2
    assert f2.startswith(f"F2 {line} clear_cache(disk=True) could not empty the disk cache: ") and ".usage" in f2, out
    assert "TW_CACHE_DIR to a writable directory" in f2, out


def test_f5_plain_c_link_line_of_deploying_md_runs_from_any_directory(tmp_path):
    # docs/deploying.md said -Wl,-rpath,artifact: a run path relative to the working directory, so the
    # program started only from the directory holding artifact/ (exit 127 elsewhere)
    import re
    import shutil
    import tilewright as tw
    import tilewright.language as T
    doc = open(os.path.join(ROOT, "docs", "deploying.md")).read()
    flags = re.search(r"Link it with `(-Lartifact -lservice [^`]*)`", doc).group(1)
    M = T.symbolic("M")

    @tw.jit(out_idx=[-1])
    def twice_plus_one():
        @T.prim_func
        def axpb(X: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 16)) as bx:
                for i in T.Parallel(16):
                    if bx * 16 + i < M:
                        Y[bx * 16 + i] = X[bx * 16 + i] * 2.0 + 1.0
        return axpb

    app = tmp_path / "app"
    tw.export([twice_plus_one()], app / "artifact", name="service")
    (app / "main.c").write_text('#include <stdio.h>\n#include "service.h"\nint main(void) {\n'
                                '  float x[5] = {0, 1, 2, 3, 4}, y[5];\n  int rc = tw_axpb(x, y, 5, NULL, NULL);\n'
                                '  printf("%d %g\\n", rc, y[4]);\n  return rc;\n}\n')
    cc = shutil.which("gcc") or shutil.which("cc")
    subprocess.run(f"{cc} -std=c11 -o caller main.c -Iartifact {flags}", shell=True, cwd=app, check=True)
    r = subprocess.run([str(app / "caller")], cwd="/", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "0 9\n", (r.returncode, r.stdout, r.stderr)


def test_f6_f7_kernel_file_and_export_directory_whose_names_are_not_utf8(tmp_path):
    # F6: a kernel defined in a file whose path is not UTF-8 (a project under a Latin-1 directory name) was
    # refused with the bindings' TypeError "var(): incompatible function arguments"; F7: so was an export into
    # (or read_manifest of) such a directory
    import importlib.util
    import numpy as np
    import tilewright as tw
    d = os.fsencode(tmp_path) + b"/proj-\xff"
    os.mkdir(d)
    with open(d + b"/kern30.py", "w") as f:
        f.write(KERNEL)
    spec = importlib.util.spec_from_file_location("kern30", os.fsdecode(d + b"/kern30.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = mod.axpb(30.0, 1.0)  # not the IR of another test's kernel (an identical kernel shares its first definition)
    assert k(np.ones(3, np.float32)).tolist() == [31.0, 31.0, 31.0]
    with pytest.raises(tw.TilewrightError) as e:
        k(np.ones((3, 2), np.float32))  # located at this call, naming the definition's file with \xff
    assert "must have 1 dimension(s)" in e.value.message and "proj-\\xff/kern30.py:10)" in e.value.message, e.value
    for fn in (lambda: k.export(os.fsdecode(d + b"/out")), lambda: tw.deploy.read_manifest(os.fsdecode(d))):
        with pytest.raises(tw.TilewrightError, match=r"the directory path b'.*proj-\\xff.*' is not UTF-8"):
            fn()
