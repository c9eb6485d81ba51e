"""`manage.py lab verify` on real cgroups: the advisor's plan for a CPU burner under 200m, applied, measured."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.lab import cgroups
from apps.lab.cgroups import CpuController

SCENARIO = """\
description: one burner under a 200m limit
pods:
  - namespace: shop
    name: checkout-0
    workload_kind: Deployment
    workload_name: checkout
    containers:
      - name: app
        request: 200m
        limit: 200m
        workload: {kind: burner, params: {processes: 1}}
"""


@pytest.fixture
def controller() -> CpuController:
    detected = cgroups.detect_cpu_controller()
    ok, reason = cgroups.can_run_lab("cputune-verify-check", detected)
    if not ok or detected is None:
        pytest.skip(f"the lab cannot run here: {reason}")
    return detected


def test_lab_verify_applies_the_raise_and_the_kernel_says_it_worked(controller, tmp_path, capsys) -> None:
    scenario = tmp_path / "one.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "outcomes.json"
    call_command("verify_advice", seconds=3, scenario=str(scenario), json_path=str(out))
    printed = capsys.readouterr().out
    assert "shop/checkout-0/app" in printed and "raise_limit" in printed
    (outcome,) = json.loads(out.read_text())[
        "outcomes"
    ]  # 2 CPUs: whole cores would be the node's, so no static-policy row
    # One spinning process under 20 ms per 100 ms is throttled in (nearly) every period.
    assert outcome["ratio_before"] > 0.9
    assert outcome["plan"][0] == "raise_limit" and outcome["applied"]
    # It wants one CPU: each throttled period shows ~80 ms of throttled time, so the smallest limit under the target
    # is a little over 1,000m and at most the 2,000m that the threads (or this node's CPUs) could use.
    assert 1000 <= outcome["limit_after_mcpu"] <= 2000
    assert outcome["expected_ratio_max"] is not None and outcome["expected_basis"]
    # The kernel's own counters after the change: under the 10 % target and inside the stated bound.
    assert outcome["ratio_after"] <= 0.10
    assert outcome["ratio_after"] <= outcome["expected_ratio_max"] + 1e-9
    # Not padded: two thirds of the suggestion leaves it throttled above the target.
    assert outcome["lower_limit_mcpu"] < outcome["limit_after_mcpu"]
    assert outcome["ratio_at_lower_limit"] > 0.10
    # Throttled, the request loop beside it waited for the next period; with the raise it answers at once.
    # A request due while the quota is spent waits for the next period (tens of ms), counted from when it was due.
    assert outcome["latency_p95_before_ms"] > 20
    assert outcome["latency_p95_after_ms"] < outcome["latency_p95_before_ms"]
    # Only this process's runs: another run of the suite on the machine may have its own there right now.
    assert not list(Path(controller.cpu_dir("cputune-verify")).glob(f"*-{os.getpid()}"))


def test_lab_verify_is_reached_from_the_lab_command_and_refuses_a_silly_length(controller, tmp_path) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"--seconds 0\.5 is outside"):
        call_command("lab", "verify", seconds=0.5)


def test_whole_cores_are_pinned_with_the_cpuset_controller(controller) -> None:
    from apps.verify.runner import CPUSET_MOUNT, measure

    if not Path(CPUSET_MOUNT, "cpuset.cpus").is_file():
        pytest.skip("no cgroup v1 cpuset controller here")
    # Two spinning processes and no quota: free, they use both CPUs; pinned to one, they share it.
    free = measure(controller, "burner", {"processes": 2}, None, 100_000, 1024, 2, name="free")
    pinned = measure(controller, "burner", {"processes": 2}, None, 100_000, 1024, 2, name="pinned", pinned_cpus=1)
    assert free.usage_mcpu > 1600
    assert 850 < pinned.usage_mcpu < 1100
    assert not list(Path(CPUSET_MOUNT, "cputune-verify").glob(f"*-{os.getpid()}"))  # this run's cpusets
