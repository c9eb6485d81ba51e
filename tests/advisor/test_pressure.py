"""CPU pressure (PSI) beside throttling: per-second figures from the stored deltas, a zero that cannot be a
measurement said as such, and the advice naming the impact only where pressure is measured."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from apps.advisor.explain import explain_paragraphs
from apps.advisor.pressure import NOT_EXPORTED, pressure_of
from apps.advisor.rules import advise
from apps.advisor.windows import SampleRow, summarize_window
from tests.advisor.test_rules import POLICY, T0, facts, window


def rows(waiting: list[float | None], stalled: list[float | None], interval: float = 15.0) -> list[SampleRow]:
    out = [SampleRow(T0, None, None, None, None, None)]
    for i, (w, s) in enumerate(zip(waiting, stalled, strict=True), start=1):
        out.append(
            SampleRow(
                T0 + timedelta(seconds=interval * i),
                interval,
                150,
                30,
                0.6,
                3.0,
                pressure_waiting_seconds_delta=w,
                pressure_stalled_seconds_delta=s,
            )
        )
    return out


def summary(sample_rows: list[SampleRow]):
    return summarize_window(sample_rows, T0 - timedelta(seconds=1), T0 + timedelta(hours=1), 15.0)


def test_pressure_per_second_is_the_summed_deltas_over_the_intervals_that_reported_them():
    s = summary(rows([0.3, 0.6, None], [0.1, 0.2, None]))
    # Two 15 s intervals carried pressure: 0.9 s and 0.3 s over 30 s; the third interval is not in the span.
    assert s.pressure_waiting_per_second == pytest.approx(0.9 / 30)
    assert s.pressure_stalled_per_second == pytest.approx(0.3 / 30)
    assert s.throttled_seconds_per_second == pytest.approx(1.8 / 45)


def test_no_pressure_deltas_give_no_figure_and_say_what_enables_pressure():
    s = summary(rows([None, None], [None, None]))
    assert s.pressure_waiting_per_second is None
    p = pressure_of(s)
    assert (p.status, p.waiting_per_second, p.note) == ("not_exported", None, NOT_EXPORTED)
    assert "KubeletPSI" in p.note and "cgroup v2" in p.note


def test_zero_waiting_while_throttled_is_not_measured_and_shows_no_figure():
    s = summary(rows([0.0, 0.0], [0.0, 0.0]))  # throttled 0.04 s per second, no waiting at all
    p = pressure_of(s)
    assert (p.status, p.waiting_per_second, p.stalled_per_second) == ("not_measured", None, None)
    assert "psi=1" in p.note


def test_zero_waiting_with_too_little_throttled_time_to_show_is_a_measured_zero():
    s = replace(summary(rows([0.0, 0.0], [0.0, 0.0])), throttled_seconds_per_second=0.001)
    p = pressure_of(s)
    assert (p.status, p.waiting_per_second) == ("measured", 0.0)


@pytest.mark.parametrize(
    ("ratio", "waiting", "says"),
    [
        (0.4, 0.2, "The throttling has an impact"),
        (0.4, 0.005, "hardly waited"),
        (0.0, 0.2, "contention with its neighbours"),
    ],
)
def test_the_note_says_what_the_wait_means_beside_the_throttling(ratio, waiting, says):
    w = replace(
        window(ratio=ratio, throttled_s_per_s=0.3),
        pressure_waiting_per_second=waiting,
        pressure_stalled_per_second=waiting / 2,
    )
    p = pressure_of(w)
    assert p.status == "measured"
    assert says in p.note
    assert f"{waiting:.1%}" in p.note


def test_lifetime_totals_judge_a_container_seen_once():
    base = window(ratio=0.9, lifetime=True, samples=1, covered_s=None)
    assert pressure_of(base).status == "not_exported"
    zero = replace(base, throttled_seconds_total=12.0, pressure_waiting_seconds_total=0.0)
    assert pressure_of(zero).status == "not_measured"
    assert "12.0 s since it started" in pressure_of(zero).note
    waited = replace(zero, pressure_waiting_seconds_total=3.5)
    p = pressure_of(waited)
    assert (p.status, p.waiting_per_second) == ("measured", None)
    assert "3.5 s in all since it started" in p.note
    barely = replace(zero, throttled_seconds_total=0.05)
    assert pressure_of(barely).status == "measured"


def test_the_advice_names_the_impact_of_the_throttling_only_where_pressure_is_measured():
    throttled = window(ratio=0.6, avg=550, p95=600, usage_max=600, throttled_s_per_s=0.5)
    measured = replace(throttled, pressure_waiting_per_second=0.25, pressure_stalled_per_second=0.1)
    zero = replace(throttled, pressure_waiting_per_second=0.0, pressure_stalled_per_second=0.0)

    with_impact = advise(facts(measured), POLICY)
    assert with_impact and "The throttling has an impact" in with_impact[0].detail
    assert "25.0%" in with_impact[0].detail
    for other in (throttled, zero):
        plan = advise(facts(other), POLICY)
        assert plan and "CPU pressure" not in plan[0].detail
        assert [r.kind for r in plan] == [r.kind for r in with_impact]


def test_the_explanation_carries_the_pressure_paragraph():
    throttled = window(ratio=0.6, avg=550, p95=600, usage_max=600, throttled_s_per_s=0.5)
    assert NOT_EXPORTED in explain_paragraphs(facts(throttled), ())
    zero = replace(throttled, pressure_waiting_per_second=0.0, pressure_stalled_per_second=0.0)
    assert any("not being measured on this node" in p for p in explain_paragraphs(facts(zero), ()))
