"""Running programs: in worker subprocesses, so that a crash (a signal) or a hang of one program
is recorded and does not stop the fuzzer.

Why workers rather than a subprocess per program: a fresh Python importing tilewright costs
about a second, more than compiling a small kernel; a long-lived worker also keeps its compiled
kernels, so programs that differ only in symbolic shapes compile once. A worker that dies is
restarted, and only the program it was running is lost (recorded as a crash).

Protocol: the parent writes one JSON request per line to the worker's stdin
(``{"id": n, "desc": {...}}``); the worker answers ``{"id": n, "phase": target}`` before running
each target and ``{"id": n, "result": {...}}`` at the end, on a private copy of its stdout (the
process's own stdout is redirected to its stderr so that nothing printed can break the protocol).

Result statuses: ``ok``; ``mismatch`` (a target disagrees with the reference); ``checker`` (the
simulator's checker reported something on a valid program); ``error`` (an exception on a valid
program); ``crash`` (the worker died, e.g. of a signal); ``hang`` (no answer within the timeout).
``known`` replaces a failure that matches an entry of known.KNOWN_BUGS.
"""
import hashlib
import importlib.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import OrderedDict

from . import grammar, known

TARGETS = ("cpu", "ascend910b")
FAILURES = ("mismatch", "checker", "error", "crash", "hang")
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/python


# ---------------------------------------------------------------------------------------------
# In the worker

