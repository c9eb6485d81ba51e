"""The expected effect of a new limit as a curve: a higher limit never reads worse, and the plan's point on the curve
is the figure its recommendation states."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.advisor.effect import Evidence, expected_after_limit, expected_curve
from apps.advisor.rules import advise, limit_curve
from tests.advisor.test_rules import POLICY, facts, window

evidence_st = st.builds(
    Evidence,
    limit_mcpu=st.integers(10, 4000),
    period_us=st.just(100_000),
    periods=st.integers(1, 50_000),
    throttled_periods=st.integers(0, 50_000),
    throttled_us=st.one_of(st.none(), st.floats(0, 1e10)),
    threads=st.one_of(st.none(), st.integers(1, 300)),
    node_cpus=st.one_of(st.none(), st.integers(1, 96)),
    period_throttled_us=st.one_of(st.none(), st.lists(st.floats(0, 400_000), min_size=1, max_size=50).map(tuple)),
).filter(lambda e: e.throttled_periods <= e.periods)


@settings(max_examples=300, deadline=None)
@given(evidence=evidence_st, a=st.integers(1, 20_000), b=st.integers(1, 20_000))
def test_a_higher_limit_never_expects_a_worse_ratio(evidence: Evidence, a: int, b: int) -> None:
    low, high = sorted((evidence.limit_mcpu + a, evidence.limit_mcpu + b))
    at_low = expected_after_limit(evidence, low, 0.1, 1.2).ratio_max
    at_high = expected_after_limit(evidence, high, 0.1, 1.2).ratio_max
    if at_low is not None:
        assert at_high is not None and at_high <= at_low


@settings(max_examples=200, deadline=None)
@given(evidence=evidence_st, mark=st.integers(1, 8000))
def test_the_curve_rises_in_limit_falls_in_ratio_and_holds_its_mark(evidence: Evidence, mark: int) -> None:
    mark += evidence.limit_mcpu
    curve = expected_curve(evidence, 0.1, 1.2, 50, None, (mark,))
    limits = [limit for limit, _ in curve]
    ratios = [ratio for _, ratio in curve]
    assert limits == sorted(set(limits)) and all(limit > evidence.limit_mcpu for limit in limits)
    assert all(later <= earlier for earlier, later in itertools.pairwise(ratios))
    assert len(curve) <= 41  # the grid and the mark
    expected = expected_after_limit(evidence, mark, 0.1, 1.2).ratio_max
    if expected is not None:
        assert dict(curve)[mark] == expected


def test_the_plans_limit_is_on_the_curve_at_the_ratio_the_recommendation_states() -> None:
    # 8 threads on 16 CPUs, throttled in 60 % of periods with 0.3 s/s throttled time (the demo's api-0).
    case = facts(
        window(ratio=0.6, periods=18_000, avg=490, p95=490, usage_max=490, threads=8, throttled_s_per_s=0.3,
               covered_s=1800),
        limit_mcpu=500, request_mcpu=250, node_cpus=16, qos_class="Burstable",
    )  # fmt: skip
    plan = advise(case, POLICY)
    raised = next(r for r in plan if r.kind == "raise_limit")
    curve = dict(limit_curve(case, POLICY, plan))
    assert raised.suggested_limit_mcpu in curve
    assert curve[raised.suggested_limit_mcpu] == raised.expected_throttle_ratio_max
    assert max(curve) <= 16_000 and min(curve) > 500


def test_a_container_under_target_has_no_curve() -> None:
    case = facts(window(ratio=0.01, threads=2, throttled_s_per_s=0.001), limit_mcpu=500)
    assert limit_curve(case, POLICY, advise(case, POLICY)) == ()
