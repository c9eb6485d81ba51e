"""The lab's runtime on real cgroups: up, status, inventory, down, and recovery after a crash."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from apps.lab import cgroups, runtime
from apps.lab.cgroups import CpuController
from apps.lab.runtime import LabError
from apps.lab.scenario import QOS_BEST_EFFORT, QOS_BURSTABLE, QOS_GUARANTEED, ScenarioError

from .helpers import is_running, wait_until_gone, write_scenario

SMALL = """
node: {name: lab-node, allocatable: "2"}
pods:
  - namespace: shop
    name: web-1
    workload_kind: Deployment
    workload_name: web
    containers:
      - {name: app, request: 250m, limit: 250m, workload: {kind: burner, params: {processes: 2}}}
      - {name: sidecar, request: 100m, limit: 100m, workload: idle}
  - namespace: shop
    name: api-1
    containers:
      - {name: api, request: 100m, limit: 300m, workload: {kind: lightweb, params: {processes: 1}}}
  - namespace: batch
    name: be-1
    workload_kind: DaemonSet
    workload_name: be
    containers:
      - {name: c, workload: idle}
"""

BURNER = """
pods:
  - namespace: shop
    name: burner-1
    containers:
      - {name: app, request: 200m, limit: 200m, workload: {kind: burner, params: {processes: 1}}}
