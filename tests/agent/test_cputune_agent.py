"""The node agent: cgroup file parsers, kubelet path mapping, tree walking, node facts and the pushing loop.

Expected figures are read off the fixture files by hand (tests/fixtures/cgroup/, see its README.md), not produced by the
code under test. The real-cgroup counterpart is test_cputune_agent_real_cgroup.py.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agent import cputune_agent as agent
from apps.telemetry import counters
from tests.agent.conftest import IngestServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cgroup"
AGENT_FILE = Path(agent.__file__).resolve()

PAYLOAD_KEYS = {"agent_version", "node", "cgroup_version", "collected_at", "containers", "errors"}
NODE_KEYS = {"name", "kernel_version", "capacity_mcpu", "cfs_slice_us", "cpufreq_governor"}
CONTAINER_KEYS = {
    "pod_uid",
    "container_id",
    "qos_class",
    "periods_total",
    "throttled_periods_total",
    "throttled_seconds_total",
    "usage_seconds_total",
    "threads",
    "quota_us",
    "period_us",
    "shares",
    "weight",
    "burst_us",
    "bursts_total",
    "burst_seconds_total",
    "psi_some_total_seconds",
    "psi_full_total_seconds",
}


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def container_id(name: str) -> str:
    """A 64-hex id like the runtimes make (sha256 of a label, so tests read by name)."""
    return hashlib.sha256(name.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# Parsers on the captured files.


def test_v1_cpu_stat_with_burst_keys_is_parsed_in_nanoseconds():
    stat = agent.parse_cpu_stat(fixture_text("v1-linux-6.18-throttled/cpu.stat"))
    assert stat == {
        "nr_periods": 33,
        "nr_throttled": 32,
        "throttled_time": 1_798_447_421,
        "nr_bursts": 0,
        "burst_time": 0,
    }


def test_v1_cpu_stat_local_is_parsed_like_cpu_stat():
    assert agent.parse_cpu_stat(fixture_text("v1-linux-6.18-throttled/cpu.stat.local")) == {
        "throttled_time": 1_798_447_421
    }


def test_v1_single_value_files_are_read_as_integers():
    assert agent.parse_cfs_quota_us(fixture_text("v1-linux-6.18-throttled/cpu.cfs_quota_us")) == 50_000
    assert agent.parse_int(fixture_text("v1-linux-6.18-throttled/cpu.cfs_period_us"), "cpu.cfs_period_us") == 100_000
    assert agent.parse_int(fixture_text("v1-linux-6.18-throttled/cpu.shares"), "cpu.shares") == 512
    assert agent.count_lines(fixture_text("v1-linux-6.18-throttled/tasks")) == 5


def test_v1_quota_of_minus_one_means_no_limit():
    assert agent.parse_cfs_quota_us("-1\n") is None


def test_v1_quota_below_minus_one_is_rejected_naming_the_value():
    with pytest.raises(agent.CgroupFormatError, match=r"cpu.cfs_quota_us: quota -5"):
        agent.parse_cfs_quota_us("-5\n")


def test_v2_root_cpu_stat_without_cpu_controller_keeps_unknown_keys_and_lacks_period_keys():
    stat = agent.parse_cpu_stat(fixture_text("v2-linux-6.18-root/cpu.stat"))
    assert stat == {
        "usage_usec": 121_524_746,
        "user_usec": 89_902_805,
        "system_usec": 31_621_941,
        "nice_usec": 63_990,
    }
    assert "nr_periods" not in stat


def test_v2_cpu_stat_with_throttling_and_burst_keys():
    assert agent.parse_cpu_stat(fixture_text("v2-opencontainers/cpu.stat")) == {
        "usage_usec": 1_000_000,
        "user_usec": 600_000,
        "system_usec": 400_000,
        "nr_periods": 100,
        "nr_throttled": 10,
        "throttled_usec": 50_000,
        "nr_bursts": 5,
        "burst_usec": 10_000,
    }


def test_cpu_stat_accepts_keys_a_future_kernel_adds():
    assert agent.parse_cpu_stat("usage_usec 5\ncore_sched.force_idle_usec 7\n\n") == {
        "usage_usec": 5,
        "core_sched.force_idle_usec": 7,
    }


def test_invalid_counter_is_rejected_naming_the_file_and_the_line():
    source = str(FIXTURES / "v1-runc-invalid/cpu.stat")
    with pytest.raises(agent.CgroupFormatError) as raised:
        agent.parse_cpu_stat(fixture_text("v1-runc-invalid/cpu.stat"), source)
    message = str(raised.value)
    assert source in message
    assert "'throttled_time fortytwo'" in message
    assert isinstance(raised.value, ValueError)


def test_overflowed_counter_is_rejected_as_bad_input():
    with pytest.raises(agent.CgroupFormatError, match=r"18446744073709551615 is past 2\*\*53"):
        agent.parse_cpu_stat(fixture_text("v1-runc-overflow/cpu.stat"), "v1-runc-overflow/cpu.stat")


@pytest.mark.parametrize(("throttled", "periods"), [(0, 0), (0, 10), (3, 10), (10, 10), (12, 10), (-1, 10), (5, -2)])
def test_the_agent_s_throttle_ratio_is_telemetry_counters_one(throttled: int, periods: int):
    assert agent.throttle_ratio(throttled, periods) == counters.throttle_ratio(throttled, periods)


def test_cpu_stat_line_without_a_value_is_rejected():
    with pytest.raises(agent.CgroupFormatError, match=r"bad line 'nr_periods'"):
        agent.parse_cpu_stat("nr_periods\n")


@pytest.mark.parametrize("value", [0, 1, 2**53 - 1, 2**53, 2**53 + 1, 2**63, 2**64 - 1])
def test_counter_sanity_rule_agrees_with_telemetry_counters(value: int):
    try:
        counters.check_counter("x", value)
        telemetry_accepts = True
    except counters.BadCounter:
        telemetry_accepts = False
    assert agent.is_sane_counter(value) is telemetry_accepts
    assert agent.MAX_SANE_COUNTER == counters.MAX_SANE


def test_counter_just_past_two_to_the_53_is_rejected_and_the_bound_itself_accepted():
    assert agent.parse_cpu_stat(f"nr_periods {2**53}\n") == {"nr_periods": 2**53}
    with pytest.raises(agent.CgroupFormatError):
        agent.parse_cpu_stat(f"nr_periods {2**53 + 1}\n")


def test_cpu_max_without_limit_gives_no_quota_and_the_period():
    assert agent.parse_cpu_max("max 100000\n") == (None, 100_000)


def test_cpu_max_with_limit_gives_quota_and_period():
    assert agent.parse_cpu_max("50000 100000\n") == (50_000, 100_000)


@pytest.mark.parametrize("text", ["max\n", "fifty 100000\n", "50000 0\n", "50000 100000 7\n", ""])
def test_cpu_max_garbage_is_rejected_quoting_the_content(text: str):
    with pytest.raises(agent.CgroupFormatError, match=r"cpu\.max"):
        agent.parse_cpu_max(text)


def test_pressure_of_the_v2_root_has_some_and_full_lines():
    pressure = agent.parse_pressure(fixture_text("v2-linux-6.18-root/cpu.pressure"))
    assert pressure["some"] == agent.Pressure(avg10_pct=8.81, avg60_pct=1.68, avg300_pct=0.44, total_us=11_716_711)
    assert pressure["full"] == agent.Pressure(avg10_pct=0.0, avg60_pct=0.0, avg300_pct=0.0, total_us=0)


def test_pressure_without_trailing_newline_is_parsed():
    pressure = agent.parse_pressure(fixture_text("v2-opencontainers/cpu.pressure"))
    assert pressure["some"] == agent.Pressure(1.0, 2.0, 3.0, 100_000)
    assert pressure["full"] == agent.Pressure(0.5, 1.0, 1.5, 50_000)


def test_pressure_of_an_old_kernel_without_full_line_has_only_some():
    assert agent.parse_pressure("some avg10=0.10 avg60=0.00 avg300=0.00 total=42 extra=1\n") == {
        "some": agent.Pressure(0.1, 0.0, 0.0, 42)
    }


@pytest.mark.parametrize(
    "line",
    ["some avg10=0.10 avg60=0.00 total=42", "some avg10=x avg60=0 avg300=0 total=42", "some avg10 avg60=0"],
)
def test_pressure_garbage_is_rejected_quoting_the_line(line: str):
    with pytest.raises(agent.CgroupFormatError, match=r"cpu.pressure: bad line"):
        agent.parse_pressure(line)


def test_cpu_list_counts_ranges_and_single_cpus():
    assert agent.parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert agent.parse_cpu_list("\n") == set()
    with pytest.raises(agent.CgroupFormatError, match="'a-b'"):
        agent.parse_cpu_list("0,a-b")


# ---------------------------------------------------------------------------------------------------------------------
# Kubelet cgroup paths: every real path in the fixture, with expectations written by hand.

PATH_EXPECTATIONS = [
    # (neuvector test, pod uid, container id, qos)
    (
        "TestDockerIDKubepods",
        "74ba62da-1a3d-11e7-bb11-080027cb0e22",
        "cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c",
        "BestEffort",
    ),
    (
        "TestDockerIDKubepods2",
        "045b1e35-7f13-11e7-ac42-0050568ffca0",
        "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70",
        "BestEffort",
    ),
    (
        "TestDockerIDKubepods3",
        "1fe19bf5-e8ef-11e8-900c-52daee5a874d",
        "da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d",
        "BestEffort",
    ),
    (
        "TestK8sProxyProcess",  # a process one level below its container: still that container
        "f8a694f2-7c08-11e9-98da-000c29077430",
        "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903",
        "BestEffort",
    ),
    (
        "TestK8sBottleRocket",
        "dd1bf9d1-241d-47f5-8e25-12de83135812",
        "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830",
        "BestEffort",
    ),
    (
        "TestK8sCrio_v1_19",
        "8ca306fa-3c03-47fa-97dd-19979c345572",
        "d6d725b909f37c3e232aadfbafa950a58bfe7baa579ba8c47a12be88bb921607",
        "BestEffort",
    ),
    (
        "TestK8sCrio_v1_17",  # a static pod: its uid is the manifest hash, without dashes
        "487a0dc6dccaeefbcfedba7a7ce1ca18",
        "7a1fd6fe8cdfbd44dc78c4cc85dad7031eaab4365801684cad0aabdeaf863f9e",
        "Burstable",
    ),
    (
        "TestK8sContainerd_v1_2_13",
        "a36d0c1d-0b26-4451-8d80-9c195e004afa",
        "5dd96d5394ca930a854a390ea46f7515a8bc930123eb3251ba20f2708a38fc61",
        "BestEffort",
    ),
    (
        "TestK8sContainerd_v1_4_4",  # misconfigured containerd under system.slice/containerd.service
        "2105e389-7471-476e-a50f-6074cef29bbd",
        "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e",
        "BestEffort",
    ),
    (
        "TestK8sContainerd_v1_4_4",  # the same, at the root
        "2105e389-7471-476e-a50f-6074cef29bbd",
        "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e",
        "BestEffort",
    ),
    (
        "TestDockerK8s_Ubuntu_Container_Cgroupv2",  # seen from inside a cgroup namespace: /../../
        "fd698699-eabf-4c23-92ef-cf0bbdb78261",
        "2cc65c162ca1388b6b8d5ccfb701d22fc96675ccf8b2f1590c490c2c4039547f",
        "BestEffort",
    ),
    (
        "TestCrio_Container_SelfProbe_Cgroupv2",
        "395f906e-7c77-4c83-9472-361ea8819cea",
        "7b05b98b56047ad0e02e55f4e6bcffbcdc436340179a9c05908df1e5d4f0710d",
        "BestEffort",
    ),
    (
        "TestCrio_Container_Cgroupv2",
        "042efd86-1f3b-4f2f-8736-f31c58e95bbc",
        "f33f47b0db740bb647cb3e7ac62d96c74966dbb99cbfaf4563bfd42d387e8b44",
        "Burstable",
    ),
    (
        "TestContainerd_Container_Cgroupv2",
        "9493223b-520e-4a97-a45f-359dcf967006",
        "25d057a4c6c9555f2a0eb106e8896968c28f1c44aca4754174851aca7f89ad26",
        "BestEffort",
    ),
]


def kubelet_paths() -> list[tuple[str, str]]:
    rows = []
    for line in fixture_text("kubelet-cgroup-paths.txt").splitlines():
        if line.strip() and not line.startswith("#"):
            path, test_name = line.split("\t")
            rows.append((path, test_name))
    return rows


def test_the_path_fixture_has_the_fourteen_paths_the_expectations_cover():
    assert [test_name for _path, test_name in kubelet_paths()] == [row[0] for row in PATH_EXPECTATIONS]


@pytest.mark.parametrize(
    ("path", "expected"),
    [(path, row) for (path, _name), row in zip(kubelet_paths(), PATH_EXPECTATIONS, strict=True)],
    ids=[f"{index:02d}-{row[0]}" for index, row in enumerate(PATH_EXPECTATIONS)],
)
def test_real_container_cgroup_path_maps_to_pod_container_and_qos(path: str, expected: tuple[str, str, str, str]):
    _test_name, pod_uid, container, qos = expected
    assert agent.parse_container_cgroup_path(path) == (pod_uid, container, qos)


GUARANTEED_UID = "0b5f4ac1-6f6e-4d3b-9f39-3a5cbd1e7e11"


@pytest.mark.parametrize(
    "path",
    [
        f"/kubepods/pod{GUARANTEED_UID}/{container_id('app')}",
        f"/kubepods.slice/kubepods-pod{GUARANTEED_UID.replace('-', '_')}.slice/cri-containerd-{container_id('app')}.scope",
    ],
)
def test_guaranteed_pods_sit_directly_under_kubepods_in_both_drivers(path: str):
    assert agent.parse_container_cgroup_path(path) == (GUARANTEED_UID, container_id("app"), "Guaranteed")


def test_cri_o_with_the_cgroupfs_driver_prefixes_the_container_id():
    path = f"/kubepods/burstable/pod{GUARANTEED_UID}/crio-{container_id('app')}"
    assert agent.parse_container_cgroup_path(path) == (GUARANTEED_UID, container_id("app"), "Burstable")


@pytest.mark.parametrize(
    "path",
    [
        f"/kubepods/burstable/pod{GUARANTEED_UID}",  # the pod level
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{GUARANTEED_UID.replace('-', '_')}.slice",
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{GUARANTEED_UID.replace('-', '_')}.slice/"
        f"crio-conmon-{container_id('app')}.scope",  # cri-o's monitor, not the container
        "/kubepods/burstable",
        "/system.slice/containerd.service",
        f"/system.slice/docker-{container_id('app')}.scope",  # a docker container outside Kubernetes
        f"/kubepods/burstable/pod{GUARANTEED_UID}/not-a-container",
        f"/somewhere/pod{GUARANTEED_UID}/{container_id('app')}",  # pod<uid> not under a kubepods qos level
        "/",
        "",
    ],
)
def test_paths_that_are_not_a_kubernetes_container_map_to_none(path: str):
    assert agent.parse_container_cgroup_path(path) is None


def test_pod_level_cgroup_paths_map_to_the_pod_and_its_qos():
    systemd_uid = GUARANTEED_UID.replace("-", "_")
    assert agent.parse_pod_cgroup_path(f"/kubepods/besteffort/pod{GUARANTEED_UID}") == (GUARANTEED_UID, "BestEffort")
    assert agent.parse_pod_cgroup_path(f"kubepods/pod{GUARANTEED_UID}") == (GUARANTEED_UID, "Guaranteed")
    assert agent.parse_pod_cgroup_path(
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{systemd_uid}.slice"
    ) == (GUARANTEED_UID, "Burstable")
    assert agent.parse_pod_cgroup_path(f"/kubepods/burstable/pod{GUARANTEED_UID}/{container_id('app')}") is None


# ---------------------------------------------------------------------------------------------------------------------
# Trees laid out like a kubelet's, built from the fixture files.

UID_BURSTABLE = "6c1f2b0e-3d4a-4f5b-8c6d-7e8f90a1b2c3"
UID_BESTEFFORT = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d"
UID_GUARANTEED = "1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f"


def pod_path(driver: str, qos: str, uid: str) -> str:
    """The pod-level cgroup a kubelet with this cgroup driver makes (Guaranteed pods sit directly under kubepods)."""
    if driver == "cgroupfs":
        return f"kubepods/pod{uid}" if qos == "Guaranteed" else f"kubepods/{qos.lower()}/pod{uid}"
    systemd_uid = uid.replace("-", "_")
    if qos == "Guaranteed":
        return f"kubepods.slice/kubepods-pod{systemd_uid}.slice"
    level = qos.lower()
    return f"kubepods.slice/kubepods-{level}.slice/kubepods-{level}-pod{systemd_uid}.slice"


def container_path(driver: str, qos: str, uid: str, cid: str, runtime: str = "cri-containerd") -> str:
    if driver == "cgroupfs":
        return f"{pod_path(driver, qos, uid)}/{cid}"
    return f"{pod_path(driver, qos, uid)}/{runtime}-{cid}.scope"


def write_files(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def tids(count: int) -> str:
    return "".join(f"{1000 + index}\n" for index in range(count))


def build_v2_tree(root: Path, driver: str) -> Path:
    """A cgroup v2 tree: root files from v2-linux-6.18-root; three pods; a conmon scope and a system service."""
    write_files(
        root,
        {
            "cgroup.controllers": "cpuset cpu io memory pids\n",
            "cpu.stat": fixture_text("v2-linux-6.18-root/cpu.stat"),
            "cpu.pressure": fixture_text("v2-linux-6.18-root/cpu.pressure"),
            "cpuset.cpus.effective": "0-3\n",
        },
    )
    # Burstable pod: a limited container with throttling (v2-opencontainers), pids controller on.
    write_files(
        root / pod_path(driver, "Burstable", UID_BURSTABLE),
        {
            "cpu.stat": fixture_text("v2-linux-6.18-root/cpu.stat"),  # no cpu controller at the pod level here
            "cpu.max": "max 100000\n",
            "cpu.weight": "10\n",
            "cpu.pressure": fixture_text("v2-linux-6.18-root/cpu.pressure"),
            "cgroup.threads": "",
        },
    )
    write_files(
        root / container_path(driver, "Burstable", UID_BURSTABLE, container_id("web")),
        {
            "cpu.stat": fixture_text("v2-opencontainers/cpu.stat"),
            "cpu.max": "50000 100000\n",
            "cpu.max.burst": "20000\n",
            "cpu.weight": "10\n",
            "cpu.pressure": fixture_text("v2-opencontainers/cpu.pressure"),
            "pids.current": "7\n",
            "cgroup.threads": tids(7),
        },
    )
    # BestEffort pod: no limit, no pids controller (threads from cgroup.threads), no PSI file.
    write_files(
        root / pod_path(driver, "BestEffort", UID_BESTEFFORT),
        {"cpu.stat": "usage_usec 2500000\n", "cpu.max": "max 100000\n", "cpu.weight": "1\n", "cgroup.threads": ""},
    )
    write_files(
        root / container_path(driver, "BestEffort", UID_BESTEFFORT, container_id("batch")),
        {
            "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
            "cpu.max": "max 100000\n",
            "cpu.weight": "1\n",
            "cgroup.threads": tids(2),
        },
    )
    # Guaranteed pod with one container, its process in a sub-cgroup (threads counted there).
    write_files(
        root / pod_path(driver, "Guaranteed", UID_GUARANTEED),
        {"cpu.stat": fixture_text("v2-opencontainers/cpu.stat"), "cpu.max": "200000 100000\n", "cgroup.threads": ""},
    )
    guaranteed = root / container_path(driver, "Guaranteed", UID_GUARANTEED, container_id("db"))
    write_files(
        guaranteed,
        {
            "cpu.stat": fixture_text("v2-opencontainers/cpu.stat"),
            "cpu.max": "200000 100000\n",
            "cpu.weight": "79\n",
            "cgroup.threads": "",
        },
    )
    write_files(guaranteed / "worker", {"cpu.stat": "usage_usec 1\n", "cgroup.threads": tids(3)})
    if driver == "systemd":
        conmon = root / pod_path(driver, "Burstable", UID_BURSTABLE) / f"crio-conmon-{container_id('web')}.scope"
        write_files(conmon, {"cpu.stat": fixture_text("v2-opencontainers/cpu.stat"), "cgroup.threads": tids(1)})
    write_files(root / "system.slice" / "containerd.service", {"cpu.stat": "usage_usec 9\n", "cgroup.threads": ""})
    return root


def by_id(payload: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(row["pod_uid"], row["container_id"]): row for row in payload["containers"]}


def assert_payload_shape(payload: Mapping[str, Any]) -> None:
    assert set(payload) == PAYLOAD_KEYS
    assert set(payload["node"]) == NODE_KEYS
    assert payload["agent_version"] == "1"
    assert payload["cgroup_version"] in (1, 2)
    for row in payload["containers"]:
        assert set(row) == CONTAINER_KEYS
        assert row["qos_class"] in ("Guaranteed", "Burstable", "BestEffort")
    assert all(isinstance(error, str) for error in payload["errors"])
    json.dumps(payload)  # plain JSON values only


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_v2_tree_yields_every_container_and_pod_with_hand_checked_counters(tmp_path: Path, driver: str):
    root = build_v2_tree(tmp_path / "cgroup", driver)

    payload = agent.collect(cgroup_root_v2=str(root), node_name="node-a")

    assert_payload_shape(payload)
    assert payload["cgroup_version"] == 2
    assert payload["errors"] == []
    rows = by_id(payload)
    assert set(rows) == {
        (UID_BURSTABLE, ""),
        (UID_BURSTABLE, container_id("web")),
        (UID_BESTEFFORT, ""),
        (UID_BESTEFFORT, container_id("batch")),
        (UID_GUARANTEED, ""),
        (UID_GUARANTEED, container_id("db")),
    }
    web = rows[(UID_BURSTABLE, container_id("web"))]
    assert web == {
        "pod_uid": UID_BURSTABLE,
        "container_id": container_id("web"),
        "qos_class": "Burstable",
        "periods_total": 100,
        "throttled_periods_total": 10,
        "throttled_seconds_total": pytest.approx(0.05),  # throttled_usec 50000
        "usage_seconds_total": pytest.approx(1.0),  # usage_usec 1000000
        "threads": 7,  # pids.current
        "quota_us": 50_000,
        "period_us": 100_000,
        "shares": None,
        "weight": 10,
        "burst_us": 20_000,  # cpu.max.burst
        "bursts_total": 5,
        "burst_seconds_total": pytest.approx(0.01),  # burst_usec 10000
        "psi_some_total_seconds": pytest.approx(0.1),  # some total=100000
        "psi_full_total_seconds": pytest.approx(0.05),  # full total=50000
    }
    batch = rows[(UID_BESTEFFORT, container_id("batch"))]
    assert batch["qos_class"] == "BestEffort"
    assert batch["quota_us"] is None and batch["period_us"] == 100_000
    assert batch["periods_total"] is None and batch["throttled_periods_total"] is None  # no cpu controller keys
    assert batch["usage_seconds_total"] == pytest.approx(2.5)
    assert batch["threads"] == 2  # lines of cgroup.threads
    assert batch["psi_some_total_seconds"] is None and batch["psi_full_total_seconds"] is None  # no cpu.pressure
    db = rows[(UID_GUARANTEED, container_id("db"))]
    assert db["qos_class"] == "Guaranteed"
    assert db["quota_us"] == 200_000
    assert db["threads"] == 3  # its threads live in a sub-cgroup
    pod = rows[(UID_BURSTABLE, "")]
    assert pod["qos_class"] == "Burstable"
    assert pod["usage_seconds_total"] == pytest.approx(121.524746)  # usage_usec 121524746
    assert pod["periods_total"] is None
    # Its own cgroup.threads is empty; below it, 7 in the container and, with cri-o's systemd layout, 1 in conmon.
    assert pod["threads"] == (8 if driver == "systemd" else 7)
    assert pod["psi_some_total_seconds"] == pytest.approx(11.716711)
    assert pod["psi_full_total_seconds"] == 0.0
    assert payload["node"]["name"] == "node-a"


def test_v2_root_found_under_a_copied_sys_fs_cgroup(tmp_path: Path):
    root = build_v2_tree(tmp_path / "cgroup", "systemd")
    roots = agent.resolve_cgroup_root(str(root))
    assert roots == agent.CgroupRoots(2, str(root), None, str(root / "cpuset.cpus.effective"))
    payload = agent.collect(cgroup_root_v2=roots.cpu, cpuset_cpus_file=roots.cpuset_cpus_file)
    assert payload["node"]["capacity_mcpu"] == 4000  # cpuset.cpus.effective "0-3"


def build_v1_tree(cpu_root: Path, cpuacct_root: Path, driver: str) -> None:
    """A cgroup v1 tree from v1-linux-6.18-throttled; cpuacct may be the same directory or a separate tree."""
    throttled = FIXTURES / "v1-linux-6.18-throttled"
    web = container_path(driver, "Burstable", UID_BURSTABLE, container_id("web"), runtime="docker")
    write_files(
        cpu_root / pod_path(driver, "Burstable", UID_BURSTABLE),
        {
            "cpu.stat": "nr_periods 40\nnr_throttled 1\nthrottled_time 2000000\nnr_bursts 0\nburst_time 0\n",
            "cpu.cfs_quota_us": "-1\n",
            "cpu.cfs_period_us": "100000\n",
            "cpu.shares": "614\n",
            "tasks": "",
        },
    )
    (cpu_root / web).mkdir(parents=True)
    for file in throttled.iterdir():
        shutil.copy(file, cpu_root / web / file.name)
    write_files(cpuacct_root / pod_path(driver, "Burstable", UID_BURSTABLE), {"cpuacct.usage": "3000000000\n"})
    write_files(cpuacct_root / web, {"cpuacct.usage": "2500000000\n"})
    # A Guaranteed container the cpuacct hierarchy does not have (not joined there): usage unknown.
    write_files(
        cpu_root / pod_path(driver, "Guaranteed", UID_GUARANTEED),
        {"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", "cpu.cfs_quota_us": "100000\n", "tasks": ""},
    )
    write_files(
        cpu_root / container_path(driver, "Guaranteed", UID_GUARANTEED, container_id("db"), runtime="docker"),
        {
            "cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
            "cpu.cfs_quota_us": "100000\n",
            "cpu.cfs_period_us": "100000\n",
            "cpu.shares": "1024\n",
            "tasks": tids(1),
        },
    )


def test_v1_tree_with_separate_cpu_and_cpuacct_mounts_in_cgroupfs_layout(tmp_path: Path):
    cpu_root, cpuacct_root = tmp_path / "cpu", tmp_path / "cpuacct"
    build_v1_tree(cpu_root, cpuacct_root, "cgroupfs")

    payload = agent.collect(str(cpu_root), str(cpuacct_root), node_name="node-b")

    assert_payload_shape(payload)
    assert payload["cgroup_version"] == 1
    assert payload["errors"] == []
    rows = by_id(payload)
    assert set(rows) == {
        (UID_BURSTABLE, ""),
        (UID_BURSTABLE, container_id("web")),
        (UID_GUARANTEED, ""),
        (UID_GUARANTEED, container_id("db")),
    }
    assert rows[(UID_BURSTABLE, container_id("web"))] == {
        "pod_uid": UID_BURSTABLE,
        "container_id": container_id("web"),
        "qos_class": "Burstable",
        "periods_total": 33,
        "throttled_periods_total": 32,
        "throttled_seconds_total": pytest.approx(1.798447421),  # throttled_time 1798447421 ns
        "usage_seconds_total": pytest.approx(2.5),  # cpuacct.usage 2500000000 ns
        "threads": 5,  # five thread ids in tasks
        "quota_us": 50_000,
        "period_us": 100_000,
        "shares": 512,
        "weight": None,
        "burst_us": 0,  # the captured cpu.cfs_burst_us
        "bursts_total": 0,
        "burst_seconds_total": 0.0,
        "psi_some_total_seconds": None,
        "psi_full_total_seconds": None,
    }
    pod = rows[(UID_BURSTABLE, "")]
    assert pod["quota_us"] is None  # cpu.cfs_quota_us -1
    assert pod["shares"] == 614
    assert pod["usage_seconds_total"] == pytest.approx(3.0)
    assert pod["threads"] == 5  # tasks is per cgroup: the pod's own (none) plus its container's
    db = rows[(UID_GUARANTEED, container_id("db"))]
    assert db["qos_class"] == "Guaranteed"
    assert db["usage_seconds_total"] is None  # not in the cpuacct tree
    assert db["periods_total"] == 0 and db["threads"] == 1


def test_v1_tree_with_combined_cpu_cpuacct_mount_in_systemd_layout(tmp_path: Path):
    sys_fs_cgroup = tmp_path / "sys-fs-cgroup"
    combined = sys_fs_cgroup / "cpu,cpuacct"
    build_v1_tree(combined, combined, "systemd")
    write_files(combined, {"cpu.shares": "1024\n", "cpuacct.usage": "99\n", "cpu.stat": "nr_periods 0\n"})
    write_files(sys_fs_cgroup / "cpuset", {"cpuset.effective_cpus": "0-1\n"})

    roots = agent.resolve_cgroup_root(str(sys_fs_cgroup))
    assert roots == agent.CgroupRoots(
        1, str(combined), str(combined), str(sys_fs_cgroup / "cpuset/cpuset.effective_cpus")
    )
    payload = agent.collect(roots.cpu, cpuset_cpus_file=roots.cpuset_cpus_file)

    assert payload["errors"] == []
    web = by_id(payload)[(UID_BURSTABLE, container_id("web"))]
    assert web["usage_seconds_total"] == pytest.approx(2.5)  # found in the same directory without being told
    assert web["throttled_periods_total"] == 32
    assert payload["node"]["capacity_mcpu"] == 2000


def test_separate_v1_mounts_are_found_under_a_copied_sys_fs_cgroup(tmp_path: Path):
    sys_fs_cgroup = tmp_path / "sys-fs-cgroup"
    write_files(
        sys_fs_cgroup / "unified", {"cgroup.controllers": fixture_text("v2-linux-6.18-root/cgroup.controllers")}
    )
    write_files(sys_fs_cgroup / "cpu", {"cpu.shares": "1024\n", "cpu.stat": "nr_periods 0\n"})
    write_files(sys_fs_cgroup / "cpuacct", {"cpuacct.usage": "1\n"})

    roots = agent.resolve_cgroup_root(str(sys_fs_cgroup))

    # The hybrid layout's unified tree has only hugetlb: cpu is on v1, cpuacct a separate hierarchy.
    assert roots == agent.CgroupRoots(1, str(sys_fs_cgroup / "cpu"), str(sys_fs_cgroup / "cpuacct"), None)


def test_a_directory_without_a_cpu_controller_is_refused_with_its_path(tmp_path: Path):
    write_files(tmp_path, {"cgroup.controllers": "hugetlb\n"})
    with pytest.raises(agent.CgroupSetupError, match=str(tmp_path)):
        agent.resolve_cgroup_root(str(tmp_path))


def test_v1_and_v2_roots_together_are_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="not both"):
        agent.collect(str(tmp_path), cgroup_root_v2=str(tmp_path))


# ---------------------------------------------------------------------------------------------------------------------
# Bad and vanishing cgroups.


def test_bad_cgroups_are_reported_and_the_others_still_collected(tmp_path: Path):
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    invalid = root / container_path("cgroupfs", "Burstable", UID_BURSTABLE, container_id("invalid"))
    overflow = root / container_path("cgroupfs", "Burstable", UID_BURSTABLE, container_id("overflow"))
    bad_max = root / container_path("cgroupfs", "Burstable", UID_BURSTABLE, container_id("bad-max"))
    write_files(invalid, {"cpu.stat": fixture_text("v1-runc-invalid/cpu.stat"), "cgroup.threads": ""})
    write_files(overflow, {"cpu.stat": fixture_text("v1-runc-overflow/cpu.stat"), "cgroup.threads": ""})
    write_files(bad_max, {"cpu.stat": "usage_usec 1\n", "cpu.max": "lots 100000\n", "cgroup.threads": ""})

    payload = agent.collect(cgroup_root_v2=str(root))

    errors = payload["errors"]
    assert len(errors) == 3
    (invalid_error,) = [error for error in errors if str(invalid) in error]
    (overflow_error,) = [error for error in errors if str(overflow) in error]
    (bad_max_error,) = [error for error in errors if str(bad_max) in error]
    assert f"{invalid}/cpu.stat" in invalid_error and "throttled_time fortytwo" in invalid_error
    assert f"{overflow}/cpu.stat" in overflow_error and "18446744073709551615" in overflow_error
    assert f"{bad_max}/cpu.max" in bad_max_error and "'lots'" in bad_max_error
    ids = {row["container_id"] for row in payload["containers"]}
    assert container_id("web") in ids and container_id("batch") in ids
    assert not ids & {container_id("invalid"), container_id("overflow"), container_id("bad-max")}


def test_a_container_that_vanishes_mid_read_is_skipped_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    web_dir = root / container_path("cgroupfs", "Burstable", UID_BURSTABLE, container_id("web"))
    real_read = agent._read_text

    def container_exits_while_read(path: str) -> str:
        if path == str(web_dir / "cpu.stat"):
            shutil.rmtree(web_dir)  # what the kernel does when the container's last process exits
            raise FileNotFoundError(2, "No such file or directory", path)
        return real_read(path)

    monkeypatch.setattr(agent, "_read_text", container_exits_while_read)
    payload = agent.collect(cgroup_root_v2=str(root))

    assert payload["errors"] == []
    ids = {row["container_id"] for row in payload["containers"]}
    assert container_id("web") not in ids
    assert {container_id("batch"), container_id("db")} <= ids


def test_a_dying_cgroup_answering_esrch_is_skipped_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    batch_stat = root / container_path("cgroupfs", "BestEffort", UID_BESTEFFORT, container_id("batch")) / "cpu.stat"
    real_read = agent._read_text

    def dying(path: str) -> str:
        if path == str(batch_stat):
            raise ProcessLookupError(3, "No such process", path)
        return real_read(path)

    monkeypatch.setattr(agent, "_read_text", dying)
    payload = agent.collect(cgroup_root_v2=str(root))

    assert payload["errors"] == []
    assert container_id("batch") not in {row["container_id"] for row in payload["containers"]}


def test_a_missing_cpu_stat_in_a_cgroup_that_still_exists_is_an_error_not_a_silent_skip(tmp_path: Path):
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    batch_dir = root / container_path("cgroupfs", "BestEffort", UID_BESTEFFORT, container_id("batch"))
    (batch_dir / "cpu.stat").unlink()

    payload = agent.collect(cgroup_root_v2=str(root))

    assert len(payload["errors"]) == 1
    assert str(batch_dir / "cpu.stat") in payload["errors"][0]


# ---------------------------------------------------------------------------------------------------------------------
# Mount table and node facts.

# The cgroup lines of this machine's /proc/self/mountinfo (hybrid: v1 cpu and cpuacct mounted apart, cgroup2 with
# only hugetlb at /sys/fs/cgroup/unified), with the mount points moved under a test directory.
MOUNTINFO_SEPARATE = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
31 23 0:28 / {base} rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / {base}/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / {base}/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / {base}/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / {base}/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / {base}/unified rw,relatime - cgroup2 cgroup2 rw
"""