class Compiled:
    """Kernels by (source text, target), the most recent 64 kept."""

    def __init__(self, capacity=64):
        self.capacity = capacity
        self.kernels = OrderedDict()
        self.dir = os.path.join(tempfile.gettempdir(), f"tilewright-fuzz-{os.getuid()}")
        os.makedirs(self.dir, exist_ok=True)

    def prim_func(self, text):
        """The @T.prim_func of `text`, loaded from a file so the front end sees real source."""
        digest = hashlib.sha1(text.encode()).hexdigest()[:16]
        path = os.path.join(self.dir, f"fuzz_{digest}.py")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(f"fuzz_{digest}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, grammar.KERNEL_NAME)

    def get(self, d, target):
        import tilewright as tw
        text = grammar.source(d)
        key = (text, target)
        if key in self.kernels:
            self.kernels.move_to_end(key)
            return self.kernels[key]
        kernel = tw.compile(self.prim_func(text), target=target, out_idx=grammar.out_index(d))
        self.kernels[key] = kernel
        if len(self.kernels) > self.capacity:
            self.kernels.popitem(last=False)
        return kernel


def run_target(d, target, compiled):
    """(status, detail) of one program on one target, in this process."""
    from tilewright import TilewrightError
    from .reference import compare, inputs
    reason = known.unsupported(d, target)
    try:
        kernel = compiled.get(d, target)
        args = inputs(d)
        if target.startswith("ascend"):
            prof = kernel.profile(*args)
            # an `unwritten output` (session 39): a program whose stores skip elements by a run-time bound
            # (idiom rt, the grammar's clipped stores) leaves them uninitialised; compare() then checks that
            # the reference observes none of them (an element it expects that nothing wrote is a mismatch)
            reports = [r for r in prof["reports"] if ": unwritten output: " not in r]
            if reports:
                if known.expected_report(d, target, reports):
                    return "ok", None
                return "checker", "\n".join(reports)
            outs = prof.outputs
        else:
            outs = kernel(*args)
    except TilewrightError as e:
        if reason:
            return "ok", None
        if "unwritten output: " in str(e):  # cpu under TW_BOUNDS_CHECK=1: as on ascend (above), no outputs to compare
            return "ok", None
        return "error", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - anything else is a bug of the compiler or runtime
        return "error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    if reason:
        return "error", f"expected a TilewrightError ({reason}), but the program ran"
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    if d.get("atomic"):   # T.atomic_add adds into B, the last input, in place
        outs = [args[-1]]
    problem = compare(d, outs)
    if problem:
        return "mismatch", problem
    expected = known.expected_report(d, target)
    if expected:
        return "error", f"expected the checker's report ({expected}), but the program ran clean"
    return "ok", None


def worker_main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    compiled = Compiled()

    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    for line in sys.stdin:
        req = json.loads(line)
        if req.get("crash"):   # fault injection for the fuzzer's own tests
            os.kill(os.getpid(), signal.SIGSEGV)
        if req.get("hang"):
            time.sleep(3600)
        d = req["desc"]
        result = {"status": "ok", "target": None, "detail": None}
        skip = known.skipped_targets(d)
        if skip:
            result["skipped"] = skip
        for target in TARGETS:
            if target in skip:
                continue
            send({"id": req["id"], "phase": target})
            status, detail = run_target(d, target, compiled)
            if status != "ok":
                result = {"status": status, "target": target, "detail": detail}
                break
        send({"id": req["id"], "result": result})


# ---------------------------------------------------------------------------------------------
# In the parent

def tree_cpu_seconds(pid):
    """(CPU seconds (user + system) used so far by process `pid` and its descendants, whether one
    of them is runnable (state R: running or waiting for a CPU)), from Linux /proc."""
    total, runnable, todo = 0.0, False, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            runnable |= fields[0] == "R"
            total += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total, runnable


class Worker:
    def __init__(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ)
        env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "fuzz.runner"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=HERE)
        self.buf = b""

    def _line(self, deadline):
        """The next line from the worker; "timeout" or "eof" (the worker closed its output)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return "timeout"
            chunk = os.read(fd, 65536)
            if not chunk:
                return "eof"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def log_tail(self, n=2000):
        self.log.seek(0)
        return self.log.read()[-n:]

    def run(self, ident, request, timeout):
        """The result dict of one request. A program is a hang when it has not answered after
        `timeout` seconds; on a loaded machine (the worker or its compiler is runnable but got less
        than half of the wall time) the deadline is extended, up to 5 x timeout."""
        self.proc.stdin.write((json.dumps(dict(request, id=ident)) + "\n").encode())
        self.proc.stdin.flush()
        start = time.monotonic()
        cpu0 = tree_cpu_seconds(self.proc.pid)[0]
        deadline = start + timeout
        phase = None
        while True:
            msg = self._line(deadline)
            if msg == "timeout":
                now = time.monotonic()
                cpu, runnable = tree_cpu_seconds(self.proc.pid)
                starved = runnable and cpu - cpu0 < 0.5 * (now - start)
                if starved and now < start + 5 * timeout:
                    deadline = min(now + timeout, start + 5 * timeout)
                    continue
            if isinstance(msg, str):
                break
            if "phase" in msg:
                phase = msg["phase"]
                continue
            return msg["result"]
        if msg == "eof":
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            return {"status": "hang", "target": phase, "detail": f"no answer within {timeout:.0f} s"}
        code, tail = self.proc.returncode, self.log_tail()
        what = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        # Under `make sanitize` AddressSanitizer handles the fatal signal and exits with status 1:
        # name the signal it reports ("AddressSanitizer: SEGV on unknown address ...").
        asan = re.search(r"AddressSanitizer: (SEGV|BUS|FPE|ILL|ABRT)\b", tail)
        if code > 0 and asan:
            what = f"signal SIG{asan.group(1)} reported by AddressSanitizer, exit status {code}"
        return {"status": "crash", "target": phase, "detail": f"worker died ({what}); stderr: {tail}"}

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def signature(result):
    """What distinguishes one failure from another: status, target and the first line of the
    message without file names and numbers."""
    first = (result["detail"] or "").strip().splitlines()[0] if result["detail"] else ""
    first = re.sub(r"\S+\.py:\d+:\d+: ", "", first)
    first = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", first)
    if result["status"] == "mismatch":   # the numbers are the message: only which output
        first = first.split(":")[0]
    return result["status"], result["target"], first[:160]


def classify(d, result):
    """Replaces a failure that matches a known bug by status "known" (the bug's name in "known")."""
    if result["status"] in FAILURES and result["target"]:
        name = known.known_bug(d, result["target"], result["status"], result["detail"])
        if name:
            return dict(result, status="known", known=name)
    return result


def run_requests(requests, jobs=2, timeout=120.0, on_result=None):
    """Runs [(key, request)] on `jobs` workers; returns {key: result}. Requests with the same
    "group" value run on the same worker, in order (they share compiled kernels)."""
    groups = OrderedDict()
    for key, req in requests:
        groups.setdefault(req.get("group", key), []).append((key, req))
    queue = list(groups.values())
    lock = threading.Lock()
    results = {}

    def loop():
        worker = None
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    group = queue.pop(0)
                for key, req in group:
                    if worker is None:
                        worker = Worker()
                    body = {k: v for k, v in req.items() if k != "group"}
                    res = worker.run(key if isinstance(key, int) else 0, body, timeout)
                    if res["status"] in ("crash", "hang"):
                        worker.close()
                        worker = None
                    if "desc" in req:
                        res = classify(req["desc"], res)
                    with lock:
                        results[key] = res
                        if on_result:
                            on_result(key, req, res)
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=loop) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


class Isolated:
    """Runs programs one at a time in a worker subprocess (restarted after a crash or hang);
    results classified against the known bugs. For the reducer and the tests."""

    def __init__(self, timeout=120.0):
        self.timeout = timeout
        self.worker = None
        self.count = 0

    def run(self, d):
        return classify(d, self.request({"desc": d}))

    def request(self, req):
        if self.worker is None:
            self.worker = Worker()
        self.count += 1
        res = self.worker.run(self.count, req, self.timeout)
        if res["status"] in ("crash", "hang"):
            self.worker.close()
            self.worker = None
        return res

    def close(self):
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_programs(descs, jobs=2, timeout=120.0, on_result=None):
    """{index: result} of the program descriptions, grouped by source text across workers."""
    requests = [(i, {"desc": d, "group": grammar.source(d)}) for i, d in enumerate(descs)]
    return run_requests(requests, jobs, timeout, on_result)


if __name__ == "__main__":
    worker_main()
