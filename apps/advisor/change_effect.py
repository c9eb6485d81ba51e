"""What a change did: the windows before and after it, their figures, and a verdict by a stated test
(docs/domain.md#change-effect). Pure Python: the caller reads the samples.

The figures of each window are summarize_window's, as everywhere else. The verdict compares the per-sample throttle
ratios of the two windows with a two-sided Mann-Whitney U test (scipy's, normal approximation, ties corrected): each sample
interval is one observation, so a burst that throttles many periods of one minute counts once, not once per period —
periods of one minute are far from independent, which a test on periods would treat as thousands of trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Literal

from scipy.stats import mannwhitneyu

from .windows import WindowSummary

Verdict = Literal["improved", "worse", "no_clear_change", "too_early", "no_data"]
VERDICTS: tuple[Verdict, ...] = ("improved", "worse", "no_clear_change", "too_early", "no_data")
SIGNIFICANCE = 0.01  # two-sided: one change in a hundred with no effect is called improved or worse
MIN_SAMPLES = 5  # per side, for the normal approximation to be worth stating


@dataclass(frozen=True, slots=True)
class Comparison:
    u: float  # Mann-Whitney U of the after-window's ratios
    higher_after: bool  # the after-window's ratios tend higher
    p_value: float


def mann_whitney(before: Sequence[float], after: Sequence[float]) -> Comparison | None:
    """Two-sided Mann-Whitney U of `after` against `before` (scipy.stats.mannwhitneyu, normal approximation with the
    tie correction, no continuity correction). None with fewer than MIN_SAMPLES on a side or when every value is the
    same (no ranking to test)."""
    if len(before) < MIN_SAMPLES or len(after) < MIN_SAMPLES or len({*before, *after}) < 2:
        return None
    result = mannwhitneyu(after, before, alternative="two-sided", method="asymptotic", use_continuity=False)
    p_value = float(result.pvalue)
    if not math.isfinite(p_value):
        return None
    u = float(result.statistic)
    return Comparison(u, u > len(before) * len(after) / 2, p_value)


@dataclass(frozen=True, slots=True)
class Effect:
    verdict: Verdict
    before: WindowSummary
    after: WindowSummary
    window_seconds: float  # the length of each side
    comparison: Comparison | None
    note: str


def judge_effect(
    before: WindowSummary,
    after: WindowSummary,
    before_ratios: Sequence[float],
    after_ratios: Sequence[float],
    *,
    window_seconds: float,
    after_elapsed_seconds: float,
    min_periods: int,
) -> Effect:
    """The verdict on a change from its two windows: "no_data" without `min_periods` periods (and MIN_SAMPLES
    samples) before; "too_early" until the after-window is as long as the before one; "no_data" when it ended without
    them either; else improved / worse when the per-sample ratios differ at SIGNIFICANCE, no_clear_change
    otherwise."""
    if before.lifetime:
        return Effect(
            "no_data",
            before,
            after,
            window_seconds,
            None,
            "before the change, only counters since the container started (one reading): no window to compare",
        )
    if not before.periods or before.periods < min_periods or len(before_ratios) < MIN_SAMPLES:
        return Effect("no_data", before, after, window_seconds, None, "too few periods before the change to compare")
    if after_elapsed_seconds < window_seconds:
        return Effect(
            "too_early",
            before,
            after,
            window_seconds,
            None,
            f"the after-window has {after_elapsed_seconds / 60:.0f} of {window_seconds / 60:.0f} min so far",
        )
    if (after.periods or 0) < min_periods or len(after_ratios) < MIN_SAMPLES:
        return Effect("no_data", before, after, window_seconds, None, "too few periods after the change to compare")
    comparison = mann_whitney(before_ratios, after_ratios)
    if comparison is None:
        return Effect("no_clear_change", before, after, window_seconds, None, "the ratios are the same on both sides")
    if comparison.p_value >= SIGNIFICANCE:
        return Effect(
            "no_clear_change",
            before,
            after,
            window_seconds,
            comparison,
            f"no difference at the {SIGNIFICANCE:g} level (Mann-Whitney p = {comparison.p_value:.2g})",
        )
    verdict: Verdict = "worse" if comparison.higher_after else "improved"
    return Effect(
        verdict,
        before,
        after,
        window_seconds,
        comparison,
        f"per-sample throttle ratios {'lower' if verdict == 'improved' else 'higher'} after (Mann-Whitney p = "
        f"{comparison.p_value:.2g})",
    )


# A thread count's new level (docs/domain.md#thread-changes): THREADS_AFTER readings in a row all beyond the band of
# the THREADS_BEFORE readings before them (at least THREADS_BEFORE_MIN), by more than the noise allowance.
THREADS_BEFORE = 15
THREADS_BEFORE_MIN = 5
THREADS_AFTER = 3


@dataclass(frozen=True, slots=True)
class ThreadChange:
    since: datetime  # the last reading at the old level
    at: datetime  # the first at the new one
    before: int  # the median of the readings before, and of the first ones after
    after: int


THREAD_NOISE_MIN = 2.0


def thread_noise(level: float) -> float:
    """How far a thread count may wander around its level and still be that level: 2 threads or a quarter of it."""
    return max(THREAD_NOISE_MIN, 0.25 * level)


def may_change_level(counts: Sequence[int | None]) -> bool:
    """Whether thread counts (None or 0: not read) could hold a new level at all: enough readings, and two that
    differ by more than the noise allowance of the lower. Most containers' do not: the refresh asks this first."""
    read = [n for n in counts if n]
    if len(read) < THREADS_BEFORE_MIN + THREADS_AFTER:
        return False
    low = min(read)
    return max(read) - low > thread_noise(low)


def thread_level_change(readings: Sequence[tuple[datetime, int | None]]) -> ThreadChange | None:
    """The first new level of a thread count in `readings` ((instant, threads), oldest first; None or 0: not
    read): THREADS_AFTER readings in a row all above the highest of the readings before them plus thread_noise of
    their median, or all below the lowest minus it. None when the count held its level."""
    if not may_change_level([n for _, n in readings]):
        return None
    counted = [(ts, n) for ts, n in readings if n]
    values = [n for _, n in counted]
    for i in range(THREADS_BEFORE_MIN, len(values) - THREADS_AFTER + 1):
        before = values[max(0, i - THREADS_BEFORE) : i]
        after = values[i : i + THREADS_AFTER]
        above, below = min(after) - max(before), min(before) - max(after)
        if max(above, below) <= THREAD_NOISE_MIN:  # within the least allowance: no median needed to know
            continue
        noise = thread_noise(median(before))
        if above > noise or below > noise:
            return ThreadChange(counted[i - 1][0], counted[i][0], round(median(before)), round(median(after)))
    return None