MOUNTINFO_COMBINED = """\
25 21 0:22 / {base}/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,cpuacct,cpu
26 21 0:23 / {base}/cpuset rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,cpuset
"""

MOUNTINFO_V2 = """\
29 23 0:26 / {base} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""


def write_mountinfo(tmp_path: Path, template: str, base: Path) -> str:
    path = tmp_path / "mountinfo"
    path.write_text(template.format(base=base))
    return str(path)


def test_mount_table_with_separate_cpu_and_cpuacct_mounts(tmp_path: Path):
    base = tmp_path / "cg"
    write_files(base / "unified", {"cgroup.controllers": "hugetlb\n"})
    roots = agent.find_cgroup_roots(write_mountinfo(tmp_path, MOUNTINFO_SEPARATE, base))
    assert roots == agent.CgroupRoots(1, f"{base}/cpu", f"{base}/cpuacct", f"{base}/cpuset/cpuset.effective_cpus")


def test_mount_table_with_cpuacct_cpu_combined_mount(tmp_path: Path):
    base = tmp_path / "cg"
    roots = agent.find_cgroup_roots(write_mountinfo(tmp_path, MOUNTINFO_COMBINED, base))
    assert roots == agent.CgroupRoots(
        1, f"{base}/cpu,cpuacct", f"{base}/cpu,cpuacct", f"{base}/cpuset/cpuset.effective_cpus"
    )


def test_mount_table_with_cgroup2_listing_cpu(tmp_path: Path):
    base = tmp_path / "cg"
    write_files(base, {"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"})
    roots = agent.find_cgroup_roots(write_mountinfo(tmp_path, MOUNTINFO_V2, base))
    assert roots == agent.CgroupRoots(2, str(base), None, f"{base}/cpuset.cpus.effective")


def test_mount_table_without_cpu_controller_is_refused(tmp_path: Path):
    base = tmp_path / "cg"
    write_files(base, {"cgroup.controllers": "hugetlb\n"})
    with pytest.raises(agent.CgroupSetupError, match="no cgroup v1 or v2 mount with the cpu controller"):
        agent.find_cgroup_roots(write_mountinfo(tmp_path, MOUNTINFO_V2, base))


def test_mount_points_with_escaped_spaces_are_unescaped():
    (mount,) = agent.parse_mountinfo(
        "32 31 0:29 / /host/sys\\040fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    )
    assert mount.mount_point == "/host/sys fs/cgroup/cpu"
    assert "cpu" in mount.super_options


def test_node_facts_come_from_proc_sys_and_the_root_cpuset(tmp_path: Path):
    write_files(tmp_path / "proc/sys/kernel", {"sched_cfs_bandwidth_slice_us": "5000\n"})
    write_files(tmp_path / "sys/devices/system/cpu/cpu0/cpufreq", {"scaling_governor": "performance\n"})
    write_files(tmp_path, {"cpuset.cpus.effective": "0-3,8\n"})

    facts = agent.read_node_facts(
        "node-c",
        cpuset_cpus_file=str(tmp_path / "cpuset.cpus.effective"),
        proc_root=str(tmp_path / "proc"),
        sys_root=str(tmp_path / "sys"),
    )

    assert facts == {
        "name": "node-c",
        "kernel_version": os.uname().release,
        "capacity_mcpu": 5000,  # CPUs 0, 1, 2, 3 and 8
        "cfs_slice_us": 5000,
        "cpufreq_governor": "performance",
    }


def test_node_without_cpufreq_slice_or_cpuset_reports_empty_governor_and_os_cpu_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("NODE_NAME", raising=False)
    facts = agent.read_node_facts(
        cpuset_cpus_file=str(tmp_path / "missing"), proc_root=str(tmp_path), sys_root=str(tmp_path)
    )
    assert facts["cpufreq_governor"] == ""
    assert facts["cfs_slice_us"] is None
    assert facts["capacity_mcpu"] == (os.cpu_count() or 0) * 1000
    assert facts["name"] == socket.gethostname()


def test_node_name_comes_from_the_option_then_node_name_env_then_hostname(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NODE_NAME", "from-env")
    assert agent.read_node_facts("from-option")["name"] == "from-option"
    assert agent.read_node_facts()["name"] == "from-env"


def test_this_machines_node_facts_are_read_from_the_real_files():
    facts = agent.read_node_facts("here")
    slice_file = Path("/proc/sys/kernel/sched_cfs_bandwidth_slice_us")
    expected_slice = int(slice_file.read_text()) if slice_file.exists() else None
    assert facts["cfs_slice_us"] == expected_slice
    assert facts["kernel_version"] == os.uname().release


def test_collected_at_is_iso_8601_utc(tmp_path: Path):
    from datetime import UTC, datetime, timedelta, timezone

    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    paris_summer = timezone(timedelta(hours=2))
    payload = agent.collect(cgroup_root_v2=str(root), now=datetime(2025, 6, 1, 14, 0, 0, tzinfo=paris_summer))
    assert payload["collected_at"] == "2025-06-01T12:00:00.000+00:00"
    assert datetime.fromisoformat(payload["collected_at"]) == datetime(2025, 6, 1, 12, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------------------------------
# Pushing to a real HTTP server on 127.0.0.1 (tests/agent/conftest.py).


def test_push_posts_the_payload_as_json_with_the_token_header(tmp_path: Path, ingest_server: IngestServer):
    payload = agent.collect(cgroup_root_v2=str(build_v2_tree(tmp_path / "cgroup", "cgroupfs")), node_name="node-a")

    assert agent.push(payload, ingest_server.url, "s3cret-token") is True

    (request,) = ingest_server.requests
    assert request.path == "/api/v1/ingest/"
    assert request.headers["Authorization"] == "Token s3cret-token"
    assert request.headers["Content-Type"] == "application/json"
    sent = json.loads(request.body)
    assert sent == payload
    assert_payload_shape(sent)
    assert len(sent["containers"]) == 6


def test_push_keeps_a_path_prefix_of_the_server_url(ingest_server: IngestServer):
    assert agent.push({"containers": []}, f"{ingest_server.url}/cputune/", "t") is True
    assert ingest_server.requests[0].path == "/cputune/api/v1/ingest/"


def test_push_retries_a_server_error_then_succeeds(ingest_server: IngestServer, caplog: pytest.LogCaptureFixture):
    ingest_server.script = [500, 200]

    assert agent.push({"containers": []}, ingest_server.url, "t", backoff_s=0.01) is True

    assert len(ingest_server.requests) == 2
    assert "failed (attempt 1 of 4): HTTP 500" in caplog.text


def test_push_does_not_retry_a_rejected_token(ingest_server: IngestServer, caplog: pytest.LogCaptureFixture):
    ingest_server.script = [401]

    assert agent.push({"containers": []}, ingest_server.url, "wrong", backoff_s=0.01) is False

    assert len(ingest_server.requests) == 1
    assert "rejected, not retrying: HTTP 401" in caplog.text
    assert "wrong" not in caplog.text  # the token never reaches the log


def test_push_gives_up_after_the_attempts_and_says_so(ingest_server: IngestServer, caplog: pytest.LogCaptureFixture):
    ingest_server.script = [503, 503, 503]

    assert agent.push({"containers": []}, ingest_server.url, "t", attempts=3, backoff_s=0.01) is False

    assert len(ingest_server.requests) == 3
    assert "gave up pushing" in caplog.text


def test_push_to_a_hanging_server_times_out(ingest_server: IngestServer, caplog: pytest.LogCaptureFixture):
    ingest_server.script = ["hang", "hang"]
    started = time.monotonic()

    pushed = agent.push({"containers": []}, ingest_server.url, "t", timeout_s=0.3, attempts=2, backoff_s=0.01)

    elapsed_s = time.monotonic() - started
    assert pushed is False
    assert len(ingest_server.requests) == 2
    assert elapsed_s < 3.0  # two 0.3 s timeouts, not the server's 10 s hang
    assert "no answer within 0.3 s" in caplog.text


def test_push_to_a_closed_port_fails_with_a_clear_log_line(caplog: pytest.LogCaptureFixture):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert agent.push({"containers": []}, f"http://127.0.0.1:{port}", "t", attempts=2, backoff_s=0.01) is False
    assert "cannot connect" in caplog.text


def test_push_refuses_a_server_url_that_is_not_http():
    with pytest.raises(ValueError, match="'file:///etc/passwd' is not an http"):
        agent.push({}, "file:///etc/passwd", "t")


# ---------------------------------------------------------------------------------------------------------------------
# main(), the management command, and the module shipped alone.


def test_main_once_collects_and_pushes_then_exits_zero(tmp_path: Path, ingest_server: IngestServer):
    root = build_v2_tree(tmp_path / "cgroup", "systemd")

    status = agent.main(
        ["--server", ingest_server.url, "--token", "t", "--cgroup-root", str(root), "--once", "--node", "n1"]
    )

    assert status == 0
    sent = json.loads(ingest_server.requests[0].body)
    assert sent["node"]["name"] == "n1"
    assert sent["node"]["capacity_mcpu"] == 4000
    assert len(sent["containers"]) == 6


def test_main_once_exits_one_when_the_push_fails(tmp_path: Path, ingest_server: IngestServer):
    ingest_server.script = [500]
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    argv = ["--server", ingest_server.url, "--token", "t", "--cgroup-root", str(root), "--once", "--attempts", "1"]
    assert agent.main(argv) == 1


def test_main_exits_two_without_a_cpu_controller(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    assert agent.main(["--server", "http://127.0.0.1:9", "--token", "t", "--cgroup-root", str(tmp_path)]) == 2
    assert f"cannot start: no cpu controller under {tmp_path}" in caplog.text


def test_management_command_runs_the_agent(tmp_path: Path, ingest_server: IngestServer):
    from django.core.management import CommandError, call_command

    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    call_command("agent", "--server", ingest_server.url, "--token", "t", "--cgroup-root", str(root), "--once")
    assert len(json.loads(ingest_server.requests[0].body)["containers"]) == 6

    with pytest.raises(CommandError, match="status 2"):
        call_command("agent", "--server", ingest_server.url, "--token", "t", "--cgroup-root", str(tmp_path / "none"))


def test_the_agent_module_imports_only_the_standard_library():
    tree = ast.parse(AGENT_FILE.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports would tie the agent to the project"
            imported.add((node.module or "").split(".")[0])
    assert imported - sys.stdlib_module_names - {"__future__"} == set()


def test_the_agent_file_runs_alone_and_stops_cleanly_on_sigterm(tmp_path: Path, ingest_server: IngestServer):
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    lone_copy = tmp_path / "image" / "agent.py"  # as in the DaemonSet image: the file and nothing of the project
    lone_copy.parent.mkdir()
    shutil.copy(AGENT_FILE, lone_copy)
    process = subprocess.Popen(
        [
            *(sys.executable, "-I", str(lone_copy), "--server", ingest_server.url, "--token", "t"),
            *("--cgroup-root", str(root), "--interval", "60", "--node", "lone"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not ingest_server.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert ingest_server.requests, "the agent never pushed"
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=10)  # the 60 s interval must not delay the exit
        _stdout, stderr = process.communicate(timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert status == 0, stderr
    assert "received SIGTERM, stopping" in stderr
    assert json.loads(ingest_server.requests[0].body)["node"]["name"] == "lone"


@pytest.mark.parametrize(("option", "value"), [("--attempts", "0"), ("--interval", "-1"), ("--timeout", "0")])
def test_main_refuses_options_that_would_never_push(option: str, value: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        agent.main(["--server", "http://127.0.0.1:9", "--token", "t", option, value])
    assert exited.value.code == 2
    assert f"{value!r} is not a positive" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------------
# Period sampling: the accounting and the choice (the sampler on a real throttled cgroup is in the real-cgroup file).


@pytest.mark.parametrize(
    ("new_periods", "new_throttled", "throttled_us", "expected"),
    [
        (1, 1, 80_000, [80_000]),  # the usual poll: one period counted, throttled, its time read whole
        (1, 0, 0, [0]),
        (3, 2, 5, [3, 2, 0]),  # a poll that missed periods: the throttled ones share the time
        (2, 0, 100, [100, 0]),  # time with no throttled period counted: one period had it
        (2, 2, 0, [0, 0]),
        (2, 5, 10, [5, 5]),  # more throttled than counted (never from the kernel): capped at the periods
        (0, 0, 50, []),  # no period counted: the time waits for the next one
    ],
)
def test_a_poll_s_throttled_time_is_split_over_the_periods_it_saw(new_periods, new_throttled, throttled_us, expected):
    figures = agent.split_throttled_us(new_periods, new_throttled, throttled_us)
    assert figures == expected
    assert sum(figures) == (throttled_us if new_periods else 0)


def test_a_period_sample_is_sent_as_its_periods_and_the_figures_of_the_throttled_ones():
    sample = agent.PeriodSample(5.0004, (0, 80_000, 0, 0, 79_500))
    assert sample.summary() == {"seconds": 5.0, "periods": 5, "throttled_us": [80_000, 79_500]}


def test_the_sampler_picks_the_most_throttled_since_the_previous_collection():
    previous = {"a": (100, 10), "b": (100, 0), "c": (100, 50), "d": (100, 0), "reset": (900, 900)}
    current = {
        "a": (200, 40),  # 30 of 100: 0.30
        "b": (200, 5),  # 0.05: not above 0.05
        "c": (300, 190),  # 0.70
        "d": (100, 0),  # no period since: no ratio
        "reset": (10, 10),  # counters went back (a restart): no ratio across it
        "new": (50, 50),  # first seen: nothing to compare with
    }
    assert agent.pick_throttled(current, previous, 0.05, 16) == ["c", "a"]
    assert agent.pick_throttled(current, previous, 0.05, 1) == ["c"]
    assert agent.pick_throttled(current, previous, 0.0, 16) == ["c", "a", "b"]
    assert agent.pick_throttled(current, {}, 0.0, 16) == []


def test_a_cgroup_that_is_gone_is_left_out_of_the_samples(tmp_path: Path):
    gone = tmp_path / "gone"
    write_files(gone, {"cpu.stat": "nr_periods 5\nnr_throttled 1\nthrottled_usec 10\n"})
    stays = tmp_path / "stays"
    write_files(stays, {"cpu.stat": "nr_periods 5\nnr_throttled 1\nthrottled_usec 10\n"})
    shutil.rmtree(gone)
    samples = agent.sample_periods({"gone": str(gone), "stays": str(stays)}, 0.05)
    assert set(samples) == {"stays"}
    assert samples["stays"].throttled_us == () and samples["stays"].seconds >= 0.05
    summary = samples["stays"].summary()
    assert (summary["periods"], summary["throttled_us"]) == (0, [])


def test_collect_alone_never_samples(tmp_path: Path):
    payload = agent.collect(cgroup_root_v2=str(build_v2_tree(tmp_path / "cgroup", "cgroupfs")), node_name="node-a")
    assert "sampler_cpu_seconds" not in payload
    assert all("period_sample" not in row for row in payload["containers"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--interval", "4", "--period-sample-seconds", "5"],
            "--period-sample-seconds 5 must be less than --interval 4",
        ),
        (["--interval", "60", "--period-sample-seconds", "31"], "--period-sample-seconds 31 is outside 0 to 30"),
        (["--period-sample-above", "1"], "--period-sample-above 1 is not a throttle ratio"),
        (["--period-sample-max", "65"], "--period-sample-max 65 is outside 1 to 64"),
    ],
)
def test_main_refuses_period_sampling_it_cannot_do(options: list[str], message: str, caplog: pytest.LogCaptureFixture):
    # --once: were the options let through, the agent would push once to a closed port and exit 1, not hang.
    assert agent.main(["--server", "http://127.0.0.1:9", "--token", "t", "--once", "--attempts", "1", *options]) == 2
    assert f"cannot start: {message}" in caplog.text


def test_period_sampling_can_be_turned_off_and_then_fits_any_interval():
    parser_options = {"server": "http://x", "token": "t", "interval": 1.0, "period_sample_seconds": 0.0}
    options = agent.AgentOptions.from_mapping(parser_options)
    assert options.period_sample_seconds == 0 and options.problem() is None
    assert agent.AgentOptions.from_mapping({"server": "http://x", "token": "t"}).period_sample_seconds == 5.0
