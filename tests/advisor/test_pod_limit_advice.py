"""raise_pod_limit: when the pod's own quota throttles beyond a container's own, the advice is the pod's limit, sized
on the pod cgroup's counters by the same planner as a container's raise, with its expected effect."""

from __future__ import annotations

from dataclasses import replace

from apps.advisor.facts import ContainerFacts, Policy
from apps.advisor.rules import advise
from tests.advisor.test_rules import window

POLICY = Policy()


def facts(own: float | None, pod: float, *, pod_limit: int | None = None) -> ContainerFacts:
    # Two containers limited to 200m and 300m: the pod's quota is their 500m, at its ceiling, 60 % throttled.
    return ContainerFacts(
        window=window(ratio=own, avg=150.0, p95=180.0, usage_max=190.0, threads=4, throttled_s_per_s=0.0),
        request_mcpu=100,
        limit_mcpu=200,
        node_cpus=8,
        pod_limit_mcpu=pod_limit,
        pod_window=window(ratio=pod, avg=480.0, p95=495.0, usage_max=500.0, threads=8, throttled_s_per_s=0.4),
        pod_ceiling_mcpu=pod_limit or 500,
        pod_ceiling_from="the pod's own limit" if pod_limit else "the sum of its containers' limits",
    )


def kinds(plan) -> list[str]:
    return [r.kind for r in plan]


def test_the_pods_quota_binding_beyond_the_container_is_advised_as_the_pods_limit_with_a_claim():
    [advice] = [r for r in advise(facts(own=0.0, pod=0.6), POLICY) if r.kind == "raise_pod_limit"]
    assert advice.suggested_pod_limit_mcpu is not None and advice.suggested_pod_limit_mcpu > 500
    assert advice.suggested_pod_limit_mcpu % POLICY.limit_step_mcpu == 0
    assert advice.suggested_limit_mcpu is None and advice.suggested_request_mcpu is None  # not the container's value
    # The pod cgroup has throttled time and threads: the expected-effect model makes a claim, under the target.
    assert (
        advice.expected_throttle_ratio_max is not None and advice.expected_throttle_ratio_max <= POLICY.throttle_target
    )
    assert advice.expected_basis.startswith("the pod cgroup's own ratio: ")
    assert "add up to" in advice.detail and "this container's own quota only 0% of its periods" in advice.detail
    assert advice.severity == "critical"  # 60 % throttled, as a container's raise would be


def test_a_pod_level_limit_is_named_as_the_one_to_raise():
    [advice] = [r for r in advise(facts(own=0.0, pod=0.6, pod_limit=500), POLICY) if r.kind == "raise_pod_limit"]
    assert "raise the pod's limit (spec.resources.limits.cpu) from 500m to" in advice.detail


def test_a_container_whose_own_quota_explains_the_throttling_gets_its_own_raise_not_the_pods():
    plan = advise(replace(facts(own=0.6, pod=0.62), window=window(ratio=0.6, p95=199.0, usage_max=200.0)), POLICY)
    assert "raise_pod_limit" not in kinds(plan) and "raise_limit" in kinds(plan)


def test_under_the_target_or_without_pod_counters_there_is_no_pod_advice():
    assert "raise_pod_limit" not in kinds(advise(facts(own=0.0, pod=0.05), POLICY))
    assert "raise_pod_limit" not in kinds(advise(replace(facts(own=0.0, pod=0.6), pod_window=None), POLICY))
    few = replace(facts(own=0.0, pod=0.6), pod_window=window(ratio=0.6, periods=POLICY.min_periods - 1))
    assert "raise_pod_limit" not in kinds(advise(few, POLICY))
