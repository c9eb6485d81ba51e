"""CFS arithmetic against the numbers of Indeed's KubeCon 2019 talk (docs/domain.md#shares-floor) and the runtimes' own test points."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.advisor.cfs import (
    container_shares_floor,
    cpus_fed_at_once,
    pod_shares_floor,
    quota_ceiling_mcpu,
    quota_shape,
    shares_floor,
    slices_per_period,
    stranded_quota,
    throttled_response,
)

NODE_88_MCPU = 88_000


# Shares floor (talk: "we have 88 cores ... our minimum drops to 44 ... 22 ... get down to 11")


@pytest.mark.parametrize(("pods", "floor_cores"), [(1, 88), (2, 44), (4, 22), (8, 11)])
def test_floor_halves_each_time_equal_pods_double_on_an_88_core_node(pods: int, floor_cores: int) -> None:
    floor = pod_shares_floor(1000, [1000] * (pods - 1), NODE_88_MCPU)
    assert floor.floor_mcpu == floor_cores * 1000
    assert floor.total_shares == 1024 * pods


def test_floor_is_above_the_request_when_the_node_is_not_fully_requested() -> None:
    floor = pod_shares_floor(1000, [1000], NODE_88_MCPU)
    assert floor.floor_mcpu > 1000


def test_floor_equals_the_request_when_the_node_is_fully_requested() -> None:
    floor = pod_shares_floor(1000, [1000, 1000, 1000], 4000)
    assert floor.floor_mcpu == 1000


def test_besteffort_pod_counts_two_shares_and_gets_almost_nothing() -> None:
    floor = pod_shares_floor(None, [1000], 4000)
    assert floor.shares == 2
    assert floor.total_shares == 1026
    assert floor.floor_mcpu == 7  # 4000 × 2 / 1026 = 7.8, rounded down


def test_container_gets_its_share_of_the_pod_floor() -> None:
    pod = pod_shares_floor(2000, [2000], 4000)  # 2000m floor
    sidecar = container_shares_floor(pod, 500, [1500])
    assert sidecar.budget_mcpu == 2000
    assert sidecar.floor_mcpu == 500  # 512 / (512 + 1536) of 2000m


def test_floor_rejects_a_negative_budget_and_nonpositive_shares() -> None:
    with pytest.raises(ValueError, match="-5"):
        shares_floor(2, [2], -5)
    with pytest.raises(ValueError, match="0"):
        shares_floor(2, [0], 1000)


@given(
    own=st.one_of(st.none(), st.integers(0, 300_000)),
    neighbours=st.lists(st.one_of(st.none(), st.integers(0, 300_000)), max_size=120),
    allocatable=st.integers(0, 512_000),
)
def test_floor_never_exceeds_the_node(own: int | None, neighbours: list[int | None], allocatable: int) -> None:
    floor = pod_shares_floor(own, neighbours, allocatable)
    assert 0 <= floor.floor_mcpu <= allocatable


# Quota, slices and stranded quota


def test_limit_600m_is_a_ceiling_of_600_millicores() -> None:
    assert quota_ceiling_mcpu(60_000, 100_000) == 600


def test_a_100ms_quota_is_20_slices_and_leaves_68_of_88_cores_without_one() -> None:
    assert slices_per_period(100_000) == 20
    fed = cpus_fed_at_once(100_000, 88)
    assert fed == 20
    assert 88 - fed == 68


def test_a_partial_slice_still_feeds_a_cpu_and_small_nodes_cap_the_count() -> None:
    assert cpus_fed_at_once(33_300, 88) == 7  # 6.66 slices
    assert cpus_fed_at_once(100_000, 4) == 4


def test_quota_shape_collects_ceiling_slices_and_fed_cpus() -> None:
    shape = quota_shape(60_000, 100_000, 88)
    assert (shape.ceiling_mcpu, shape.slices_per_period, shape.cpus_fed) == (600, 12, 12)
    assert quota_shape(60_000).cpus_fed is None


def test_an_88_core_node_can_strand_870_millicores_per_container() -> None:
    stranded = stranded_quota(88)
    assert stranded.stranded_us_per_period == 87_000
    assert stranded.stranded_mcpu == 870


def test_few_runnable_threads_strand_less_and_never_more_than_the_quota() -> None:
    assert stranded_quota(88, runnable_threads=4).stranded_mcpu == 30
    assert stranded_quota(88, quota_us=20_000).stranded_us_per_period == 20_000
    assert stranded_quota(1).stranded_mcpu == 0


def test_bad_quota_inputs_name_the_value() -> None:
    with pytest.raises(ValueError, match="-1"):
        quota_ceiling_mcpu(-1)
    with pytest.raises(ValueError, match="0"):
        stranded_quota(0)


# The talk's latency model


def test_200ms_of_work_under_a_0_4_cpu_limit_answers_at_440ms_showing_0_4_cpu() -> None:
    response = throttled_response(work_ms=200, quota_ms=40, period_ms=100)
    assert response.response_ms == 440
    assert response.periods_throttled == 4
    assert response.usage_mcpu_over_periods == pytest.approx(400)  # 200 ms over five 100 ms periods


def test_a_quota_of_a_whole_period_cannot_throttle_one_thread() -> None:
    assert throttled_response(200, 100, 100).response_ms == 200
    assert throttled_response(30, 40, 100).response_ms == 30


def test_float_division_noise_does_not_add_a_period() -> None:
    # 1.1 / 0.1 is 11.000000000000002 in floats: still 11 quotas, 10 waits.
    assert throttled_response(1.1, 0.1, 1).periods_throttled == 10


@given(
    work=st.floats(0, 10_000, allow_nan=False),
    quota=st.floats(0.5, 200),
    period=st.floats(1, 200),
)
def test_throttling_never_makes_a_request_faster_and_waits_at_most_a_period_per_quota(
    work: float, quota: float, period: float
) -> None:
    response = throttled_response(work, quota, period)
    assert response.response_ms >= work - 1e-6
    if quota < period:
        assert response.response_ms <= work + math.ceil(work / quota) * (period - quota) + 1e-6
