"""Findings computed from a stored cluster, checked against arithmetic done by hand in the comments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.advisor.models import Finding
from tests.builders import build_cluster

pytestmark = pytest.mark.django_db
# Half a minute past the hour: hourly rollups are whole hours, and an hour starting exactly at the window end is not
# in the window (rollup windows are hour-granular; see apps/advisor/windows.summarize_rollups).
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def finding(cluster, pod: str, window: str = "1h") -> Finding:
    return Finding.objects.select_related("container__pod").get(
        cluster=cluster, window=window, container__pod__name=pod
    )


def test_shares_floor_quota_ceiling_and_ratio_match_the_hand_arithmetic():
    cluster = build_cluster("hand", minutes=30, step_s=60, now=NOW, kernel="4.19.76")
    api = finding(cluster, "api-0")

    # node-0 holds api-0, worker-0, cache-0, batch-0, web-0 (even indexes). Their pod shares:
    #   api 250m → 256, worker 100m → 102, cache 2000m → 2048, batch (BestEffort) → 2, web 500m → 512; Σ = 2920.
    # Allocatable 16,000 − 200 = 15,800m; api's floor = 15,800 × 256 / 2920 = 1385.2 → 1385m (one container in the pod).
    assert api.shares == 256
    assert api.shares_floor_mcpu == 1385
    # Limit 500m at a 100 ms period → quota 50,000 µs → ceiling 500m.
    assert (api.quota_ceiling_mcpu, api.period_us) == (500, 100_000)
    # 30 one-minute intervals × 600 periods = 18,000 periods, 60% throttled = 10,800.
    assert (api.periods, api.throttled_periods) == (18_000, 10_800)
    assert api.throttle_ratio == pytest.approx(0.6)
    # 0.49 s of CPU per second → 490m, every interval the same.
    assert api.usage_avg_mcpu == pytest.approx(490.0)
    assert api.usage_p95_mcpu == pytest.approx(490.0)
    # Throttled seconds: 600 periods × 0.6 × 0.05 s per minute = 18 s per 60 s → 0.3 s/s.
    assert api.throttled_seconds_per_second == pytest.approx(0.3)
    assert api.kernel_verdict == "affected"  # 4.19.76 < 4.19.84


def test_advice_kinds_and_suggested_values_follow_the_numbers():
    cluster = build_cluster("hand2", minutes=30, step_s=60, now=NOW)
    api = finding(cluster, "api-0")
    # One plan. A throttled period wanted 500m + 0.3 s/s × 1,800 s / 10,800 periods = 50 ms more per 100 ms = 1,000m;
    # × 1.2 headroom = 1,200m, the smallest candidate expected under the target (8 threads on 16 CPUs could use 8).
    # Whole cores would only round that up on this node (CPU manager policy none): the raise is the action.
    kinds = [r["kind"] for r in api.recommendations]
    assert kinds == ["raise_limit", "cut_threads"]
    raise_limit = api.recommendations[0]
    assert raise_limit["suggested_limit_mcpu"] == 1200
    assert raise_limit["expected_throttle_ratio_max"] == pytest.approx(0.10)
    assert raise_limit["expected_basis"].startswith("average: a throttled period wanted 1,000m")
    # 8 threads > 4 × ceil(0.5) = 4 → cut threads, capped at the plan's new limit; usage near the ceiling → no
    # kernel upgrade advice.
    assert "ceil(new limit 1,200m) = 2" in api.recommendations[1]["detail"]

    assert {r["kind"] for r in finding(cluster, "batch-0").recommendations} == {"set_request"}
    assert finding(cluster, "web-0").recommendations == []
    # cache: request 2000m, uses 30m all window (max 30m < 30% of 2000m = 600m), 31 samples ≥ 20 → lower_request.
    lower = next(r for r in finding(cluster, "cache-0").recommendations if r["kind"] == "lower_request")
    assert lower["suggested_request_mcpu"] is not None and lower["suggested_request_mcpu"] < 2000


def test_a_container_with_no_limit_has_no_ratio_and_no_quota_rather_than_zeros():
    cluster = build_cluster("hand3", minutes=10, now=NOW)
    cache = finding(cluster, "cache-0")
    assert cache.throttle_ratio is None and cache.periods is None and cache.quota_ceiling_mcpu is None


def test_the_long_windows_read_rollups_and_agree_with_the_hour():
    cluster = build_cluster("hand4", minutes=30, step_s=60, now=NOW)
    hour, day = finding(cluster, "api-0", "1h"), finding(cluster, "api-0", "24h")
    assert (day.periods, day.throttled_periods) == (hour.periods, hour.throttled_periods)
    assert day.throttle_ratio == pytest.approx(hour.throttle_ratio)


def test_a_container_seen_once_gets_lifetime_figures_and_advice_from_them():
    from apps.advisor.services import refresh_findings
    from apps.clusters.models import Cluster
    from apps.telemetry.ingest import ingest
    from apps.telemetry.readings import Batch, ContainerInfo, CounterReading, NodeInfo, PodInfo

    cluster = Cluster.objects.create(name="once")
    node = NodeInfo(name="n1", capacity_mcpu=10_000, allocatable_mcpu=10_000, kernel_version="6.10.14-linuxkit")
    pod = PodInfo(namespace="scraper", name="pi-0", node="n1", qos_class="Burstable", workload_kind="StatefulSet",
                  workload_name="pi", containers=(ContainerInfo(name="pi", request_mcpu=40, limit_mcpu=80),))  # fmt: skip
    # The 1.33 capture's compute-pi-digits: throttled in all 330 periods it ran; 2.64 s of CPU over 330 periods of
    # 100 ms = 80m while it ran — exactly its limit.
    reading = CounterReading(namespace="scraper", pod="pi-0", container="pi", ts=NOW, periods_total=330,
                             throttled_periods_total=330, throttled_seconds_total=30.0, usage_seconds_total=2.64,
                             period_us=100_000, node="n1")  # fmt: skip
    ingest(cluster, Batch(nodes=[node], pods=[pod], readings=[reading]), now=NOW)
    refresh_findings(cluster, now=NOW)

    found = finding(cluster, "pi-0")
    assert found.window_start is None and found.lifetime
    assert (found.periods, found.throttled_periods, found.throttle_ratio) == (330, 330, 1.0)
    raise_limit = next(r for r in found.recommendations if r["kind"] == "raise_limit")
    assert raise_limit["suggested_limit_mcpu"] == 100  # max(80 × 1.2, 80 × 1.2) = 96 → rounded up to 100
    assert "lifetime" in raise_limit["detail"] or "since" in raise_limit["detail"]
    # The pod page's explanation, rebuilt from the finding, says where these figures come from and what it used.
    from apps.advisor.selectors import explanation

    paragraphs = explanation(Finding.objects.select_related("container__pod__node").get(pk=found.pk))
    assert paragraphs[0].startswith("Only one reading so far") and "lifetime" in paragraphs[0]
    assert any(p.startswith("Usage: 80m on average over the periods it ran") for p in paragraphs), paragraphs


def test_the_pod_pages_explanation_rebuilt_from_a_finding_is_the_one_the_advisor_would_write(monkeypatch):
    """Findings do not store the explanation (kilobytes per row, rewritten every cycle): selectors.explanation()
    rebuilds it from the stored figures. For every container and window it must equal the text made from the
    advisor's own facts at refresh time — throttled, unlimited, BestEffort, on an affected and a fixed kernel."""
    from apps.advisor import services
    from apps.advisor.explain import explain_paragraphs
    from apps.advisor.selectors import explanation

    written: dict[tuple[int, str], tuple[str, ...]] = {}
    row = services._finding_row

    def recording_row(cluster_id, window, now, static, facts, recommendations, curve):
        written[(static.container_id, window)] = explain_paragraphs(
            facts, recommendations, services.policy_from_settings()
        )
        return row(cluster_id, window, now, static, facts, recommendations, curve)

    monkeypatch.setattr(services, "_finding_row", recording_row)
    clusters = [build_cluster("affected", minutes=30, step_s=60, now=NOW, kernel="4.19.76"),
                build_cluster("fixed", minutes=30, step_s=60, now=NOW, kernel="5.15.0-1034-aws")]  # fmt: skip
    findings = Finding.objects.filter(cluster__in=clusters).select_related("container__pod__node")
    assert len(findings) == len(written) > 20
    for f in findings:
        assert explanation(f) == written[(f.container_id, f.window)], (f.container.pod.name, f.window)
    assert any("Why raise limit" in p and "Expected after the change" in p for text in written.values() for p in text)
    assert any(p.startswith("Floor: no CPU request") for text in written.values() for p in text)


