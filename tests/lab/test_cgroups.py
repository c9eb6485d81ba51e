"""Cgroups laid out like a kubelet's: detection, the conversions, the layout's values, writes and removal."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from apps.clusters.kubelet import weight_from_shares
from apps.lab import cgroups
from apps.lab.cgroups import CgroupError, CgroupSettings, CpuController
from apps.lab.scenario import parse_scenario

# The small scenario the layout tests use, with every case the kubelet distinguishes.
SMALL = """
node: {allocatable: "2"}
pods:
  - namespace: shop          # Guaranteed, two containers: pod cgroup directly under kubepods, pod quota = Σ limits
    name: web-1
    containers:
      - {name: app, request: 250m, limit: 250m, workload: idle}
      - {name: sidecar, request: 100m, limit: 100m, workload: idle}
  - namespace: shop          # Burstable, every container limited: pod quota = Σ limits
    name: api-1
    containers:
      - {name: api, request: 100m, limit: 300m, workload: idle}
  - namespace: batch         # Burstable, one container without a limit: no pod quota
    name: cron-1
    containers:
      - {name: a, request: 200m, workload: idle}
      - {name: b, request: 50m, limit: 100m, workload: idle}
  - namespace: batch         # BestEffort
    name: be-1
    containers:
      - {name: c, workload: idle}
"""

V1_SEPARATE = """\
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


# --- conversions and layout (pure) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shares", "weight"),
    [(2, 1), (262144, 10000), (1024, 39), (1, 1), (10**6, 10000)],  # 1024 → 39 is runc's documented example
)
def test_v2_weight_is_the_linear_map_of_shares(shares: int, weight: int) -> None:
    assert weight_from_shares(shares) == weight


def test_the_layout_matches_what_the_kubelet_writes() -> None:
    scenario = parse_scenario(SMALL)
    layout = cgroups.kubelet_layout(scenario, boot=1, allocatable_mcpu=2000)
    by_path = {s.relpath: s for s in layout.cgroups}
    pods = {p.name: p for p in scenario.pods}
    ids = {(p.pod.name, p.container.name): p.container_id for p in layout.placements}

    def settings(path: str) -> tuple[int, int | None]:
        return by_path[path].shares, by_path[path].quota_us

    # Figures worked by hand: shares = mcpu × 1024 / 1000 (floored), quota = mcpu × 100 µs.
    assert settings("kubepods") == (2048, None)  # allocatable 2 CPUs
    assert settings("kubepods/burstable") == (358, None)  # Σ Burstable requests: 100 + 250 = 350m
    assert settings("kubepods/besteffort") == (2, None)
    web = f"kubepods/pod{pods['web-1'].uid}"
    assert settings(web) == (358, 35_000)  # requests 350m, limits 350m
    assert settings(f"{web}/{ids[('web-1', 'app')]}") == (256, 25_000)
    assert settings(f"{web}/{ids[('web-1', 'sidecar')]}") == (102, 10_000)
    api = f"kubepods/burstable/pod{pods['api-1'].uid}"
    assert settings(api) == (102, 30_000)
    assert settings(f"{api}/{ids[('api-1', 'api')]}") == (102, 30_000)
    cron = f"kubepods/burstable/pod{pods['cron-1'].uid}"
    assert settings(cron) == (256, None)  # container a has no limit
    assert settings(f"{cron}/{ids[('cron-1', 'a')]}") == (204, None)
    assert settings(f"{cron}/{ids[('cron-1', 'b')]}") == (51, 10_000)
    best_effort = f"kubepods/besteffort/pod{pods['be-1'].uid}"
    assert settings(best_effort) == (2, None)
    assert settings(f"{best_effort}/{ids[('be-1', 'c')]}") == (2, None)
    assert len(by_path) == 3 + 4 + 6
    assert {s.period_us for s in layout.cgroups} == {100_000}


def test_the_layout_lists_parents_before_children() -> None:
    layout = cgroups.kubelet_layout(parse_scenario(SMALL), boot=1, allocatable_mcpu=2000)
    seen: set[str] = set()
    for settings in layout.cgroups:
        parent = os.path.dirname(settings.relpath)
        assert parent == "" or parent in seen, settings.relpath
        seen.add(settings.relpath)


def test_a_restart_gives_every_container_a_new_cgroup_in_the_same_pod_cgroup() -> None:
    scenario = parse_scenario(SMALL)
    first = cgroups.kubelet_layout(scenario, boot=1, allocatable_mcpu=2000).placements
    second = cgroups.kubelet_layout(scenario, boot=2, allocatable_mcpu=2000).placements
    assert [p.pod_relpath for p in first] == [p.pod_relpath for p in second]
    assert not {p.relpath for p in first} & {p.relpath for p in second}


