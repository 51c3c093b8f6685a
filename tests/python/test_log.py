"""Logging (the runtime's messages on the "tilewright" logger) and progress lines."""
import io
import logging
import time

import tilewright as tw
from tilewright.log import progress
from tw_test_util import load_example

seed_matmul = load_example("seed_matmul")


def test_runtime_messages_reach_the_python_logger(caplog, tmp_path, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="tilewright")
    k = seed_matmul.build(96, 80, 72, 32, 32, 32)  # a size no other test compiles
    a, b = k.example_inputs()
    sim = seed_matmul.build(64, 64, 64, dtype="float16", target="ascend910b")
    sim(*sim.example_inputs())
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "tilewright")
    assert "disk cache" in text or "cache disabled" in text
    assert "simulated kernel 'matmul_kernel' on ascend910b2" in text
    assert any(r.levelno == logging.INFO and "simulated kernel" in r.getMessage() for r in caplog.records)


def test_progress_is_silent_for_short_steps_and_reports_long_ones(monkeypatch):
    monkeypatch.setattr("tilewright.log.SLOW_SECONDS", 0.05)
    quiet = io.StringIO()
    with progress("quick", stream=quiet, enabled=True):
        pass
    assert quiet.getvalue() == ""
    out = io.StringIO()
    with progress("compiling kernel 'x' for cpu", stream=out, enabled=True):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "tilewright: compiling kernel 'x' for cpu ..."
    assert lines[1].startswith("tilewright: compiling kernel 'x' for cpu ... done in ")
