"""Helpers for the lab's tests: reading /proc the way a user checking for leftovers would."""

from __future__ import annotations

import os
import time
from pathlib import Path


def write_scenario(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def is_running(pid: int) -> bool:
    """True while a process exists and is not a zombie (a zombie runs nothing and holds no cgroup)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def wait_until_gone(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    """The pids still running after ``timeout_s`` (orphaned workers are reaped by init, a moment later)."""
    deadline = time.monotonic() + timeout_s
    alive = [pid for pid in pids if is_running(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if is_running(pid)]
    return alive


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid``, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
            found.append(int(entry))
    return found