def test_a_custom_period_scales_every_quota() -> None:
    layout = cgroups.kubelet_layout(parse_scenario("period_us: 50000\n" + SMALL), boot=1, allocatable_mcpu=2000)
    quotas = {s.quota_us for s in layout.cgroups if s.quota_us}
    assert quotas == {17_500, 12_500, 5_000, 15_000}  # 350m, 250m, 100m, 300m of 50 ms


# --- detection (pure) --------------------------------------------------------------------------------------------


def test_separate_v1_cpu_and_cpuacct_mounts_are_found() -> None:
    assert cgroups.detect_cpu_controller(V1_SEPARATE) == CpuController(
        1, "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct"
    )


def test_a_co_mounted_cpu_cpuacct_hierarchy_is_one_hierarchy() -> None:
    controller = cgroups.detect_cpu_controller(
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0\n"
    )
    assert controller == CpuController(1, "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct")
    assert controller is not None and controller.hierarchies == ("/sys/fs/cgroup/cpu,cpuacct",)


def test_cgroup_v2_counts_only_when_it_offers_the_cpu_controller(tmp_path: Path) -> None:
    with_cpu, without_cpu = tmp_path / "with", tmp_path / "without"
    with_cpu.mkdir()
    without_cpu.mkdir()
    (with_cpu / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (without_cpu / "cgroup.controllers").write_text("hugetlb\n")
    assert cgroups.detect_cpu_controller(f"cgroup2 {without_cpu} cgroup2 rw 0 0\n") is None
    assert cgroups.detect_cpu_controller(f"cgroup2 {with_cpu} cgroup2 rw 0 0\n") == CpuController(2, str(with_cpu))


def test_escaped_mount_points_are_decoded() -> None:
    controller = cgroups.detect_cpu_controller("cgroup /mnt/my\\040cgroups cgroup rw,cpu 0 0\n")
    assert controller is not None and controller.cpu_mount == "/mnt/my cgroups"
    assert controller.cpuacct_mount is None and controller.usage_dir("x") is None


def test_this_machine_has_the_separate_v1_mounts_the_brief_describes() -> None:
    controller = cgroups.detect_cpu_controller()
    if controller is None or controller.version != 1:
        pytest.skip("this machine has no cgroup v1 cpu controller")
    assert Path(controller.cpu_mount, "cpu.cfs_quota_us").exists()
    assert controller.cpuacct_mount is not None and Path(controller.cpuacct_mount, "cpuacct.usage").exists()


# --- reading real captured files (tests/fixtures/cgroup) ---------------------------------------------------------


def test_v1_cpu_stat_reads_the_throttling_counters(fixtures_dir: Path) -> None:
    stat = cgroups.read_cpu_stat(str(fixtures_dir / "cgroup" / "v1-linux-6.18-throttled"))
    assert (stat["nr_periods"], stat["nr_throttled"], stat["throttled_time"]) == (33, 32, 1798447421)
    assert stat["nr_bursts"] == 0  # a newer kernel's key is kept, not refused


def test_v2_usage_comes_from_cpu_stat_in_microseconds(fixtures_dir: Path) -> None:
    root = fixtures_dir / "cgroup"
    controller = CpuController(2, str(root))
    assert cgroups.read_usage_ns(controller, "v2-linux-6.18-root") == 121_524_746_000


def test_a_cpu_stat_value_that_is_not_a_number_is_refused_by_line(fixtures_dir: Path) -> None:
    with pytest.raises(CgroupError, match="fortytwo"):
        cgroups.read_cpu_stat(str(fixtures_dir / "cgroup" / "v1-runc-invalid"))


# --- v2 writes (on a plain directory standing in for cgroupfs) -----------------------------------------------------


def test_v2_settings_go_to_cpu_max_and_cpu_weight(tmp_path: Path) -> None:
    controller = CpuController(2, str(tmp_path))
    cgroups.write_settings(controller, str(tmp_path), CgroupSettings("x", 1024, 50_000, 100_000))
    assert (tmp_path / "cpu.max").read_text() == "50000 100000"
    assert (tmp_path / "cpu.weight").read_text() == "39"
    cgroups.write_settings(controller, str(tmp_path), CgroupSettings("x", 2, None, 100_000))
    assert (tmp_path / "cpu.max").read_text() == "max 100000"
    assert (tmp_path / "cpu.weight").read_text() == "1"


def test_v2_enables_the_cpu_controller_for_children_only_when_missing(tmp_path: Path) -> None:
    control = tmp_path / "cgroup.subtree_control"
    control.write_text("memory pids\n")
    cgroups.ensure_root(CpuController(2, str(tmp_path)), "lab")
    assert control.read_text() == "+cpu"
    control.write_text("cpu memory\n")
    cgroups.ensure_root(CpuController(2, str(tmp_path)), "lab")
    assert control.read_text() == "cpu memory\n"  # already enabled: not written again
    assert (tmp_path / "lab").is_dir()


# --- safety (pure) -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("root", ["", "..", "a/b", "../etc", "/abs", ".hidden"])
def test_a_root_that_is_not_one_plain_name_is_refused(root: str, tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="single directory name"):
        cgroups.remove_tree(CpuController(1, str(tmp_path)), root)


def test_removal_refuses_a_path_that_climbs_out_of_the_root(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "precious").mkdir()
    with pytest.raises(CgroupError, match="outside the lab root"):
        cgroups.remove_tree(CpuController(1, str(tmp_path)), "lab", "../precious")
    assert (tmp_path / "precious").is_dir()


def test_the_lab_cannot_run_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    ok, reason = cgroups.can_run_lab("cputune-labtest-nobody")
    assert not ok and reason.startswith("not root (euid 1000)")


def test_the_lab_cannot_run_without_a_cpu_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(cgroups, "detect_cpu_controller", lambda: None)
    ok, reason = cgroups.can_run_lab("cputune-labtest-none")
    assert not ok and "no cgroup cpu controller" in reason


def test_the_lab_cannot_run_where_the_controller_is_not_writable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    ok, reason = cgroups.can_run_lab("cputune-labtest-ro", CpuController(1, "/proc/sys", None))
    assert not ok and reason.startswith("cpu controller not writable at /proc/sys")


# --- real cgroups (root) ---------------------------------------------------------------------------------------


@pytest.mark.root
def test_can_run_lab_says_yes_here_and_leaves_nothing_behind(controller: CpuController, lab_root: str) -> None:
    ok, reason = cgroups.can_run_lab(lab_root, controller)
    assert ok, reason
    assert controller.cpu_mount in reason
    assert not any(os.path.exists(os.path.join(mount, lab_root)) for mount in controller.hierarchies)


@pytest.mark.root
def test_the_layout_is_written_to_real_cgroups_in_both_hierarchies(controller: CpuController, lab_root: str) -> None:
    layout = cgroups.kubelet_layout(parse_scenario(SMALL), boot=1, allocatable_mcpu=2000)
    cgroups.create_layout(controller, lab_root, layout)
    for settings in layout.cgroups:
        cpu_dir = Path(controller.cpu_dir(os.path.join(lab_root, settings.relpath)))
        if controller.version == 1:
            assert int((cpu_dir / "cpu.shares").read_text()) == settings.shares
            assert int((cpu_dir / "cpu.cfs_quota_us").read_text()) == (settings.quota_us or -1)
            assert int((cpu_dir / "cpu.cfs_period_us").read_text()) == settings.period_us
        usage_dir = controller.usage_dir(os.path.join(lab_root, settings.relpath))
        assert usage_dir is not None and os.path.isdir(usage_dir)
    report = cgroups.remove_tree(controller, lab_root)
    assert not report.leftover
    assert len(report.removed) == (1 + len(layout.cgroups)) * len(controller.hierarchies)
    assert not os.path.exists(controller.cpu_dir(lab_root))


@pytest.mark.root
def test_removal_kills_every_process_in_the_tree_then_removes_it(controller: CpuController, lab_root: str) -> None:
    with cgroups.temporary_cgroup(controller, lab_root, "outer", None, 100_000):
        pass  # a cgroup made and removed: the root, created here, goes with it
    assert not os.path.exists(controller.cpu_dir(lab_root))
    cgroups.ensure_root(controller, lab_root)
    cgroups.create_cgroup(controller, lab_root, CgroupSettings("a", 1024, None, 100_000))
    cgroups.create_cgroup(controller, lab_root, CgroupSettings("a/b", 1024, 50_000, 100_000))
    procs = cgroups.procs_files(controller, lab_root, "a/b")
    joins = "; ".join(f"echo $$ > {path}" for path in procs)
    sleeper = subprocess.Popen(["sh", "-c", f"{joins}; exec sleep 60"])
    deadline = time.monotonic() + 5
    while sleeper.pid not in cgroups.tree_pids(controller, lab_root) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cgroups.tree_pids(controller, lab_root) == [sleeper.pid]

    report = cgroups.remove_tree(controller, lab_root)

    assert report.killed_pids == (sleeper.pid,) and not report.leftover
    assert not Path(f"/proc/{sleeper.pid}").exists()  # killed and reaped: not even a zombie is left
    sleeper.poll()
    assert not any(os.path.exists(os.path.join(mount, lab_root)) for mount in controller.hierarchies)
    assert cgroups.remove_tree(controller, lab_root) == cgroups.RemovalReport()  # idempotent


@pytest.mark.root
def test_a_temporary_cgroup_gets_its_quota_and_is_removed(controller: CpuController, lab_root: str) -> None:
    with cgroups.temporary_cgroup(controller, lab_root, "probe-x", 20_000, 100_000) as cpu_dir:
        if controller.version == 1:
            assert Path(cpu_dir, "cpu.cfs_quota_us").read_text().strip() == "20000"
        assert os.path.isdir(cpu_dir)
    assert not os.path.exists(cpu_dir)
