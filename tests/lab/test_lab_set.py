"""`lab set` on real cgroups: an in-place resize writes the kubelet's quota and shares to the container, its pod and
the Burstable QoS level with the same processes running; `--processes` restarts the container in a new cgroup with a
new id and one more restart; every refusal leaves the state file, the cgroups and the processes as they were."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.collector.sources.lab import client, convert
from apps.lab import cgroups, changes, runtime
from apps.lab.cgroups import CpuController
from apps.lab.reports import LabContainer, LabError
from apps.lab.workloads import task_count

from .helpers import is_running, wait_until_gone, write_scenario

# Two pods, about a quarter of a CPU in all: a Guaranteed pod (a burner at 200m beside an idle sidecar) and a
# Burstable one (a light server, 100m / 300m).
SMALL = """
node: {name: lab-node, allocatable: "2"}
pods:
  - namespace: shop
    name: web-1
    containers:
      - {name: app, request: 200m, limit: 200m, workload: {kind: burner, params: {processes: 1}}}
      - {name: side, request: 100m, limit: 100m, workload: idle}
  - namespace: shop
    name: api-1
    containers:
      - {name: api, request: 100m, limit: 300m, workload: {kind: lightweb, params: {processes: 1}}}
"""


@pytest.fixture
def lab(controller: CpuController, lab_root: str, settings, tmp_path: Path) -> Iterator[Path]:
    """SMALL running under its own root, its state where `manage.py lab` looks (DATA_DIR/lab); yields that dir."""
    if controller.version != 1:
        pytest.skip("these tests read the cgroup v1 files (cpu.cfs_quota_us, cpu.shares)")
    settings.DATA_DIR = tmp_path
    settings.CPUTUNE_LAB_ROOT = lab_root
    state_dir = tmp_path / "lab"
    state = runtime.lab_up(write_scenario(tmp_path, SMALL), root=lab_root, state_dir=state_dir)
    for c in state.inventory.containers:
        settled_pids(c.cpu_dir, task_count(c.workload, c.workload_params))
    yield state_dir
    runtime.lab_down(state_dir)


def container(state_dir: Path, name: str) -> LabContainer:
    return next(c for c in runtime.lab_inventory(state_dir).containers if c.container == name)


def read(directory: str, name: str) -> int:
    return int(Path(directory, name).read_text())


def quota_and_shares(directory: str) -> tuple[int, int]:
    return read(directory, "cpu.cfs_quota_us"), read(directory, "cpu.shares")


def settled_pids(cpu_dir: str, count: int, timeout_s: float = 10) -> list[int]:
    """The cgroup's pids once it holds `count` of them, for a moment (a leader forks its workers after joining)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = cgroups.read_pids(cpu_dir)
        if len(pids) == count:
            time.sleep(0.2)
            if sorted(cgroups.read_pids(cpu_dir)) == sorted(pids):
                return sorted(pids)
        time.sleep(0.02)
    return sorted(cgroups.read_pids(cpu_dir))


def tree_on_disk(controller: CpuController, root: str) -> list[str]:
    return [dirpath for mount in controller.hierarchies for dirpath, _, _ in os.walk(os.path.join(mount, root))]


def snapshot(
    controller: CpuController, root: str, state_dir: Path
) -> tuple[bytes, dict[str, tuple[int, int, int]], list[int]]:
    """The state file, every cgroup's shares, quota and period under the root, and every process in it."""
    settings = {
        directory: (
            read(directory, "cpu.shares"),
            read(directory, "cpu.cfs_quota_us"),
            read(directory, "cpu.cfs_period_us"),
        )
        for directory, _, _ in os.walk(controller.cpu_dir(root))
    }
    return (state_dir / runtime.STATE_FILE).read_bytes(), settings, cgroups.tree_pids(controller, root)


# --- resize in place ----------------------------------------------------------------------------------------------


