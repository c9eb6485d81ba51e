from __future__ import annotations

from datetime import timedelta

import pytest

from apps.clusters.models import Container, Pod
from apps.telemetry.ingest import ingest, ingest_readings
from apps.telemetry.models import Sample, SeriesHead
from apps.telemetry.readings import Batch, CounterReading
from tests import factories as f

pytestmark = pytest.mark.django_db


def stored(container: str = "c0") -> list[Sample]:
    return list(Sample.objects.filter(container__name=container).order_by("ts"))


def test_ingest_stores_inventory_and_first_reading_without_deltas():
    cluster = f.cluster()
    batch = Batch(
        nodes=[f.node_info()], pods=[f.pod_info()], readings=[f.reading(0, periods=100, throttled=10, usage_s=5.0)]
    )

    result = ingest(cluster, batch)

    assert result.samples_written == 1
    container = Container.objects.get(name="c0")
    assert container.pod.node is not None
    assert (container.request_mcpu, container.limit_mcpu, container.pod.node.name) == (250, 500, "node-a")
    (sample,) = stored()
    assert sample.periods_total == 100 and sample.periods_delta is None and sample.interval_s is None


def test_second_reading_stores_the_increase_since_the_first():
    cluster = f.cluster()
    ingest(cluster, Batch(pods=[f.pod_info()], readings=[f.reading(0, periods=100, throttled=10, usage_s=5.0)]))
    ingest(cluster, Batch(readings=[f.reading(1, periods=700, throttled=70, usage_s=32.0, throttled_s=3.5)]))

    second = stored()[1]
    assert second.interval_s == 60
    assert (second.periods_delta, second.throttled_periods_delta) == (600, 60)
    assert second.usage_seconds_delta == pytest.approx(27.0)
    assert second.reset is False


def test_ingesting_the_same_batch_twice_writes_once():
    cluster = f.cluster()
    batch = Batch(
        pods=[f.pod_info()],
        readings=[f.reading(m, periods=100 * (m + 1), throttled=m, usage_s=float(m)) for m in range(5)],
    )
    first = ingest(cluster, batch)
    again = ingest(cluster, batch)

    assert first.samples_written == 5
    assert again.samples_written == 0 and again.duplicates == 5
    assert Sample.objects.count() == 5
    assert [s.periods_delta for s in stored()] == [None, 100, 100, 100, 100]


def test_counter_reset_gives_a_non_negative_delta_equal_to_the_new_value():
    cluster = f.cluster()
    ingest(cluster, Batch(pods=[f.pod_info()], readings=[f.reading(0, periods=5000, throttled=900, usage_s=400.0)]))
    # The container restarted: new cgroup, counters start again from zero.
    ingest(cluster, Batch(readings=[f.reading(1, periods=40, throttled=3, usage_s=1.5)]))

    after = stored()[1]
    assert after.reset is True
    assert (after.periods_delta, after.throttled_periods_delta, after.usage_seconds_delta) == (40, 3, 1.5)


def test_readings_for_containers_missing_from_the_inventory_are_kept():
    cluster = f.cluster()
    result = ingest_readings(
        cluster, [f.reading(0, periods=1, throttled=0, usage_s=0.1, pod="late-pod", container="app")]
    )

    assert result.samples_written == 1 and result.containers_created == 1
    assert Pod.objects.get(name="late-pod").namespace == "shop"


def test_impossible_counter_values_are_dropped_with_a_problem_and_the_rest_kept():
    cluster = f.cluster()
    bad = CounterReading(
        namespace="shop",
        pod="web-1",
        container="c0",
        ts=f.T0,
        periods_total=10,
        throttled_periods_total=2,
        throttled_seconds_total=float(2**64 - 1),
        usage_seconds_total=float("nan"),
    )
    good = f.reading(0, periods=5, throttled=1, usage_s=0.2, container="c1")

    result = ingest(cluster, Batch(pods=[f.pod_info(containers=2)], readings=[bad, good]))

    assert result.samples_written == 2
    assert len(result.problems) == 2 and "2**53" in result.problems[0] + result.problems[1]
    sample = stored("c0")[0]
    assert sample.periods_total == 10 and sample.throttled_seconds_total is None and sample.usage_seconds_total is None


