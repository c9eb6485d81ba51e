"""How Kubernetes turns CPU requests and limits into cgroup settings. Pure Python: no Django import.

These are the kubelet's own conversions (pkg/kubelet/cm/helpers_linux.go and the runtimes' cgroup v2 mapping),
shared by the collectors (parse quantities), the lab (write cgroups the way a kubelet would) and the advisor (math).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Literal

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
DEFAULT_PERIOD_US = 100_000
MIN_QUOTA_US = 1000
MIN_WEIGHT = 1
MAX_QUANTITY_CHARS = 64  # the API server's own quantities are far shorter; longer text is not a quantity
MAX_QUANTITY_EXPONENT = 18  # 10**18 CPUs: past any real request, and cheap to reject
MAX_WEIGHT = 10_000

_QUANTITY = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]{0,2})\s*$")
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "u": Decimal("0.000001"),
    "n": Decimal("0.000000001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
}


def cpu_quantity_to_mcpu(quantity: str | int | float) -> int:
    """Parse a Kubernetes CPU quantity ("250m", "2", "0.5", "1e3m") into millicores, rounding up as the API does.

    Raises ValueError with the offending text for anything that is not a non-negative quantity.
    """
    if isinstance(quantity, int | float):
        if isinstance(quantity, float) and not math.isfinite(quantity):
            raise ValueError(f"CPU quantity {quantity!r} is not finite")
        value = Decimal(str(quantity))
    else:
        if len(quantity) > MAX_QUANTITY_CHARS:
            raise ValueError(f"CPU quantity of {len(quantity)} characters is not a CPU quantity")
        match = _QUANTITY.match(quantity)
        if not match or match.group(2) not in _SUFFIX:
            raise ValueError(f"{quantity!r} is not a CPU quantity (expected e.g. 250m, 2, 0.5)")
        try:
            number = Decimal(match.group(1))
            # Bounded before any arithmetic: "1e9999999" would take seconds to expand (or overflow the context).
            if number.is_finite() and number != 0 and abs(number.adjusted()) > MAX_QUANTITY_EXPONENT:
                raise ValueError(f"CPU quantity {quantity!r} is out of range")
            value = number * _SUFFIX[match.group(2)]
        except InvalidOperation:
            raise ValueError(f"{quantity!r} is not a CPU quantity") from None
    if value < 0:
        raise ValueError(f"CPU quantity {quantity!r} is negative")
    return int((value * MILLI_CPU_TO_CPU).to_integral_value(rounding="ROUND_CEILING"))


def shares_from_request_mcpu(request_mcpu: int | None) -> int:
    """cpu.shares for a CPU request (MilliCPUToShares): mcpu × 1024 / 1000, clamped to [2, 262144]; none → 2."""
    if not request_mcpu:
        return MIN_SHARES
    shares = (request_mcpu * SHARES_PER_CPU) // MILLI_CPU_TO_CPU
    return max(MIN_SHARES, min(MAX_SHARES, shares))


WeightFormula = Literal["linear", "quadratic"]


def _quadratic_weight(shares: int) -> int:
    # Exponent of 10 is a quadratic in log2(shares) through (2, 1), (1024, 100) and (262144, 10000).
    if shares <= MIN_SHARES:
        return MIN_WEIGHT
    if shares >= MAX_SHARES:
        return MAX_WEIGHT
    log2_shares = math.log2(shares)
    exponent = (log2_shares * log2_shares + 125 * log2_shares) / 612.0 - 7.0 / 34.0
    return math.ceil(10**exponent)


def weight_from_shares(shares: int, formula: WeightFormula = "linear") -> int:
    """cgroup v2 cpu.weight that a runtime writes for cpu.shares `shares`, clamped to [2, 262144] first.

    "linear" is the old runtime mapping (runc ≤ 1.3.1, older crun): 1 + ((shares − 2) × 9999) // 262142, which
    gives one CPU (1024 shares) weight 39 against the default 100 (runc#4772); the lab writes it, so that the split
    stays proportional to requests as the shares floor assumes. "quadratic" is opencontainers/cgroups
    ConvertCPUSharesToCgroupV2Value from runc 1.3.2 / 1.4.0 on (runc PR #4785, runc#4896): ceil(10^((l² + 125 l) /
    612 − 7/34)) with l = log2(shares), so 1024 shares map to 100 (docs/domain.md#weight-mapping).
    """
    shares = max(MIN_SHARES, min(MAX_SHARES, shares))
    if formula == "linear":
        return MIN_WEIGHT + ((shares - MIN_SHARES) * (MAX_WEIGHT - MIN_WEIGHT)) // (MAX_SHARES - MIN_SHARES)
    if formula == "quadratic":
        return _quadratic_weight(shares)
    raise ValueError(f"unknown shares→weight formula {formula!r} (expected 'linear' or 'quadratic')")


def quota_us_from_limit_mcpu(limit_mcpu: int | None, period_us: int = DEFAULT_PERIOD_US) -> int | None:
    """cpu.cfs_quota_us for a CPU limit (MilliCPUToQuota): mcpu × period / 1000, at least 1000 µs; no limit → None."""
    if not limit_mcpu:
        return None
    quota = (limit_mcpu * period_us) // MILLI_CPU_TO_CPU
    return max(MIN_QUOTA_US, quota)
