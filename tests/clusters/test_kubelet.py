"""The kubelet's request/limit conversions and the quantity parser, including hostile quantities."""

from __future__ import annotations

import time

import pytest

from apps.clusters.kubelet import (
    cpu_quantity_to_mcpu,
    quota_us_from_limit_mcpu,
    shares_from_request_mcpu,
    weight_from_shares,
)


@pytest.mark.parametrize(
    ("quantity", "mcpu"),
    [("250m", 250), ("2", 2000), ("0.5", 500), ("1e3m", 1000), ("100u", 1), (1.5, 1500), ("0", 0), ("1k", 1_000_000)],
)
def test_quantities_round_up_to_millicores_as_the_api_does(quantity, mcpu):
    assert cpu_quantity_to_mcpu(quantity) == mcpu


@pytest.mark.parametrize(
    "quantity", ["-5", "abc", "1e309", "1e9999999", "9" * 20_000, "", "1.5.5", "NaN", float("inf")]
)
def test_hostile_quantities_are_refused_quickly_with_a_value_error(quantity):
    started = time.monotonic()
    with pytest.raises(ValueError):
        cpu_quantity_to_mcpu(quantity)
    assert time.monotonic() - started < 0.05


def test_kubelet_conversions_clamp_as_the_kubelet_does():
    # MilliCPUToShares: 250m → 256; no request → 2; 1m → 2 (minimum); 300 CPUs → 262144 (maximum).
    assert [shares_from_request_mcpu(m) for m in (250, None, 1, 300_000)] == [256, 2, 2, 262_144]
    # MilliCPUToQuota: 600m → 60,000 µs per 100 ms; 5m → 1000 µs minimum; no limit → no quota.
    assert [quota_us_from_limit_mcpu(m) for m in (600, 5, None)] == [60_000, 1000, None]


# cpu.shares ↔ cpu.weight


def test_linear_formula_gives_weight_39_for_one_cpu() -> None:
    # 1 + (1022 × 9999) // 262142 = 1 + 38: the weight one CPU got on cgroup v2 before runc 1.3 (runc#4772: "39").
    assert weight_from_shares(1024, "linear") == 39
    assert weight_from_shares(2, "linear") == 1
    assert weight_from_shares(262144, "linear") == 10000


@pytest.mark.parametrize(
    ("shares", "weight"),
    # opencontainers/cgroups utils_test.go TestConvertCPUSharesToCgroupV2Value (v0.0.5)
    [(2, 1), (3, 2), (1024, 100), (262143, 10000), (262144, 10000)],
)
def test_quadratic_formula_matches_the_runtime_test_points(shares: int, weight: int) -> None:
    assert weight_from_shares(shares, "quadratic") == weight


def test_2000_shares_read_77_before_runc_1_3_2_and_170_after() -> None:
    # runc#4896: `--cpu-shares 2000` gave cpu.weight 77 with runc 1.3.1 and 170 with 1.4.0-rc.1.
    assert weight_from_shares(2000, "linear") == 77
    assert weight_from_shares(2000, "quadratic") == 170


def test_quadratic_formula_no_longer_splits_in_proportion_to_requests() -> None:
    one_cpu = weight_from_shares(1024, "quadratic")
    two_cpus = weight_from_shares(2048, "quadratic")
    assert one_cpu == 100
    assert 150 < two_cpus < 200  # not 200: two CPUs of request weigh less than twice one


def test_out_of_range_shares_are_clamped_and_an_unknown_formula_is_refused() -> None:
    assert weight_from_shares(262145) == 10000
    assert weight_from_shares(0, "quadratic") == 1
    with pytest.raises(ValueError, match="cubic"):
        weight_from_shares(1024, "cubic")  # type: ignore[arg-type]
