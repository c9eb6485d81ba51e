"""The kubelet's request/limit conversions and the quantity parser, including hostile quantities."""

from __future__ import annotations

import time

import pytest

from apps.clusters.kubelet import cpu_quantity_to_mcpu, quota_us_from_limit_mcpu, shares_from_request_mcpu


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
