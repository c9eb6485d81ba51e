"""Kernel verdicts for the CFS per-CPU slice expiry bug. Pure Python: no Django import.

(Being written: the dataclass is the interface other modules build on.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["fixed", "affected", "unknown"]
Bug = Literal["slice_expiry", "clock_drift"]
Confidence = Literal["high", "medium", "low"]


@dataclass(frozen=True, slots=True)
class KernelVerdict:
    version: str
    verdict: Verdict
    bug: Bug | None
    fixed_in: tuple[str, ...]  # versions to move to, e.g. ("5.4", "4.19.84", "4.14.154") or a vendor build
    confidence: Confidence
    reasons: tuple[str, ...]  # sentences naming the commits and the evidence


def kernel_verdict(version: str) -> KernelVerdict:
    raise NotImplementedError
