"""CFS burst as the node agent reads it, on this machine's kernel: a real cgroup v1 `cpu` group with a 20 ms / 100 ms
quota and a 20 ms burst, a process that sleeps (leaving quota unused, which the burst banks) and then spins. The
agent's burst setting and counters must be the kernel's own cpu.stat figures; without a burst the counters stay 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent import cputune_agent as agent

CPU_MOUNT = Path("/sys/fs/cgroup/cpu")
BURSTY = "import time\ntime.sleep(0.5)\nt = time.monotonic()\nwhile time.monotonic() - t < 1.0: pass"


def why_not_runnable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create cgroups (run as root, as CI does)"
    if not (CPU_MOUNT / "cpu.cfs_burst_us").exists() or not os.access(CPU_MOUNT, os.W_OK):
        return f"{CPU_MOUNT} is not a writable cgroup v1 cpu hierarchy with CFS burst (Linux 5.14 or later)"
    return None


SKIP_REASON = why_not_runnable()
pytestmark = [pytest.mark.root, pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")]


@contextmanager
def group(burst_us: int) -> Iterator[Path]:
    path = CPU_MOUNT / f"cputune-burst-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        (path / "cpu.cfs_period_us").write_text("100000")
        (path / "cpu.cfs_quota_us").write_text("20000")
        (path / "cpu.cfs_burst_us").write_text(str(burst_us))
        yield path
    finally:
        for pid in (path / "cgroup.procs").read_text().split():
            os.kill(int(pid), 9)
        path.rmdir()


def run_bursty(path: Path) -> tuple[agent.ContainerSample, dict[str, int]]:
    process = subprocess.Popen([sys.executable, "-c", BURSTY])
    (path / "cgroup.procs").write_text(str(process.pid))
    process.wait(timeout=30)
    sample = agent._empty_sample("pod", "container", "Burstable")
    agent._read_v1_cgroup(sample, str(path), None)
    return sample, agent.parse_cpu_stat((path / "cpu.stat").read_text())


def test_the_agent_reads_the_burst_setting_and_the_kernels_burst_counters():
    with group(20_000) as path:
        sample, stat = run_bursty(path)
    print(f"burst 20 ms: nr_bursts {stat['nr_bursts']}, burst_time {stat['burst_time'] / 1e6:.1f} ms")
    assert sample["burst_us"] == 20_000
    assert stat["nr_bursts"] >= 1, "the banked quota was never used: no burst happened"
    assert sample["bursts_total"] == stat["nr_bursts"]
    assert sample["burst_seconds_total"] == pytest.approx(stat["burst_time"] / 1e9)
    burst_seconds, bursts = sample["burst_seconds_total"], sample["bursts_total"]
    assert burst_seconds is not None and bursts is not None
    assert 0 < burst_seconds <= 0.020 * bursts  # at most the burst size per period that used it


def test_without_a_burst_the_setting_reads_0_and_nothing_bursts():
    with group(0) as path:
        sample, _ = run_bursty(path)
    assert sample["burst_us"] == 0
    assert sample["bursts_total"] == 0 and sample["burst_seconds_total"] == 0
