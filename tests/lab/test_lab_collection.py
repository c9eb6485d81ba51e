"""The lab read by the real collection path: stored throttle ratios equal the kernel's own cpu.stat, the expected
advice appears, and `lab down` leaves nothing behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.advisor.models import Finding
from apps.clusters.models import Cluster
from apps.collector.services import collect_once
from apps.lab import cgroups, runtime
from apps.telemetry.models import Sample

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def kernel_counters(cpu_dir: str) -> tuple[int, int]:
    stat = cgroups.read_cpu_stat(cpu_dir)
    return stat["nr_periods"], stat["nr_throttled"]


@pytest.fixture()
def lab(settings, tmp_path: Path, lab_root: str):
    settings.DATA_DIR = tmp_path
    settings.CPUTUNE_LAB_ROOT = lab_root
    settings.CPUTUNE_COLLECT_INTERVAL = 5
    call_command("lab", "up")
    yield runtime.lab_inventory(tmp_path / "lab")
    call_command("lab", "down")


def test_stored_ratio_equals_the_kernels_and_the_advice_follows(lab, settings):
    cluster = Cluster.objects.get(name="lab")
    watched = {(c.namespace, c.pod, c.container): c.cpu_dir for c in lab.containers if c.limit_mcpu}
    time.sleep(1)
    before = {key: kernel_counters(d) for key, d in watched.items()}
    collect_once(cluster)
    time.sleep(6)
    collect_once(cluster)
    after = {key: kernel_counters(d) for key, d in watched.items()}

    checked = 0
    for namespace, pod, container in watched:
        sample = Sample.objects.filter(
            container__pod__cluster=cluster, container__pod__namespace=namespace, container__pod__name=pod,
            container__name=container, periods_delta__isnull=False,
        ).get()  # fmt: skip
        kernel_periods = after[(namespace, pod, container)][0] - before[(namespace, pod, container)][0]
        kernel_throttled = after[(namespace, pod, container)][1] - before[(namespace, pod, container)][1]
        assert sample.periods_delta is not None and sample.throttled_periods_delta is not None
        # The stored interval lies inside the test's bracketing reads, each a fraction of a second outside it.
        assert sample.periods_delta <= kernel_periods
        assert kernel_periods - sample.periods_delta <= 30, (container, sample.periods_delta, kernel_periods)
        if sample.periods_delta >= 40:
            stored_ratio = sample.throttled_periods_delta / sample.periods_delta
            kernel_ratio = kernel_throttled / kernel_periods
            slack = 30 / sample.periods_delta  # a period's worth at each end of every read
            assert abs(stored_ratio - kernel_ratio) <= slack, (container, stored_ratio, kernel_ratio)
            checked += 1
    assert checked >= 4

    kinds: set[str] = set()
    for finding in Finding.objects.filter(cluster=cluster, window="1h"):
        kinds.update(r["kind"] for r in finding.recommendations)
    # One plan per container: under the lab's CPU manager policy (none) whole cores would only round a raise up, so
    # report-builder gets raise_limit (docs/domain.md#one-plan).
    assert {"raise_limit", "cut_threads", "add_threads", "set_request"} <= kinds
    healthy = Finding.objects.get(cluster=cluster, window="1h", container__pod__name__startswith="frontend")
    assert healthy.recommendations == [] and healthy.throttle_ratio is not None


def test_lab_down_leaves_no_cgroup_and_no_process(settings, tmp_path: Path, lab_root: str, controller):
    settings.DATA_DIR = tmp_path
    settings.CPUTUNE_LAB_ROOT = lab_root
    call_command("lab", "up")
    pids = [pid for c in runtime.lab_inventory(tmp_path / "lab").containers for pid in c.pids]
    assert pids and all(os.path.exists(f"/proc/{pid}") for pid in pids)

    call_command("lab", "down")

    time.sleep(0.5)
    assert not any(os.path.exists(f"/proc/{pid}") and "apps.lab.workloads" in _cmdline(pid) for pid in pids)
    for mount in {controller.cpu_mount, controller.cpuacct_mount} - {None}:
        assert not os.path.exists(os.path.join(mount, lab_root))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