"""


def _tree_on_disk(controller: CpuController, root: str) -> list[str]:
    found = []
    for mount in controller.hierarchies:
        top = os.path.join(mount, root)
        found += [dirpath for dirpath, _, _ in os.walk(top)]
    return found


def _all_pids(controller: CpuController, root: str) -> list[int]:
    return cgroups.tree_pids(controller, root)


def _settled_pids(controller: CpuController, root: str, timeout_s: float = 5, quiet_s: float = 0.3) -> list[int]:
    """The root's pids once their number has held still for `quiet_s`: a workload that has just started may still
    be forking its processes into its cgroup (counted straight after lab_up, a run once saw 6 of 7)."""
    deadline = time.monotonic() + timeout_s
    pids = _all_pids(controller, root)
    still_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = _all_pids(controller, root)
        if len(now) != len(pids):
            pids, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            return now
    return pids


def _wait_for_tasks(cpu_dir: str, count: int, timeout_s: float = 10) -> int:
    deadline = time.monotonic() + timeout_s
    while len(cgroups.read_pids(cpu_dir)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(cgroups.read_pids(cpu_dir))


# --- without root -----------------------------------------------------------------------------------------------


def test_a_bad_scenario_is_refused_before_anything_is_touched(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, SMALL.replace("limit: 300m", "limit: lots"))
    state_dir = tmp_path / "state"
    with pytest.raises(ScenarioError) as caught:
        runtime.lab_up(scenario, root="cputune-labtest-never", state_dir=state_dir)
    assert caught.value.field == "pods[1].containers[0].limit"
    assert not state_dir.exists()


def test_status_of_a_lab_that_never_ran_says_it_is_down(tmp_path: Path) -> None:
    status = runtime.lab_status(tmp_path)
    assert not status.running and status.containers == ()


def test_a_damaged_state_file_is_reported_not_trusted(tmp_path: Path) -> None:
    (tmp_path / runtime.STATE_FILE).write_text("{not json")
    status = runtime.lab_status(tmp_path)
    assert not status.running and "unreadable state file" in status.problems[0]
    with pytest.raises(LabError, match="not up"):
        runtime.lab_inventory(tmp_path)


# --- real cgroups (root) ------------------------------------------------------------------------------------


@pytest.mark.root
def test_lab_up_lays_out_the_kubelet_cgroups_and_starts_every_workload_in_its_own(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    state = runtime.lab_up(write_scenario(tmp_path, SMALL), root=lab_root, state_dir=state_dir)

    containers = {(c.pod, c.container): c for c in state.inventory.containers}
    app, sidecar, api, best_effort = (
        containers[key] for key in [("web-1", "app"), ("web-1", "sidecar"), ("api-1", "api"), ("be-1", "c")]
    )
    assert app.cgroup_relpath == f"{lab_root}/kubepods/pod{app.pod_uid}/{app.container_id}"
    assert api.cgroup_relpath == f"{lab_root}/kubepods/burstable/pod{api.pod_uid}/{api.container_id}"
    assert best_effort.cgroup_relpath.startswith(f"{lab_root}/kubepods/besteffort/pod{best_effort.pod_uid}/")
    assert (app.qos_class, api.qos_class, best_effort.qos_class) == (QOS_GUARANTEED, QOS_BURSTABLE, QOS_BEST_EFFORT)

    def read(directory: str, name: str) -> int:
        return int(Path(directory, name).read_text())

    if controller.version == 1:
        # shares = mcpu × 1024 / 1000; quota = mcpu × 100 µs; the Guaranteed pod gets Σ limits = 350m.
        assert (read(app.cpu_dir, "cpu.shares"), read(app.cpu_dir, "cpu.cfs_quota_us")) == (256, 25_000)
        assert (read(sidecar.cpu_dir, "cpu.shares"), read(sidecar.cpu_dir, "cpu.cfs_quota_us")) == (102, 10_000)
        assert (read(app.pod_cpu_dir, "cpu.shares"), read(app.pod_cpu_dir, "cpu.cfs_quota_us")) == (358, 35_000)
        assert (read(api.pod_cpu_dir, "cpu.shares"), read(api.pod_cpu_dir, "cpu.cfs_quota_us")) == (102, 30_000)
        assert (read(best_effort.cpu_dir, "cpu.shares"), read(best_effort.cpu_dir, "cpu.cfs_quota_us")) == (2, -1)
        kubepods = controller.cpu_dir(f"{lab_root}/kubepods")
        assert read(kubepods, "cpu.shares") == 2048
        assert read(f"{kubepods}/burstable", "cpu.shares") == 102  # the only Burstable request: 100m
        assert read(f"{kubepods}/besteffort", "cpu.shares") == 2

    # Every workload is in its own container's cgroup, in every hierarchy; the burner with its 2 workers.
    for container in state.inventory.containers:
        for mount in controller.hierarchies:
            assert set(container.pids) <= set(cgroups.read_pids(os.path.join(mount, container.cgroup_relpath)))
    assert _wait_for_tasks(app.cpu_dir, 3) == 3
    assert len(cgroups.read_pids(sidecar.cpu_dir)) == 1


@pytest.mark.root
def test_the_inventory_gives_a_collector_identities_paths_and_node_facts(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    runtime.lab_up(write_scenario(tmp_path, SMALL), root=lab_root, state_dir=state_dir)
    inventory = runtime.lab_inventory(state_dir)

    assert inventory.node.name == "lab-node"
    assert inventory.node.capacity_mcpu == (os.cpu_count() or 0) * 1000
    assert inventory.node.allocatable_mcpu == 2000
    assert (
        inventory.node.kernel_version == subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    )
    assert inventory.cgroup_version == controller.version and inventory.period_us == 100_000
    for container in inventory.containers:
        assert Path(container.cpu_dir, "cpu.stat").exists()
        assert container.usage_dir is not None
        assert cgroups.read_usage_ns(controller, container.cgroup_relpath) >= 0
    pods = {p.name: p for p in inventory.pods()}
    assert set(pods) == {"web-1", "api-1", "be-1"}
    web = pods["web-1"]
    assert (web.workload_kind, web.workload_name, web.qos_class, web.node) == (
        "Deployment",
        "web",
        QOS_GUARANTEED,
        "lab-node",
    )
    assert [(c.name, c.request_mcpu, c.limit_mcpu) for c in web.containers] == [
        ("app", 250, 250),
        ("sidecar", 100, 100),
    ]
    assert all(len(c.container_id) == 64 for c in web.containers)


@pytest.mark.root
def test_lab_down_leaves_no_cgroup_and_no_process_behind(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    state = runtime.lab_up(write_scenario(tmp_path, SMALL), root=lab_root, state_dir=state_dir)
    app = next(c for c in state.inventory.containers if c.container == "app")
    _wait_for_tasks(app.cpu_dir, 3)
    pids = _all_pids(controller, lab_root)
    assert len(pids) == 3 + 1 + 2 + 1  # burner leader + 2, idle sidecar, lightweb leader + 1, idle

    report = runtime.lab_down(state_dir)

    assert report.was_running and not report.leftover
    assert not wait_until_gone(pids)
    assert _tree_on_disk(controller, lab_root) == []
    status = runtime.lab_status(state_dir)
    assert not status.running and status.boot == 1  # the boot counter survives, so the next start gets new ids
    again = runtime.lab_down(state_dir)
    assert not again.was_running and again.stopped_pids == () and again.removed_cgroups == ()


@pytest.mark.root
def test_lab_status_reports_each_container_and_notices_a_dead_workload(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    state = runtime.lab_up(write_scenario(tmp_path, SMALL), root=lab_root, state_dir=state_dir)
    time.sleep(0.5)
    status = runtime.lab_status(state_dir)
    assert status.running and status.problems == () and status.boot == state.boot
    by_name = {c.container: c for c in status.containers}
    assert by_name["app"].leader_alive and by_name["app"].tasks == 3
    assert by_name["app"].nr_periods is not None and by_name["app"].nr_periods > 0
    assert by_name["c"].nr_periods == 0  # an idle container never runs under a quota: no periods at all

    sidecar = next(c for c in state.inventory.containers if c.container == "sidecar")
    os.kill(sidecar.pids[0], 9)
    assert not wait_until_gone(list(sidecar.pids))  # dead (a zombie until lab_down reaps it)
    status = runtime.lab_status(state_dir)
    assert any("shop/web-1/sidecar" in problem and "not running" in problem for problem in status.problems)
    json.dumps(status.as_dict())


@pytest.mark.root
def test_lab_up_after_a_crash_with_its_state_stops_the_old_run_first(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    scenario = write_scenario(tmp_path, SMALL)
    first = runtime.lab_up(scenario, root=lab_root, state_dir=state_dir)
    old_pids = _all_pids(controller, lab_root)
    old_dirs = {c.cpu_dir for c in first.inventory.containers}

    second = runtime.lab_up(scenario, root=lab_root, state_dir=state_dir)  # no lab_down in between

    assert second.boot == first.boot + 1
    assert set(first.inventory.containers[0].pids) <= set(second.cleanup.stale_pids)
    assert not wait_until_gone(old_pids)
    assert not any(os.path.exists(d) for d in old_dirs)  # new boot, new container ids, old cgroups gone
    assert all(is_running(pid) for c in second.inventory.containers for pid in c.pids)


@pytest.mark.root
def test_lab_up_after_losing_its_state_cleans_the_root_it_finds(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    scenario = write_scenario(tmp_path, SMALL)
    runtime.lab_up(scenario, root=lab_root, state_dir=state_dir)
    # A stray process in a cgroup the lab never made, still inside the root: it must go too.
    cgroups.create_cgroup(controller, lab_root, cgroups.CgroupSettings("stray", 1024, None, 100_000))
    joins = "; ".join(f"echo $$ > {p}" for p in cgroups.procs_files(controller, lab_root, "stray"))
    stray = subprocess.Popen(["sh", "-c", f"{joins}; exec sleep 60"])
    _wait_for_tasks(controller.cpu_dir(f"{lab_root}/stray"), 1)
    old_pids = _settled_pids(controller, lab_root)
    (state_dir / runtime.STATE_FILE).unlink()  # the runtime's memory of the run is gone

    fresh = runtime.lab_up(scenario, root=lab_root, state_dir=state_dir)

    assert fresh.boot == 1
    assert set(old_pids) <= set(fresh.cleanup.stale_pids)
    assert not wait_until_gone(old_pids)
    assert not os.path.exists(controller.cpu_dir(f"{lab_root}/stray"))
    new_pids = _settled_pids(controller, lab_root)
    assert not set(new_pids) & set(old_pids)
    assert len(new_pids) == len(old_pids) - 1  # the same scenario again, minus the stray
    stray.poll()


@pytest.mark.root
def test_a_stale_pid_reused_by_another_process_is_left_alone(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    runtime.lab_up(write_scenario(tmp_path, SMALL), root=lab_root, state_dir=state_dir)
    bystander = subprocess.Popen(["sleep", "60"])  # not a workload, outside the root
    try:
        data = json.loads((state_dir / runtime.STATE_FILE).read_text())
        data["containers"][0]["processes"] = [{"pid": bystander.pid, "start_ticks": 1}]
        (state_dir / runtime.STATE_FILE).write_text(json.dumps(data))
        runtime.lab_down(state_dir)
        assert is_running(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait(timeout=5)


@pytest.mark.root
def test_a_burner_under_a_20_percent_quota_is_throttled_in_nearly_every_period(
    controller: CpuController, lab_root: str, state_dir: Path, tmp_path: Path
) -> None:
    state = runtime.lab_up(write_scenario(tmp_path, BURNER), root=lab_root, state_dir=state_dir)
    (burner,) = state.inventory.containers
    _wait_for_tasks(burner.cpu_dir, 2)
    time.sleep(0.3)
    before, usage_before, started = (
        cgroups.read_cpu_stat(burner.cpu_dir),
        cgroups.read_usage_ns(controller, burner.cgroup_relpath),
        time.monotonic(),
    )
    time.sleep(2.0)
    after, usage_after, ended = (
        cgroups.read_cpu_stat(burner.cpu_dir),
        cgroups.read_usage_ns(controller, burner.cgroup_relpath),
        time.monotonic(),
    )
    periods = after["nr_periods"] - before["nr_periods"]
    throttled = after["nr_throttled"] - before["nr_throttled"]
    cores = (usage_after - usage_before) / 1e9 / (ended - started)
    # One process that always wants a CPU under 20 ms per 100 ms runs out of quota in every period it runs.
    assert 18 <= periods <= 22
    assert throttled / periods >= 0.9, (throttled, periods)
    # And it gets what the quota allows: 0.2 CPU (a fixed kernel may overrun by ~1 ms per CPU per period).
    assert 0.17 <= cores <= 0.23, cores
    throttled_key = "throttled_time" if controller.version == 1 else "throttled_usec"
    assert after[throttled_key] > before[throttled_key]


@pytest.mark.root
def test_the_default_scenario_runs_every_workload_and_stays_light(
    controller: CpuController, lab_root: str, state_dir: Path
) -> None:
    state = runtime.lab_up(None, root=lab_root, state_dir=state_dir)
    assert len(state.inventory.containers) == 11
    kubepods = f"{lab_root}/kubepods"
    time.sleep(1.0)
    usage_before, started = cgroups.read_usage_ns(controller, kubepods), time.monotonic()
    time.sleep(3.0)
    cores = (cgroups.read_usage_ns(controller, kubepods) - usage_before) / 1e9 / (time.monotonic() - started)
    status = runtime.lab_status(state_dir)
    assert status.problems == ()
    assert all(c.leader_alive for c in status.containers)
    tasks = {c.container: c.tasks for c in status.containers}
    assert tasks["indexer"] == 9 and tasks["engine"] == 1 and tasks["fibtest"] == 5
    assert all(c.tasks == c.expected_tasks for c in status.containers)  # what `lab status` prints as "9 of 9 tasks"
    demand = state.inventory.demand()  # what `lab up` prints
    assert 1.0 <= demand.average_cores <= 1.3 and demand.peak_cores <= 1.5 and cores <= demand.peak_cores + 0.1
    # Designed peak (bursty is in its first burst now): 1.46 cores, each container capped by its quota.
    assert cores <= 1.55, cores
