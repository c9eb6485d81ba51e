"""Did the change work, on the lab's real cgroups: a container's limit raised, then its process count raised, each by
hand (`lab set`) between collections. Both show up as changes with their windows' figures inside the kernel's own
cpu.stat deltas (read by this test around every collection), and with the verdicts the kernel's throttling calls
for: one busy process under 200m is throttled in nearly every period, under 1,500m in none (it can use one CPU at
most), and four of them under 1,500m in nearly every period again."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.advisor.changes import change_rows, changes_of
from apps.advisor.models import Finding
from apps.clusters.models import Cluster, ContainerChange
from apps.collector.services import collect_once
from apps.lab import cgroups, runtime, services
from apps.telemetry.models import Sample

from .helpers import write_scenario

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# One process that always wants a whole CPU, under a 200m limit: throttled in nearly every period.
SCENARIO = """
node: {name: lab-node, allocatable: "2"}
pods:
  - namespace: shop
    name: worker-0
    workload_kind: StatefulSet
    workload_name: worker
    containers:
      - {name: app, request: 100m, limit: 200m, workload: {kind: burner, params: {processes: 1}}}
"""
TARGET = "shop/worker-0/app"
CYCLE_S = 2.0
WINDOW_S = 16  # CPUTUNE_CHANGE_WINDOW: 7 or 8 two-second intervals on each side


@dataclass
class Cycle:
    """One collection, with the kernel's counters read just before and just after it."""

    started: datetime
    ended: datetime
    before: tuple[int, int]  # nr_periods, nr_throttled
    after: tuple[int, int]


def counters(state_dir: Path) -> tuple[int, int]:
    [container] = runtime.lab_inventory(state_dir).containers
    stat = cgroups.read_cpu_stat(container.cpu_dir)
    return stat["nr_periods"], stat["nr_throttled"]


def collect(cluster: Cluster, state_dir: Path, cycles: list[Cycle], count: int) -> None:
    for _ in range(count):
        started, before = timezone.now(), counters(state_dir)
        collect_once(cluster)
        cycles.append(Cycle(started, timezone.now(), before, counters(state_dir)))
        time.sleep(max(0.0, CYCLE_S - (cycles[-1].ended - started).total_seconds()))


def kernel_bounds(cycles: list[Cycle], samples: list[Sample]) -> tuple[range, range]:
    """What the kernel counted over these samples' intervals, as bounds: each sample was read during one cycle,
    between the test's reads before and after it; the samples are consecutive, so their deltas sum to the counter
    at the last less the counter at the one before the first."""

    def cycle_of(sample: Sample) -> int:
        [index] = [i for i, c in enumerate(cycles) if c.started <= sample.ts <= c.ended]
        return index

    first, last = cycle_of(samples[0]), cycle_of(samples[-1])
    assert [cycle_of(s) for s in samples] == list(range(first, last + 1))
    low = [cycles[last].before[i] - cycles[first - 1].after[i] for i in (0, 1)]
    high = [cycles[last].after[i] - cycles[first - 1].before[i] for i in (0, 1)]
    return range(low[0], high[0] + 1), range(low[1], high[1] + 1)


def windows(change_id: int, row: dict) -> tuple[list[Sample], list[Sample]]:
    """The samples each window holds by the rule in docs/domain.md#change-effect: the intervals wholly inside
    [since - window, since] and [last seen, last seen + window]."""
    group = list(ContainerChange.objects.filter(group_id=change_id))
    since = min(c.since for c in group if c.since is not None)
    until = row["seen_until"]
    length = timedelta(seconds=row["window_seconds"])
    samples = list(Sample.objects.filter(container=group[0].container, interval_s__isnull=False).order_by("ts"))

    def start(s: Sample) -> datetime:
        return s.ts - timedelta(seconds=s.interval_s or 0)

    before = [s for s in samples if s.ts <= since and start(s) >= since - length]
    after = [s for s in samples if start(s) >= until and s.ts <= until + length]
    return before, after


def check_against_the_kernel(cycles: list[Cycle], row: dict, before: list[Sample], after: list[Sample]) -> None:
    for side, samples in (("before", before), ("after", after)):
        assert len(samples) >= 5, (side, len(samples))
        periods = sum(s.periods_delta or 0 for s in samples)
        throttled = sum(s.throttled_periods_delta or 0 for s in samples)
        assert row[f"{side}_periods"] == periods  # the row's figure is its window's samples'
        assert row[f"{side}_throttle_ratio"] == round(throttled / periods, 4)
        kernel_periods, kernel_throttled = kernel_bounds(cycles, samples)
        assert periods in kernel_periods and throttled in kernel_throttled, (side, periods, kernel_periods,
                                                                             throttled, kernel_throttled)  # fmt: skip


def test_a_raise_and_a_new_thread_count_made_by_hand_are_changes_with_the_kernels_figures(
    settings, tmp_path: Path, lab_root: str, controller
):
    if controller.version != 1:
        pytest.skip("the lab's cgroup v1 counters are what this test reads")
    settings.DATA_DIR = tmp_path
    settings.CPUTUNE_LAB_ROOT = lab_root
    settings.CPUTUNE_COLLECT_INTERVAL = 5
    settings.CPUTUNE_CHANGE_WINDOW = WINDOW_S
    call_command("lab", "up", "--scenario", str(write_scenario(tmp_path, SCENARIO)))
    state_dir = tmp_path / "lab"
    try:
        cluster = Cluster.objects.get(name="lab")
        cycles: list[Cycle] = []
        collect(cluster, state_dir, cycles, 10)
        plan = Finding.objects.get(cluster=cluster, window="1h").recommendations
        [advice] = [r for r in plan if r["kind"] == "raise_limit"]  # the advice that stood before the raise
        services.set_container(TARGET, limit="1500m")
        collect(cluster, state_dir, cycles, 11)
        services.set_container(TARGET, processes=4)  # a restart with 4 busy processes under the new limit
        collect(cluster, state_dir, cycles, 12)
    finally:
        call_command("lab", "down")

    rows = change_rows(changes_of(cluster, "shop", timezone.now() - timedelta(hours=1)))
    raise_row, restart_row = sorted(rows, key=lambda r: r["seen_at"])

    assert (raise_row["kind"], raise_row["before"], raise_row["after"]) == ("limit", "200", "1500")
    assert raise_row["also_changed"] == [] and raise_row["pods"] == 1
    check_against_the_kernel(cycles, raise_row, *windows(raise_row["change_id"], raise_row))
    assert raise_row["before_throttle_ratio"] > 0.9 > 0.05 > raise_row["after_throttle_ratio"]
    assert raise_row["verdict"] == "improved"
    # Checked against the advice that stood: carried out only if it suggested 1,500m within a step.
    followed = abs(advice["suggested_limit_mcpu"] - 1500) <= 50
    assert raise_row["followed_advice"] == ("raise_limit" if followed else None), advice

    # The restart and the thread count it brought (1 + 1 tasks → 1 + 4) are one change.
    assert (restart_row["kind"], restart_row["before"], restart_row["after"]) == ("restart", "0", "1")
    assert restart_row["also_changed"] == [{"kind": "threads", "before": "2", "after": "5"}]
    check_against_the_kernel(cycles, restart_row, *windows(restart_row["change_id"], restart_row))
    assert restart_row["after_throttle_ratio"] > restart_row["before_throttle_ratio"]
    assert restart_row["verdict"] == "worse"
