"""The explanation a person reads: floor, ceiling, what the ratio costs in latency, and why each advice follows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from apps.advisor.cfs import pod_shares_floor
from apps.advisor.explain import explain, explain_paragraphs
from apps.advisor.kernel import kernel_verdict
from apps.advisor.rules import ContainerFacts, Policy, advise
from apps.advisor.windows import WindowSummary

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
POLICY = Policy()

THROTTLED = WindowSummary(
    window_start=T0,
    window_end=T0 + timedelta(hours=1),
    periods=36_000,
    throttled_periods=10_800,
    throttle_ratio=0.3,
    throttled_seconds_per_second=1.25,
    usage_avg_mcpu=380.0,
    usage_p95_mcpu=395.0,
    usage_p99_mcpu=399.0,
    usage_max_mcpu=400.0,
    threads_max=2,
    samples=240,
    covered_seconds=3600.0,
)
EMPTY = WindowSummary(
    window_start=T0,
    window_end=T0 + timedelta(hours=1),
    periods=None,
    throttled_periods=None,
    throttle_ratio=None,
    throttled_seconds_per_second=None,
    usage_avg_mcpu=None,
    usage_p95_mcpu=None,
    usage_p99_mcpu=None,
    usage_max_mcpu=None,
    threads_max=None,
    samples=0,
    covered_seconds=0.0,
)
FLOOR = pod_shares_floor(400, [900], 3_800)  # this pod and one 900m neighbour on a 4-CPU node
LIFETIME = replace(
    EMPTY,
    window_start=None,
    periods=115_517,
    throttled_periods=26_467,
    throttle_ratio=26_467 / 115_517,
    samples=1,
    covered_seconds=None,
    lifetime=True,
)


def facts(window: WindowSummary, **changes: object) -> ContainerFacts:
    base = ContainerFacts(
        window=window,
        request_mcpu=400,
        limit_mcpu=400,
        node_cpus=4,
        node_allocatable_mcpu=3_800,
        qos_class="Guaranteed",
        shares_floor_mcpu=FLOOR.floor_mcpu,
        node_total_shares=FLOOR.total_shares,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_0_4_cpu_limit_is_explained_with_the_talks_440_ms_answer() -> None:
    case = facts(THROTTLED)
    text = explain(case, advise(case, POLICY), POLICY)
    assert "40 ms of CPU time per 100 ms period" in text
    assert "needing 200 ms of CPU gets 40 ms per period and answers after 440 ms" in text
    assert "usage graphs show only 400m" in text
    assert "plateau at about 100 ms and 200 ms" in text


def test_latency_plateaus_follow_the_real_period() -> None:
    text = explain(facts(THROTTLED, period_us=50_000), (), POLICY)
    assert "plateau at about 50 ms and 100 ms" in text


def test_the_floor_shows_shares_and_the_node_split() -> None:
    text = explain(facts(THROTTLED), (), POLICY)
    assert "409 cpu.shares" in text  # 400 × 1024 / 1000 = 409.6, rounded down by the kubelet
    assert "1,330 shares" in text  # 409 + 921
    assert "1,168m (1.168 CPUs) guaranteed under full contention" in text  # 3800 × 409 / 1330 = 1168.6
    assert "more than its request" in text


def test_each_recommendation_gets_its_reason() -> None:
    case = facts(THROTTLED)
    recommendations = advise(case, POLICY)
    assert recommendations, "the throttled case should draw advice"
    paragraphs = explain_paragraphs(case, recommendations, POLICY)
    for recommendation in recommendations:
        assert any(recommendation.detail in p and p.startswith("Why ") for p in paragraphs)


def test_no_limit_means_no_quota_and_no_throttling() -> None:
    text = explain(
        facts(replace(THROTTLED, periods=None, throttled_periods=None, throttle_ratio=None), limit_mcpu=None),
        (),
        POLICY,
    )
    assert "no CPU limit" in text
    assert "none possible without a quota" in text


def test_no_request_means_a_floor_of_almost_nothing() -> None:
    text = explain(facts(THROTTLED, request_mcpu=None, shares_floor_mcpu=5), (), POLICY)
    assert "no CPU request" in text
    assert "2 cpu.shares" in text
    assert "5m on this node" in text


def test_no_data_says_nothing_can_be_judged_yet() -> None:
    text = explain(facts(EMPTY), (), POLICY)
    assert "nothing can be judged yet" in text
    assert "Throttling" not in text


def test_lifetime_only_data_is_labelled_as_since_the_container_started() -> None:
    text = explain(facts(LIFETIME), (), POLICY)
    assert "lifetime" in text
    assert "26,467 of the 115,517 periods" in text
    assert "since it started" in text
    assert "in this window" not in text


def test_a_limit_with_no_counters_is_unknown_not_zero_throttling() -> None:
    text = explain(facts(replace(THROTTLED, periods=None, throttled_periods=None, throttle_ratio=None)), (), POLICY)
    assert "unknown, not zero" in text


def test_too_few_periods_are_said_to_be_too_few_to_judge() -> None:
    text = explain(facts(replace(THROTTLED, periods=20, throttled_periods=10, throttle_ratio=0.5)), (), POLICY)
    assert "too few periods to judge" in text


def test_a_quota_of_a_cpu_or_more_explains_throttling_by_parallel_threads() -> None:
    text = explain(facts(THROTTLED, limit_mcpu=2000, request_mcpu=2000), (), POLICY)
    assert "several threads ran at once" in text


def test_without_advice_a_window_too_short_to_judge_says_so_instead_of_nothing_to_change() -> None:
    # 7 minutes of low usage under a 400m request: lower_request needs half the hour covered and 20 samples.
    early = replace(THROTTLED, throttle_ratio=0.0, throttled_periods=0, usage_avg_mcpu=40.0, usage_p95_mcpu=45.0,
                    usage_max_mcpu=50.0, samples=7, covered_seconds=420.0)  # fmt: skip
    last = explain_paragraphs(facts(early), advise(facts(early), POLICY), POLICY)[-1]
    assert last.startswith("No change suggested yet, but not every rule could judge this window")
    assert "lower request needs samples over 30 minutes of the window (7 so far) and 20 samples (7 so far)" in last
    assert "crosses a threshold" not in last
    # A whole window of the same usage is judged: lower_request fires and its reason is given.
    whole = replace(early, samples=60, covered_seconds=3600.0)
    assert any(
        p.startswith("Why lower request:") for p in explain_paragraphs(facts(whole), advise(facts(whole), POLICY))
    )


def test_a_healthy_whole_window_still_says_no_threshold_is_crossed() -> None:
    healthy = replace(THROTTLED, throttle_ratio=0.02, throttled_periods=720)
    assert explain_paragraphs(facts(healthy), (), POLICY)[-1] == (
        "No change suggested: nothing in this window crosses a threshold."
    )


def test_counts_of_one_read_in_the_singular() -> None:
    text = explain(facts(replace(THROTTLED, threads_max=1, samples=1, covered_seconds=60.0)), (), POLICY)
    assert "Up to 1 thread." in text and "1 sample covering 1 min" in text
    assert "1 threads" not in text and "1 samples" not in text


def test_a_window_across_midnight_names_both_dates() -> None:
    day = replace(THROTTLED, window_start=T0 - timedelta(hours=24), window_end=T0, covered_seconds=86_400.0)
    assert "of the window 2024-12-31 12:00–2025-01-01 12:00 UTC" in explain(facts(day), (), POLICY)
    assert "of the window 2025-01-01 12:00–13:00 UTC" in explain(facts(THROTTLED), (), POLICY)


def test_a_burst_the_agent_read_is_part_of_the_ceiling_with_how_much_it_was_used():
    facts = ContainerFacts(window=THROTTLED, request_mcpu=200, limit_mcpu=200, burst_us=20_000, bursts_total=12,
                           burst_seconds_total=0.18, cgroup_version=2)  # fmt: skip
    text = explain(facts, [])
    assert "Burst: cpu.max.burst 20000 lets a period spend up to 20 ms" in text
    assert "one period can reach 40 ms of CPU time" in text
    assert "used the burst in 12 periods, 0.18 s of CPU beyond the quota" in text
    assert "Burst:" not in explain(replace(facts, burst_us=0), [])
    assert "cpu.cfs_burst_us 20000" in explain(replace(facts, cgroup_version=1), [])


def test_on_linux_6_18_the_throttled_time_says_what_the_task_based_model_changed():
    facts = ContainerFacts(window=THROTTLED, request_mcpu=200, limit_mcpu=400, kernel=kernel_verdict("6.18.44-fc"))
    assert "from 6.18 on a thread out of quota is stopped when it next returns to user space" in explain(facts, [])
    older = replace(facts, kernel=kernel_verdict("6.6.96-0-virt"))
    assert "returns to user space" not in explain(older, [])