def test_findings_columns_are_the_model_columns():
    from apps.advisor.services import FINDING_COLUMNS

    assert set(FINDING_COLUMNS) == {f.attname for f in Finding._meta.concrete_fields if f.name != "id"}


def test_a_refresh_in_parts_writes_what_one_refresh_writes_and_an_older_part_never_overwrites_a_newer():
    """The Celery refresh sends a task per part of the nodes (every worker process takes a share): the parts
    together cover every container once, including pods on no node, and give the same findings."""
    from apps.advisor.services import prepare_refresh, refresh_findings, refresh_part, refresh_parts
    from apps.clusters.models import Pod
    from tests.builders import build_cluster

    cluster = build_cluster("parts", minutes=30, step_s=60, now=NOW, kernel="4.19.76")
    Pod.objects.filter(cluster=cluster, name="batch-0").update(node=None)  # scheduled nowhere any more
    fields = ("container_id", "window", "throttle_ratio", "usage_p95_mcpu", "shares_floor_mcpu", "recommendations")

    def stored() -> list[tuple]:
        return list(Finding.objects.filter(cluster=cluster).order_by("container_id", "window").values_list(*fields))

    refresh_findings(cluster, now=NOW)
    whole = stored()
    Finding.objects.all().delete()
    parts = refresh_parts(cluster, now=NOW, size=3)
    assert len(parts) == 2 and parts[0].nodeless and not parts[1].nodeless  # two nodes, never split
    prepare_refresh(cluster, now=NOW)
    assert sum(refresh_part(cluster, part, now=NOW) for part in parts) == len(whole)
    assert stored() == whole

    older = NOW - timedelta(minutes=5)
    refresh_part(cluster, parts[1], now=older)  # a part of an earlier refresh, late
    assert set(Finding.objects.filter(cluster=cluster).values_list("computed_at", flat=True)) == {NOW}


