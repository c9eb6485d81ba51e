"""Workloads: parameters, the work they do, and process trees that live in their cgroup and die with their leader."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.lab import cgroups, workloads
from apps.lab.cgroups import CpuController
from apps.lab.runtime import REPO_ROOT

from .helpers import children_of, wait_until_gone

# --- parameters and estimates (pure) ----------------------------------------------------------------------------


def test_parameters_left_out_take_their_defaults() -> None:
    assert workloads.normalize_params("bursty", {}) == {"processes": 2, "busy_s": 10.0, "idle_s": 50.0}


def test_whole_numbers_are_accepted_where_decimals_are_expected() -> None:
    assert workloads.normalize_params("workloop", {"work_ms": 5})["work_ms"] == 5.0


@pytest.mark.parametrize(
    ("kind", "params", "words"),
    [
        ("burner", {"processes": 0}, ["'processes'", "minimum"]),
        ("burner", {"processes": 1.5}, ["'processes'", "whole number"]),
        ("burner", {"processes": True}, ["'processes'", "not a number"]),
        ("burner", {"processes": "2"}, ["'processes'", "not a number"]),
        ("lightweb", {"work_ms": float("inf")}, ["'work_ms'"]),
        ("idle", {"processes": 1}, ["'processes'", "allowed: none"]),
        ("workloop", {"report": 1}, ["'report'", "true or false"]),
        ("workloop", {"report": True}, ["iterations"]),
        ("spinner", {}, ["'spinner'", "burner"]),
    ],
)
def test_bad_parameters_are_refused_by_name(kind: str, params: dict[str, object], words: list[str]) -> None:
    with pytest.raises(workloads.WorkloadError) as caught:
        workloads.normalize_params(kind, params)
    assert all(word in str(caught.value) for word in words), str(caught.value)


def test_a_limit_caps_a_bursts_rate_before_the_duty_cycle_averages_it() -> None:
    params = workloads.normalize_params("bursty", {"processes": 2, "busy_s": 10, "idle_s": 50})
    assert workloads.estimated_demand("bursty", params) == workloads.Demand(2 * 10 / 60, 2.0)
    capped = workloads.estimated_demand("bursty", params, limit_cores=0.2)
    assert capped.peak_cores == 0.2 and capped.average_cores == pytest.approx(0.2 * 10 / 60)


def test_task_counts_match_the_reproducers_shapes() -> None:
    assert workloads.task_count("single", workloads.normalize_params("single", {})) == 1  # too few threads: one
    assert workloads.task_count("burner", workloads.normalize_params("burner", {"processes": 8})) == 9
    assert workloads.task_count("fibtest", workloads.normalize_params("fibtest", {"slow": 3})) == 5  # leader+fast+3


def test_calibrated_work_takes_about_the_cpu_time_asked_for() -> None:
    units = workloads.calibrate_work_units(5.0)
    spent_ms = []
    for _ in range(5):
        started = time.thread_time_ns()
        workloads.fib_steps(units)
        spent_ms.append((time.thread_time_ns() - started) / 1e6)
    # CPU time, not wall time, so other load does not inflate it; caches and frequency still move it a little.
    assert 3.0 <= sorted(spent_ms)[2] <= 8.0, spent_ms


def test_burning_cpu_time_counts_cpu_not_wall_time() -> None:
    started = time.thread_time_ns()
    workloads.burn_cpu_ms(20)
    assert 20 <= (time.thread_time_ns() - started) / 1e6 < 40


# --- the entry point (no cgroup needed) --------------------------------------------------------------------------


def _run_cli(*args: str, stdin: str = "", timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "apps.lab.workloads", *args],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_the_work_loop_reports_each_iteration_after_the_go_ahead() -> None:
    done = _run_cli("workloop", "--json", json.dumps({"iterations": 4, "sleep_ms": 10, "report": True}), stdin="go\n")
    assert done.returncode == 0, done.stderr
    ready, report = done.stdout.strip().splitlines()
    figures = json.loads(report)
    assert ready == "ready"
    assert len(figures["wall_ms"]) == len(figures["cpu_ms"]) == 4
    assert all(cpu >= 4.5 for cpu in figures["cpu_ms"])  # 5 ms of CPU each (work_units 0 burns by CPU time)
    # Wall time covers the CPU time spent, up to the two clocks' own skew: the thread's CPU clock is kept by the
    # scheduler and read a moment after the wall clock (half a millisecond covers it; seen once in CI).
    pairs = list(zip(figures["wall_ms"], figures["cpu_ms"], strict=True))
    assert all(wall >= cpu * 0.99 - 0.5 for wall, cpu in pairs), pairs


def test_the_entry_point_refuses_bad_parameters_before_running() -> None:
    done = _run_cli("burner", "--json", '{"processes": 0}')
    assert done.returncode == 2 and "'processes'" in done.stderr


def test_the_entry_point_refuses_json_that_is_not_an_object() -> None:
    done = _run_cli("burner", "--json", "[1]")
    assert done.returncode == 2 and "JSON object" in done.stderr


def test_the_entry_point_stops_when_it_cannot_join_its_cgroup(tmp_path: Path) -> None:
    done = _run_cli("burner", "--cgroup-procs", str(tmp_path / "missing" / "cgroup.procs"), timeout_s=10)
    assert done.returncode == 3 and "cannot join cgroup" in done.stderr


# --- process trees in real cgroups (root) -------------------------------------------------------------------------


@pytest.fixture
def box(controller: CpuController, lab_root: str) -> Iterator[str]:
    """An unlimited cgroup for one workload; yields its cpu directory and removes it afterwards."""
    cgroups.ensure_root(controller, lab_root)
    cgroups.set_root_shares(controller, lab_root, 10_240)  # as the lab does: other load must not starve it
    with cgroups.temporary_cgroup(controller, lab_root, "box", None, 100_000) as cpu_dir:
        yield cpu_dir


def _start(controller: CpuController, lab_root: str, kind: str, params: dict[str, object]) -> subprocess.Popen[bytes]:
    argv = workloads.command_line(
        kind, workloads.normalize_params(kind, params), cgroups.procs_files(controller, lab_root, "box")
    )
    return subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)


def _wait_for_tasks(cpu_dir: str, count: int, timeout_s: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout_s
    pids = cgroups.read_pids(cpu_dir)
    while len(pids) < count and time.monotonic() < deadline:
        time.sleep(0.02)
        pids = cgroups.read_pids(cpu_dir)
    return pids


@pytest.mark.root
def test_a_burner_and_all_its_workers_run_inside_the_cgroup(controller: CpuController, lab_root: str, box: str) -> None:
    leader = _start(controller, lab_root, "burner", {"processes": 3})
    try:
        pids = _wait_for_tasks(box, 4)
        assert sorted(pids) == sorted([leader.pid, *children_of(leader.pid)])
        assert len(pids) == 4
        for mount in controller.hierarchies:  # the usage hierarchy too, or cpuacct.usage would miss them
            assert sorted(cgroups.read_pids(os.path.join(mount, lab_root, "box"))) == sorted(pids)
    finally:
        leader.kill()
        leader.wait(timeout=5)


@pytest.mark.root
def test_killing_the_leader_outright_takes_its_workers_with_it(
    controller: CpuController, lab_root: str, box: str
) -> None:
    leader = _start(controller, lab_root, "fibtest", {"slow": 2})
    workers = [pid for pid in _wait_for_tasks(box, 4) if pid != leader.pid]
    assert len(workers) == 3
    leader.send_signal(signal.SIGKILL)  # no handler runs: only the kernel's parent-death signal can stop them
    leader.wait(timeout=5)
    assert not wait_until_gone(workers)
    assert cgroups.read_pids(box) == []


@pytest.mark.root
def test_sigterm_stops_the_workers_and_the_leader_exits_cleanly(
    controller: CpuController, lab_root: str, box: str
) -> None:
    leader = _start(controller, lab_root, "lightweb", {"processes": 2})
    workers = [pid for pid in _wait_for_tasks(box, 3) if pid != leader.pid]
    leader.send_signal(signal.SIGTERM)
    assert leader.wait(timeout=5) == 0
    assert not wait_until_gone(workers, timeout_s=1)  # the leader reaped them itself
    assert cgroups.read_pids(box) == []


@pytest.mark.root
def test_a_single_workload_is_one_task(controller: CpuController, lab_root: str, box: str) -> None:
    leader = _start(controller, lab_root, "single", {"work_ms": 5, "sleep_ms": 50})
    try:
        assert _wait_for_tasks(box, 1) == [leader.pid]
        time.sleep(0.3)
        assert cgroups.read_pids(box) == [leader.pid] and children_of(leader.pid) == []
    finally:
        leader.kill()
        leader.wait(timeout=5)


@pytest.mark.root
def test_a_bursty_workload_is_busy_then_idle(controller: CpuController, lab_root: str, box: str) -> None:
    usage_rel = os.path.join(lab_root, "box")
    leader = _start(controller, lab_root, "bursty", {"processes": 2, "busy_s": 1.0, "idle_s": 2.0})
    try:
        _wait_for_tasks(box, 3)
        started = time.monotonic()
        busy_from = cgroups.read_usage_ns(controller, usage_rel)
        time.sleep(0.6)
        busy_cores = (cgroups.read_usage_ns(controller, usage_rel) - busy_from) / 1e9 / 0.6
        time.sleep(max(0.0, 1.3 - (time.monotonic() - started)))  # past the 1 s burst (plus start-up slack)
        idle_from = cgroups.read_usage_ns(controller, usage_rel)
        time.sleep(1.0)
        idle_cores = (cgroups.read_usage_ns(controller, usage_rel) - idle_from) / 1e9
    finally:
        leader.kill()
        leader.wait(timeout=5)
    # Two spinning processes on two CPUs: well over one core when the machine is quiet, over half a core even
    # when other work shares it; idle means next to nothing (only the sleeping leader and workers).
    assert busy_cores > 0.5, busy_cores
    assert idle_cores < 0.05, idle_cores