@pytest.mark.root
@pytest.mark.slow
def test_a_growing_resize_writes_the_kubelets_quota_and_shares_and_keeps_the_processes(lab: Path) -> None:
    app = container(lab, "app")
    pids = settled_pids(app.cpu_dir, 2)

    change = changes.set_container("shop/web-1/app", limit="500m", request="0.5", state_dir=lab)

    # 500m: 500 × 1024 / 1000 shares, 500 × 100 µs of quota; the pod: Σ limits 600m, Σ requests 600m.
    assert quota_and_shares(app.cpu_dir) == (50_000, 512)
    assert quota_and_shares(app.pod_cpu_dir) == (60_000, 614)
    assert sorted(cgroups.read_pids(app.cpu_dir)) == pids and all(is_running(pid) for pid in pids)
    after = container(lab, "app")
    assert (after.request_mcpu, after.limit_mcpu, after.qos_class) == (500, 500, "Guaranteed")
    assert (after.container_id, after.cpu_dir, after.pids, after.restarts) == (
        app.container_id,
        app.cpu_dir,
        app.pids,
        0,
    )
    assert (change.resized, change.restarted, change.quota_us, change.pod_quota_us) == (True, False, 50_000, 60_000)
    status = next(c for c in runtime.lab_status(lab).containers if c.container == "app")
    assert (status.request_mcpu, status.limit_mcpu, status.leader_alive, status.tasks) == (500, 500, True, 2)


@pytest.mark.root
@pytest.mark.slow
def test_a_shrinking_resize_lowers_the_container_before_its_pod(lab: Path) -> None:
    # On cgroup v1 a child's quota may not exceed its parent's: writing the pod's 15 ms first, under the container's
    # 20 ms, is refused by the kernel.
    app = container(lab, "app")
    pids = settled_pids(app.cpu_dir, 2)

    changes.set_container("shop/web-1/app", limit="50m", request="50m", state_dir=lab)

    assert quota_and_shares(app.cpu_dir) == (5_000, 51)
    assert quota_and_shares(app.pod_cpu_dir) == (15_000, 153)  # 150m: 153.6 shares, rounded down
    assert sorted(cgroups.read_pids(app.cpu_dir)) == pids
    assert (container(lab, "app").request_mcpu, container(lab, "app").limit_mcpu) == (50, 50)


@pytest.mark.root
@pytest.mark.slow
def test_removing_a_burstable_limit_and_raising_its_request(
    controller: CpuController, lab_root: str, lab: Path
) -> None:
    api = container(lab, "api")
    pids = settled_pids(api.cpu_dir, 2)
    burstable = controller.cpu_dir(f"{lab_root}/kubepods/burstable")
    assert read(burstable, "cpu.shares") == 102

    changes.set_container("shop/api-1/api", limit="none", request="200m", state_dir=lab)

    assert quota_and_shares(api.cpu_dir) == (-1, 204)
    assert quota_and_shares(api.pod_cpu_dir) == (-1, 204)  # a container without a limit: no pod quota
    assert read(burstable, "cpu.shares") == 204  # the QoS level: Σ requests of the Burstable pods
    assert sorted(cgroups.read_pids(api.cpu_dir)) == pids
    after = container(lab, "api")
    assert (after.request_mcpu, after.limit_mcpu, after.qos_class) == (200, None, "Burstable")
    assert [c.limit_mcpu for p in runtime.lab_inventory(lab).pods() for c in p.containers if c.name == "api"] == [None]


# --- restart ------------------------------------------------------------------------------------------------------