def test_scheduled_refreshes_recompute_the_long_windows_every_ten_minutes_and_the_hour_every_time(settings):
    from apps.advisor.services import refresh_findings, windows_due
    from tests.builders import build_cluster

    cluster = build_cluster("due", minutes=30, step_s=60, now=NOW, kernel="4.19.76")
    refresh_findings(cluster, now=NOW)
    assert windows_due(cluster, now=NOW + timedelta(seconds=60)) == ["1h"]
    assert windows_due(cluster, now=NOW + timedelta(seconds=600)) == ["1h", "24h", "7d"]
    settings.CPUTUNE_LONG_WINDOW_REFRESH = 0
    assert windows_due(cluster, now=NOW + timedelta(seconds=60)) == ["1h", "24h", "7d"]
    Finding.objects.filter(cluster=cluster, window="7d").delete()  # never computed: due at once
    settings.CPUTUNE_LONG_WINDOW_REFRESH = 600
    assert windows_due(cluster, now=NOW + timedelta(seconds=60)) == ["1h", "7d"]


def test_in_a_new_installs_first_minutes_the_long_windows_follow_every_collection_and_say_what_they_cover():
    """Ten minutes of history: the 24 h and 7 d findings would otherwise wait CPUTUNE_LONG_WINDOW_REFRESH with
    whatever the first refresh saw. While they rest on less history than that, every collection recomputes them,
    and their coverage says how much of the window the figures span and when they are recomputed next."""
    from apps.advisor.selectors import window_coverage
    from apps.advisor.services import windows_due

    cluster = build_cluster("young", minutes=7, step_s=60, now=NOW, kernel="4.19.76")
    assert windows_due(cluster, now=NOW + timedelta(seconds=60)) == ["1h", "24h", "7d"]
    day = window_coverage(cluster, "24h")
    assert day.computed and day.partial and day.containers == day.measured > 0
    assert day.covered_minutes == 7 and day.window_minutes == 1440
    assert day.computed_at == NOW and day.next_refresh_at == NOW + timedelta(seconds=60)  # every collection
    hour = window_coverage(cluster, "1h", namespace="shop")
    assert hour.covered_minutes == 7 and hour.lifetime == 0

    grown = build_cluster("grown", minutes=30, step_s=60, now=NOW, kernel="4.19.76")
    assert window_coverage(grown, "24h").next_refresh_at == NOW + timedelta(seconds=600)
    Finding.objects.filter(cluster=grown, window="24h").update(throttle_ratio=None, usage_avg_mcpu=None)
    assert not window_coverage(grown, "24h").computed
