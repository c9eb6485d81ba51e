"""A thread count's new level is a change (docs/domain.md#thread-changes): found by the refresh in the samples it
reads, once, with the readings before and after it as its windows; noise around a level is not a change."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from apps.advisor.change_effect import thread_level_change
from apps.advisor.changes import change_rows, changes_of
from apps.advisor.services import refresh_part
from apps.clusters.models import Cluster, ContainerChange
from apps.telemetry.ingest import ingest, ingest_readings
from apps.telemetry.readings import Batch, ContainerInfo, CounterReading, NodeInfo, PodInfo


def readings(counts: list[int | None], start: datetime | None = None) -> list[tuple[datetime, int | None]]:
    start = start or datetime(2026, 12, 1, 12, 0).astimezone()
    return [(start + timedelta(minutes=i), n) for i, n in enumerate(counts)]


def test_a_step_down_is_found_at_its_first_reading_with_the_levels_on_both_sides():
    found = thread_level_change(readings([9, 9, 10, 9, 9, 9, 3, 3, 3, 3]))
    assert found is not None
    assert (found.before, found.after) == (9, 3)
    assert found.at - found.since == timedelta(minutes=1) and found.at == readings([0] * 7)[6][0]


def test_a_step_up_is_found_and_readings_not_taken_are_left_out():
    found = thread_level_change(readings([4, None, 4, 0, 4, 4, 5, 4, 12, 12, 13]))
    assert found is not None and (found.before, found.after) == (4, 12)


@pytest.mark.parametrize(
    "counts",
    [
        [40, 44, 38, 47, 41, 45, 39, 48, 43, 46, 40, 44],  # a thread pool breathing around its level
        [8, 8, 8, 8, 8, 30, 8, 8, 8, 8],  # one reading's spike
        [8, 8, 8, 8, 8, 20, 21],  # a new level not yet held THREADS_AFTER readings
        [4, 4, 4, 4, 4, 6, 6, 6],  # 2 threads more: within the allowance
        [8, 8, 8, 8, 8, 10, 10, 10, 3],  # the same, with one far reading that makes the whole range wide
        [9, 9, 9, 3, 3, 3, 3],  # too few readings before it to know the level
    ],
)
def test_noise_and_what_is_not_held_long_enough_are_no_change(counts):
    assert thread_level_change(readings(counts)) is None


def _pod() -> PodInfo:
    container = ContainerInfo(name="indexer", container_id="b" * 64, request_mcpu=100, limit_mcpu=200)
    return PodInfo(namespace="shop", name="search-0", uid="u2", node="n1", qos_class="Burstable",
                   workload_kind="StatefulSet", workload_name="search", containers=(container,))  # fmt: skip


def _series(cluster: Cluster, start: datetime, minutes: int, threads_at: int, level: tuple[int, int]) -> None:
    """A reading a minute; `level` threads before minute `threads_at`, after it; throttled 90% before, 20% after."""
    out, periods, throttled, usage = [], 0, 0, 0.0
    for m in range(minutes + 1):
        periods += 600
        throttled += 540 if m < threads_at else 120 if m > threads_at else 300
        usage += 12.0
        out.append(CounterReading(namespace="shop", pod="search-0", container="indexer",
                                  ts=start + timedelta(minutes=m), periods_total=periods,
                                  throttled_periods_total=throttled, throttled_seconds_total=throttled * 0.02,
                                  usage_seconds_total=usage, threads=level[0] if m < threads_at else level[1],
                                  period_us=100_000, node="n1"))  # fmt: skip
    ingest_readings(cluster, out, now=start + timedelta(minutes=minutes))


@pytest.fixture()
def stepped(settings, db) -> tuple[Cluster, datetime, datetime]:
    """A container listed once, then an hour of readings: 9 threads, 3 from minute 25 on; 20-minute windows.
    Returns the cluster, the first reading's instant and now (the last's)."""
    settings.CPUTUNE_CHANGE_WINDOW = 20 * 60
    now = timezone.now().replace(second=0, microsecond=0)
    start = now - timedelta(minutes=50)
    cluster = Cluster.objects.create(name="c")
    ingest(cluster, Batch(nodes=[NodeInfo(name="n1", capacity_mcpu=4000)], pods=[_pod()]), now=start)
    _series(cluster, start, 50, threads_at=25, level=(9, 3))
    return cluster, start, now


def test_the_refresh_records_a_thread_count_once_with_its_effect(stepped):
    cluster, start, now = stepped

    refresh_part(cluster, None, now=now, windows=["1h"])
    refresh_part(cluster, None, now=now + timedelta(seconds=30), windows=["1h"])  # the next refresh: not again
    [change] = ContainerChange.objects.all()
    assert (change.kind, change.before, change.after) == ("threads", "9", "3")
    assert change.seen_at == start + timedelta(minutes=25) and change.since == start + timedelta(minutes=24)
    assert change.group == change

    [row] = change_rows(changes_of(cluster, "shop", now - timedelta(hours=2)), now=now)
    # 20 minutes on each side, the 20 intervals wholly inside each (minutes 4–24 and 25–45); the reading at minute
    # 25 spans the change and is in neither window.
    assert row["window_seconds"] == 1200 and row["before_periods"] == row["after_periods"] == 20 * 600
    assert row["before_throttle_ratio"] == pytest.approx(0.9) and row["after_throttle_ratio"] == pytest.approx(0.2)
    assert row["verdict"] == "improved"


def _inventory(cluster: Cluster, at: datetime, restarts: int) -> None:
    pod = _pod()
    pod = replace(pod, containers=(replace(pod.containers[0], restarts=restarts),))
    ingest(cluster, Batch(nodes=[NodeInfo(name="n1", capacity_mcpu=4000)], pods=[pod]), now=at)


@pytest.fixture()
def restarted(settings, db) -> tuple[Cluster, datetime, datetime]:
    """As `stepped`, with the container restarted (seen between minutes 24 and 25) when its threads went 9 → 3."""
    settings.CPUTUNE_CHANGE_WINDOW = 20 * 60
    now = timezone.now().replace(second=0, microsecond=0)
    start = now - timedelta(minutes=50)
    cluster = Cluster.objects.create(name="c")
    _inventory(cluster, start, 0)
    _inventory(cluster, start + timedelta(minutes=23, seconds=30), 0)
    _series(cluster, start, 50, threads_at=25, level=(9, 3))
    _inventory(cluster, start + timedelta(minutes=24, seconds=30), 1)  # restarted with fewer threads
    return cluster, start, now


def test_a_restart_that_brings_a_new_thread_count_is_one_change(restarted):
    cluster, start, now = restarted
    refresh_part(cluster, None, now=now, windows=["1h"])

    [row] = change_rows(changes_of(cluster, "shop", now - timedelta(hours=2)), now=now)
    # The restart, seen first, stands for the change (its id does not move); the thread count found three samples
    # later joins it, as it may have come at the same moment.
    assert (row["kind"], row["before"], row["after"]) == ("restart", "0", "1")
    assert row["also_changed"] == [{"kind": "threads", "before": "9", "after": "3"}]
    # From the inventory before the restart to the first sample at the new level: 19 intervals before, 20 after.
    assert row["seen_until"] == start + timedelta(minutes=25)
    assert (row["before_periods"], row["after_periods"]) == (19 * 600, 20 * 600)


def _cut_threads_stood(cluster: Cluster, at: datetime) -> None:
    """The 1 h finding computed at `at`: cut the threads, expecting at most 25 % of periods throttled."""
    from apps.advisor.models import Finding
    from apps.clusters.models import Container

    Finding.objects.create(
        container=Container.objects.get(name="indexer"), cluster=cluster, namespace="shop", window="1h",
        computed_at=at, window_end=at,
        recommendations=[{"kind": "cut_threads", "severity": "warning", "summary": "Cut threads", "detail": "",
                          "suggested_request_mcpu": None, "suggested_limit_mcpu": None,
                          "expected_throttle_ratio_max": 0.25, "expected_basis": "with the limit at 200m"}],
    )  # fmt: skip


def test_fewer_threads_after_cut_threads_stood_is_that_advice_followed(stepped):
    cluster, start, now = stepped
    _cut_threads_stood(cluster, start + timedelta(minutes=20))
    refresh_part(cluster, None, now=now, windows=["1h"])  # finds the change, checks it, then replaces the finding

    [row] = change_rows(changes_of(cluster, "shop", now - timedelta(hours=2)), now=now)
    assert (row["kind"], row["followed_advice"], row["expected_throttle_ratio_max"]) == ("threads", "cut_threads", 0.25)
    assert row["verdict"] == "improved" and row["advice_worked"] is True  # 90% → 20%, at most 25% said


CUT = {"kind": "cut_threads", "summary": "Cut threads"}
ADD = {"kind": "add_threads", "summary": "Add threads"}


@pytest.mark.parametrize(
    ("kind", "before", "after", "plan", "followed_kind"),
    [
        ("threads", "9", "3", [CUT], "cut_threads"),
        ("threads", "3", "9", [CUT], None),  # more threads do not carry out a cut
        ("threads", "3", "9", [CUT, ADD], "add_threads"),
        ("env", "GOMAXPROCS=8", "GOMAXPROCS=2", [CUT], "cut_threads"),
        ("env", "", "GOMAXPROCS=2", [CUT], "cut_threads"),  # set where the runtime took every CPU
        ("env", "", "GOMAXPROCS=2", [ADD], "add_threads"),
        (
            "env",
            "JAVA_TOOL_OPTIONS=-XX:ActiveProcessorCount=2",
            "JAVA_TOOL_OPTIONS=-XX:ActiveProcessorCount=4",
            [CUT],
            None,
        ),
        (
            "env",
            "JAVA_TOOL_OPTIONS=-Xmx1g -XX:ActiveProcessorCount=2",
            "JAVA_TOOL_OPTIONS=-XX:ActiveProcessorCount=4",
            [ADD],
            "add_threads",
        ),
        ("env", "GOMAXPROCS=2", "", [CUT, ADD], None),  # a knob dropped sets nothing
    ],
)
def test_a_thread_count_or_a_runtimes_knob_carries_out_the_thread_advice_its_way(kind, before, after, plan,
                                                                                  followed_kind):  # fmt: skip
    from apps.advisor.advice_followed import followed
    from apps.advisor.facts import Policy

    rec = followed(kind, before, after, plan, Policy())
    assert (rec["kind"] if rec else None) == followed_kind


def test_a_step_just_beyond_the_allowance_is_a_new_level():
    found = thread_level_change(readings([8, 8, 8, 8, 8, 11, 11, 11]))  # 3 more than 8: the allowance is 2
    assert found is not None and (found.before, found.after) == (8, 11)


def test_fewer_threads_that_came_with_a_restart_are_checked_against_the_advice_too(restarted):
    cluster, start, now = restarted
    _cut_threads_stood(cluster, start + timedelta(minutes=20))
    refresh_part(cluster, None, now=now, windows=["1h"])  # the thread count joins the restart's group, then is checked

    [row] = change_rows(changes_of(cluster, "shop", now - timedelta(hours=2)), now=now)
    assert (row["kind"], row["followed_advice"], row["expected_throttle_ratio_max"]) == ("restart", "cut_threads", 0.25)