@pytest.mark.root
@pytest.mark.slow
def test_processes_restart_the_container_in_a_new_cgroup_and_count_the_restart(
    controller: CpuController, lab_root: str, lab: Path
) -> None:
    old = container(lab, "api")
    old_pids = settled_pids(old.cpu_dir, 2)

    change = changes.set_container("shop/api-1/api", processes=3, state_dir=lab)

    assert not wait_until_gone(old_pids)
    new = container(lab, "api")
    assert new.container_id != old.container_id and new.container_id == change.container_id_after
    assert new.cgroup_relpath == f"{lab_root}/kubepods/burstable/pod{new.pod_uid}/{new.container_id}"
    assert not any(os.path.exists(os.path.join(mount, old.cgroup_relpath)) for mount in controller.hierarchies)
    expected = task_count(new.workload, new.workload_params)
    assert (expected, new.workload_params["processes"]) == (4, 3)  # the leader and its 3 workers
    new_pids = settled_pids(new.cpu_dir, expected)
    assert len(new_pids) == expected and not set(new_pids) & set(old_pids)
    for mount in controller.hierarchies:  # in the cpuacct hierarchy too, where usage is counted
        assert set(new.pids) <= set(cgroups.read_pids(os.path.join(mount, new.cgroup_relpath)))
    assert quota_and_shares(new.cpu_dir) == (30_000, 102)  # the limit and request stay
    assert new.restarts == 1 == change.restarts
    (api_info,) = [c for p in runtime.lab_inventory(lab).pods() for c in p.containers if c.name == "api"]
    assert (api_info.restarts, api_info.container_id) == (1, new.container_id)
    status = next(c for c in runtime.lab_status(lab).containers if c.container == "api")
    assert (status.leader_alive, status.tasks, status.expected_tasks, status.restarts) == (True, 4, 4, 1)

    # The collector's lab source reads the new cgroup under the new id.
    inventory = runtime.lab_inventory(lab)
    read_ = convert.node_read(inventory, "lab-node", client.read_cgroups(inventory, "lab-node", datetime.now(UTC)))
    assert read_.problems == []
    assert {(r.pod, r.container) for r in read_.readings} == {("web-1", "app"), ("web-1", "side"), ("api-1", "api")}

    again = changes.set_container("shop/api-1/api", processes=1, state_dir=lab)
    assert again.restarts == 2 and again.container_id_after not in (old.container_id, new.container_id)
    assert settled_pids(container(lab, "api").cpu_dir, 2) and not wait_until_gone(new_pids)

    last_pids = cgroups.tree_pids(controller, lab_root)
    report = runtime.lab_down(lab)
    assert not report.leftover and not wait_until_gone(last_pids)
    assert tree_on_disk(controller, lab_root) == []


# --- refusals -----------------------------------------------------------------------------------------------------


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"target": "shop/web-1/app", "limit": "500m"}, "QoS class from Guaranteed to Burstable"),
    ({"target": "shop/web-1/app", "limit": "none"}, "QoS class from Guaranteed to Burstable"),
    ({"target": "shop/api-1/api", "request": "300m"}, "QoS class from Burstable to Guaranteed"),
    ({"target": "shop/api-1/api", "request": "400m"}, "request 400m, more than its limit 300m"),
    ({"target": "shop/web-1/nope", "limit": "1"}, r"no container 'nope' in lab pod shop/web-1 \(it has: app, side\)"),
    ({"target": "shop/gone/app", "limit": "1"}, "no lab pod shop/gone"),
    ({"target": "web-1/app", "limit": "1"}, "is not NAMESPACE/POD/CONTAINER"),
    ({"target": "shop/web-1/app"}, "nothing to change: give --limit, --request or --processes"),
    ({"target": "shop/web-1/app", "limit": "200m", "request": "200m"}, "already has request 200m and limit 200m"),
    ({"target": "shop/web-1/app", "processes": 1}, "already has request 200m, limit 200m and 1 process$"),
    ({"target": "shop/web-1/app", "limit": "2x"}, "--limit: '2x' is not a CPU quantity"),
    ({"target": "shop/web-1/app", "limit": "0"}, "use --limit none"),
    ({"target": "shop/web-1/app", "request": "-1"}, "--request: .* is negative"),
    ({"target": "shop/web-1/app", "processes": 0}, "'processes': 0 is below the minimum 1"),
    ({"target": "shop/web-1/app", "processes": 65}, "'processes': 65 is above the maximum 64"),
    ({"target": "shop/web-1/side", "processes": 2}, r"'idle'.*\(the kinds that have one: burner, bursty, lightweb\)"),
]