def test_a_late_older_reading_never_moves_the_series_head_back():
    cluster = f.cluster()
    ingest(cluster, Batch(pods=[f.pod_info()], readings=[f.reading(5, periods=500, throttled=5, usage_s=5.0)]))
    result = ingest_readings(cluster, [f.reading(2, periods=200, throttled=2, usage_s=2.0)])

    assert result.duplicates == 1
    assert SeriesHead.objects.get().ts == f.T0 + timedelta(minutes=5)


def test_unordered_readings_in_one_batch_are_applied_in_time_order():
    cluster = f.cluster()
    readings = [f.reading(m, periods=100 * m, throttled=m, usage_s=float(m)) for m in (3, 1, 2)]
    ingest(cluster, Batch(pods=[f.pod_info()], readings=readings))

    assert [s.periods_delta for s in stored()] == [None, 100, 100]


def test_pods_are_upserted_a_chunk_at_a_time_and_all_land(monkeypatch):
    """A 150,000-pod inventory is written 5,000 pods at a time (bounded memory); chunks must not lose or mix pods."""
    from apps.clusters import inventory

    monkeypatch.setattr(inventory, "UPSERT_CHUNK_PODS", 5)
    cluster = f.cluster()
    pods = [f.pod_info(f"web-{i}", containers=1 + i % 3) for i in range(12)]
    ingest(cluster, Batch(nodes=[f.node_info()], pods=pods))
    ingest(cluster, Batch(nodes=[f.node_info()], pods=pods))  # and again: updated in place, not duplicated

    stored_pods = {p.name: p for p in Pod.objects.filter(cluster=cluster)}
    assert sorted(stored_pods) == sorted(p.name for p in pods)
    for pod in pods:
        assert {c.name for c in Container.objects.filter(pod=stored_pods[pod.name])} == {c.name for c in pod.containers}


@pytest.mark.postgres
def test_the_load_table_is_analysed_once_per_batch_size_not_per_batch():
    from apps.telemetry.ingest import _ANALYSED_LOAD_ROWS, _needs_analyze

    _ANALYSED_LOAD_ROWS.clear()  # what earlier tests' ingests on this connection left
    assert _needs_analyze(60) is True  # this session's first batch of that size
    assert _needs_analyze(60) is False
    assert _needs_analyze(110) is False  # within twice
    assert _needs_analyze(10_000) is True  # a big batch plans differently
    assert _needs_analyze(60) is True


@pytest.mark.parametrize(
    ("throttled", "periods", "ratio"),
    [(3, 10, 0.3), (0, 10, 0.0), (10, 10, 1.0), (0, 0, None), (5, 0, None), (None, 10, None), (3, None, None),
     (29, 10, 1.0)],
)  # fmt: skip
def test_the_throttle_ratio_is_undefined_without_periods_and_never_above_one(throttled, periods, ratio):
    from apps.telemetry.counters import throttle_ratio

    assert throttle_ratio(throttled, periods) == ratio


def test_no_module_but_telemetry_counters_divides_throttled_periods_by_periods():
    """One formula for the throttle ratio: a second one (a chart, a source) drifted from it before (no clamp)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = []
    for folder in ("apps", "agent", "standins", "cputune"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                    left, right = ast.unparse(node.left), ast.unparse(node.right)
                    if "throttled" in left and "period" in right and "seconds" not in left:
                        found.append(f"{path.relative_to(root)}:{node.lineno}")
    # counters.py holds the ratio and, beside it, throttled time per period (the expected effect's figure). The node
    # agent ships alone and mirrors the ratio once, checked against this one (tests/agent/test_cputune_agent.py).
    assert sorted(f.split(":")[0] for f in found) == ["agent/cputune_agent.py", *["apps/telemetry/counters.py"] * 2], (
        found
    )
