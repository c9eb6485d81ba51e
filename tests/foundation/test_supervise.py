"""cputune.supervise starts its command again when it exits, and stops for good (with it) on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_command_that_exits_is_started_again_until_sigterm(tmp_path):
    starts = tmp_path / "starts"
    script = f"echo started >> {starts}; sleep 0.2; exit 3"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cputune.supervise", "sh", "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not starts.exists() or len(starts.read_text().split()) < 2):
            time.sleep(0.1)
        assert starts.exists() and len(starts.read_text().split()) >= 2, "the exited command was not started again"
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.stderr is not None
    assert "sh exited with status 3; starting it again in 1 s" in proc.stderr.read()
    count = len(starts.read_text().split())
    time.sleep(2.5)
    assert len(starts.read_text().split()) == count, "started again after SIGTERM"