@pytest.mark.root
@pytest.mark.slow
def test_every_refusal_leaves_the_state_the_cgroups_and_the_processes_as_they_were(
    controller: CpuController, lab_root: str, lab: Path
) -> None:
    before = snapshot(controller, lab_root, lab)
    # The root, kubepods, its 2 QoS levels, 2 pods, 3 containers; a burner, an idle sidecar, a server: 5 processes.
    assert len(before[1]) == 9 and len(before[2]) == 5
    for case, message in REFUSED:
        kwargs = dict(case)
        target = kwargs.pop("target")
        with pytest.raises(LabError, match=message) as caught:
            changes.set_container(target, state_dir=lab, **kwargs)
        assert "\n" not in str(caught.value)
        assert snapshot(controller, lab_root, lab) == before, (target, kwargs)


@pytest.mark.root
@pytest.mark.slow
def test_a_resize_that_fails_half_way_sets_back_what_it_wrote(
    controller: CpuController, lab_root: str, lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(controller, lab_root, lab)
    real_write = cgroups.write_settings
    written: list[str] = []

    def second_write_fails(controller: CpuController, cpu_dir: str, settings: cgroups.CgroupSettings) -> None:
        written.append(cpu_dir)
        if len(written) == 2:  # the pod's cgroup is written, the container's fails
            raise cgroups.CgroupError(f"cannot write to {cpu_dir}: No space left on device")
        real_write(controller, cpu_dir, settings)

    monkeypatch.setattr(cgroups, "write_settings", second_write_fails)
    with pytest.raises(LabError, match=r"could not resize shop/web-1/app: .*; its cgroups were set back$"):
        changes.set_container("shop/web-1/app", limit="400m", request="400m", state_dir=lab)
    assert written[:2] == [container(lab, "app").pod_cpu_dir, container(lab, "app").cpu_dir]
    assert snapshot(controller, lab_root, lab) == before


def test_a_lab_that_is_not_up_is_refused(tmp_path: Path, settings) -> None:
    with pytest.raises(LabError, match="the lab is not up"):
        changes.set_container("shop/web-1/app", limit="1", state_dir=tmp_path)
    settings.DATA_DIR = tmp_path
    with pytest.raises(CommandError, match="the lab is not up"):
        call_command("lab", "set", "shop/web-1/app", "--limit", "1")
    assert not (tmp_path / "lab" / runtime.STATE_FILE).exists()


# --- the command --------------------------------------------------------------------------------------------------


@pytest.mark.root
@pytest.mark.slow
def test_the_command_resizes_restarts_refuses_and_status_shows_it(lab: Path) -> None:
    out = io.StringIO()
    call_command("lab", "set", "shop/web-1/app", "--limit", "300m", "--request", "300m", stdout=out)
    assert out.getvalue().startswith("Resized shop/web-1/app in place (Guaranteed, same processes): ")
    assert "request 200m → 300m, limit 200m → 300m" in out.getvalue()
    call_command("lab", "set", "shop/api-1/api", "--processes", "2", stdout=out)
    assert "Restarted shop/api-1/api with 2 processes (was 1): restart 1, new container id" in out.getvalue()

    with pytest.raises(CommandError, match=r"^refused: .*QoS class from Guaranteed to Burstable") as caught:
        call_command("lab", "set", "shop/web-1/app", "--limit", "none")
    assert "\n" not in str(caught.value)
    with pytest.raises(CommandError, match="go only with `lab set`"):
        call_command("lab", "status", "--limit", "1")

    settled_pids(container(lab, "api").cpu_dir, 3)
    status = io.StringIO()
    call_command("lab", "status", stdout=status)
    lines = status.getvalue().splitlines()
    assert any(line.startswith("  shop/web-1/app: running") and "request 300m, limit 300m, Guaranteed" in line
               for line in lines)  # fmt: skip
    assert any(line.startswith("  shop/api-1/api: running, 3 of 3 tasks") and line.endswith("Burstable, 1 restart")
               for line in lines)  # fmt: skip
