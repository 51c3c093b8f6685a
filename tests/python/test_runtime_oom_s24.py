"""Out of memory inside a kernel (session 24, the lead's review of session 23).

The gemm runtime's packing buffers used to end the process with a trap (SIGILL) when they could
not be allocated, and a plain-C entry point let any C++ exception but the kernel's own checks
cross its C caller's frames (std::terminate). Now the allocation failure is a tw_cpu::AllocError:
the entry point returns 3 and tw_<kernel>_error() says how many bytes could not be allocated
(docs/deploying.md), and through Python / the C++ runtime it is a Tilewright error at the kernel
(runtime/cpu_launch.cpp). The runtime's unit test Gemm.ScratchOutOfMemoryThrows covers the
scratch itself on every instruction set. Here a C program exports-links a gemm kernel and calls it
under an address-space limit (`ulimit -v`) with nothing left for new mappings.
"""
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import gemm  # noqa: E402

C_CALLER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/resource.h>
#include "mm.h"

static float A[256 * 1024], B[1024 * 256], C[256 * 256];

static long vm_bytes(void) {
  long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld", &pages) != 1) return -1;
  fclose(f);
  return pages * sysconf(_SC_PAGESIZE);
}

/* The kernel's tiles live on this thread's stack: grow it before the limit. */
__attribute__((noinline)) static void grow_stack(void) {
  volatile char buf[6 << 20];
  for (size_t i = 0; i < sizeof buf; i += 4096) buf[i] = 0;
}

int main(int argc, char** argv) {
  for (int i = 0; i < 256 * 1024; ++i) {
    A[i] = (float)(i % 7) - 3.0f;
    B[i] = (float)(i % 5) - 2.0f;
  }
  grow_stack();
  struct rlimit r = {(rlim_t)(vm_bytes() + (atol(argv[1]) << 20)), RLIM_INFINITY};
  if (setrlimit(RLIMIT_AS, &r) != 0) return 9;
  int rc = tw_main(A, B, C, 0, 0);
  double sum = 0;
  for (int i = 0; i < 256 * 256; ++i) sum += C[i] * (double)(i % 3 + 1);
  printf("rc=%d sum=%.1f error=%s\n", rc, sum, rc ? tw_main_error() : "");
  return 0;
}
"""


def test_a_c_caller_out_of_memory_gets_code_3_not_a_signal(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    k = gemm.matmul(256, 256, 1024, block_M=256, block_N=256, block_K=1024, dtype="float32")
    k.export(tmp_path / "art", name="mm")
    (tmp_path / "c.c").write_text(C_CALLER)
    r = subprocess.run([cc, "-std=c99", "-O1", "-I", str(tmp_path / "art"), str(tmp_path / "c.c"),
                        "-L", str(tmp_path / "art"), "-lmm", "-Wl,-rpath," + str(tmp_path / "art"),
                        "-o", str(tmp_path / "c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    i = np.arange(256 * 1024)
    a = ((i % 7) - 3.0).reshape(256, 1024)
    b = ((i % 5) - 2.0).reshape(1024, 256)
    want = float(((a @ b).ravel() * (np.arange(256 * 256) % 3 + 1)).sum())

    roomy = subprocess.run([str(tmp_path / "c"), "4096"], capture_output=True, text=True, timeout=120)
    assert roomy.returncode == 0, (roomy.returncode, roomy.stdout, roomy.stderr)
    assert roomy.stdout.split()[:2] == ["rc=0", "sum=%.1f" % want], roomy.stdout

    tight = subprocess.run([str(tmp_path / "c"), "0"], capture_output=True, text=True, timeout=120)
    assert tight.returncode == 0, (tight.returncode, tight.stdout, tight.stderr)  # not SIGILL / SIGABRT
    assert tight.stdout.startswith("rc=3 "), tight.stdout
    assert "out of memory:" in tight.stdout and "bytes for the gemm's packed operands" in tight.stdout, tight.stdout


PY_CALLER = r"""
import resource, sys
import numpy as np
import tilewright as tw
sys.path.insert(0, sys.argv[1])
import gemm
small = gemm.matmul(64, 64, 64, block_M=64, block_N=64, block_K=64, dtype="float32")
big = gemm.matmul(256, 256, 1024, block_M=256, block_N=256, block_K=1024, dtype="float32")
small(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))  # the pool's threads start
A, B = np.ones((256, 1024), np.float32), np.ones((1024, 256), np.float32)
vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (vm + (8 << 20), resource.RLIM_INFINITY))
try:
    big(A, B)  # tiles past the caller's stack: the first launch starts a thread with a 64 MiB stack
    print("ran")
except tw.TilewrightError as e:
    print("TilewrightError", str(e).replace("\n", " "))
"""


def test_the_big_tile_thread_that_cannot_start_is_a_tilewright_error(tmp_path):
    """It was a RuntimeError ("cannot start a thread for kernel launches with big tiles")."""
    (tmp_path / "p.py").write_text(PY_CALLER)
    r = subprocess.run([sys.executable, str(tmp_path / "p.py"), str(pathlib.Path(gemm.__file__).parent)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith("TilewrightError") and "cannot start the thread that runs kernels with big tiles" in out, out
    assert "ulimit -v" in out and "big(A, B)" in out, out
