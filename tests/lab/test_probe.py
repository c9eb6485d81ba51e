"""The kernel probe: its decision from figures (Indeed's talk's and the CFS quota bug test's), what the command
prints, and a real run on this kernel."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from apps.lab import cgroups, probe
from apps.lab.cgroups import CpuController
from apps.lab.probe import VERDICT_DOES_NOT_SHOW, VERDICT_INCONCLUSIVE, VERDICT_SHOWS, ProbeError


def _decide(
    cpus: int, cpu_ms: float, throttled: int, workloop_long: int = 0, workloop_nr_throttled: int = 0
) -> tuple[str, str, bool, bool]:
    """The defaults' figures: work loop 200 × 5 ms under 20 ms / 100 ms; fibtest 10 periods of 50 ms."""
    return probe.decide(
        cpus=cpus,
        workloop_iterations=200,
        workloop_long=workloop_long,
        workloop_nr_throttled=workloop_nr_throttled,
        workloop_max_work_ms=5.0,
        workloop_quota_ms=20.0,
        fibtest_cpu_ms=cpu_ms,
        fibtest_expected_ms=500.0,
        fibtest_periods=10,
        fibtest_nr_throttled=throttled,
        fibtest_quota_ms=50.0,
        period_ms=100.0,
    )


# --- the decision (pure) ----------------------------------------------------------------------------------------


def test_the_talks_affected_88_core_machine_shows_the_bug() -> None:
    verdict, reason, fibtest_can_show, _ = _decide(88, cpu_ms=183, throttled=10)  # Indeed's talk: 183 ms of 500
    assert verdict == VERDICT_SHOWS and fibtest_can_show
    assert "183 of 500 ms" in reason


def test_the_talks_fixed_88_core_machine_does_not_show_the_bug() -> None:
    verdict, reason, _, _ = _decide(88, cpu_ms=482, throttled=10)  # Indeed's talk, fixed: 482 ms
    assert verdict == VERDICT_DOES_NOT_SHOW
    assert "482 of 500 ms" in reason


def test_two_cpus_cannot_show_the_bug_so_a_clean_run_is_inconclusive() -> None:
    verdict, reason, fibtest_can_show, workloop_can_show = _decide(2, cpu_ms=498, throttled=10)
    assert verdict == VERDICT_INCONCLUSIVE
    assert not fibtest_can_show and not workloop_can_show
    assert "on 2 CPUs" in reason and "at most 1 ms" in reason and "2% of fibtest's 50 ms" in reason


def test_fibtest_can_see_the_bug_from_six_cpus() -> None:
    # (C − 1) × 1 ms stranded must reach 10 % of the 50 ms quota: C ≥ 6.
    assert not _decide(5, cpu_ms=500, throttled=10)[2]
    assert _decide(6, cpu_ms=500, throttled=10)[2]


def test_the_work_loop_can_see_the_bug_only_on_many_cpus() -> None:
    # 5 ms of work + (C − 1) ms stranded must exceed the 20 ms quota: C ≥ 17.
    assert not _decide(16, cpu_ms=500, throttled=10)[3]
    assert _decide(17, cpu_ms=500, throttled=10)[3]


def test_a_starved_fibtest_is_inconclusive_not_a_bug() -> None:
    # Other load kept the cgroup from even using its quota: few throttled periods, low CPU.
    verdict, reason, _, _ = _decide(88, cpu_ms=300, throttled=1)
    assert verdict == VERDICT_INCONCLUSIVE and "starved" in reason


def test_throttled_work_loop_iterations_show_the_bug() -> None:
    verdict, reason, _, _ = _decide(40, cpu_ms=495, throttled=10, workloop_long=12, workloop_nr_throttled=12)
    assert verdict == VERDICT_SHOWS and "12 of 200 work-loop iterations" in reason


def test_slow_iterations_without_a_throttled_period_are_other_load() -> None:
    verdict, reason, _, _ = _decide(40, cpu_ms=495, throttled=10, workloop_long=12, workloop_nr_throttled=0)
    assert verdict == VERDICT_DOES_NOT_SHOW and "scheduling delay" in reason


def test_a_single_slow_iteration_is_not_enough() -> None:
    assert _decide(40, cpu_ms=495, throttled=10, workloop_long=1, workloop_nr_throttled=1)[0] == VERDICT_DOES_NOT_SHOW


def test_percentiles_use_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert probe.percentile(values, 50) == 50.0
    assert probe.percentile(values, 99) == 99.0
    assert probe.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        probe.percentile([], 50)


def test_the_work_loops_demand_per_period() -> None:
    assert probe.workloop_max_work_ms(5, 100, 100_000) == 5  # the CFS quota bug test: one burst per period
    assert probe.workloop_max_work_ms(5, 10, 100_000) == 35  # a burst every 15 ms: 7 can touch one period


def test_a_work_loop_that_would_exceed_its_own_quota_is_refused_up_front() -> None:
    with pytest.raises(ProbeError, match="a correct kernel would throttle it too"):
        probe.run_probe(root="cputune-labtest-never", sleep_ms=10)


# --- a real run (root) -----------------------------------------------------------------------------------------


def test_the_command_prints_plain_names_and_singular_counts() -> None:
    from apps.lab.management.commands.kernel_probe import summary_lines

    verdict, reason, fib_can_show, loop_can_show = _decide(
        2, cpu_ms=498, throttled=10, workloop_long=1, workloop_nr_throttled=1
    )
    result = probe.ProbeResult(
        kernel_release="6.1.0", cpus=2, cgroup_version=1, cfs_slice_us=5000, workloop_iterations=200,
        workloop_work_units=1000, workloop_target_work_ms=5.0, workloop_work_cpu_p50_ms=5.0,
        workloop_max_work_ms_per_period=5.0, workloop_sleep_ms=100.0, workloop_quota_us=20_000,
        workloop_period_us=100_000, workloop_wall_p50_ms=5.2, workloop_wall_p99_ms=7.0, workloop_wall_max_ms=60.0,
        workloop_throttled_iterations=1, workloop_nr_periods=210, workloop_nr_throttled=1, fibtest_slow_processes=1,
        fibtest_quota_us=50_000, fibtest_period_us=100_000, fibtest_periods=10, fibtest_nr_throttled=10,
        fibtest_cpu_ms=498.0, fibtest_expected_cpu_ms=500.0, fibtest_cpu_ratio=0.996, fibtest_wall_s=1.0,
        max_stranded_ms_per_period=1.0, fibtest_can_show_bug=fib_can_show, workloop_can_show_bug=loop_can_show,
        verdict=verdict, reason=reason,
    )  # fmt: skip
    text = "\n".join(summary_lines(result))
    assert "Work loop (Ivan Babrou's CFS quota bug test): 200 iterations" in text
    assert "1 iteration took ≥ 50 ms; throttled in 1 of 210 periods" in text
    assert "Indeed's fibtest: 1 fast + 1 slow process under 50 ms / 100 ms for 10 periods" in text
    assert "(1 throttled period)" in text and "on 2 CPUs the bug can strand" in text
    assert "seed" not in text and "(s)" not in text


@pytest.mark.root
def test_the_probe_on_this_kernel_matches_the_quota_and_cleans_up(controller: CpuController, lab_root: str) -> None:
    started = time.monotonic()
    result = probe.run_probe(root=lab_root, iterations=30, fibtest_periods=10, controller=controller)
    elapsed_s = time.monotonic() - started

    assert elapsed_s < 15
    assert result.kernel_release == os.uname().release and result.cpus == os.cpu_count()
    # (a) 5 ms of work in a 20 ms quota: a fixed kernel never throttles it.
    assert result.workloop_iterations == 30
    # Calibrated to 5 ms of CPU; on a shared VM the same work costs up to ~2× more CPU time when a hyperthread
    # sibling is busy (9 ms seen here). What matters is that the loop stays well under its 20 ms quota.
    assert 2.5 <= result.workloop_work_cpu_p50_ms <= 12.5
    assert result.workloop_max_work_ms_per_period < 20
    assert result.workloop_nr_throttled == 0
    assert result.workloop_throttled_iterations <= 1  # rare: only a scheduling hiccup could make one
    assert result.workloop_wall_p50_ms < 20
    assert result.workloop_nr_periods >= 25  # ~30 × 105 ms of runnable time
    # (b) fibtest obtains quota × periods. Tolerance ±10 %: fixed kernels measured 96–108 % in the talk
    # (482–539 ms of 500), this probe's window is aligned on the refills; an affected kernel with ≥ 6 CPUs loses
    # more than 10 % (the talk's 88-CPU machine got 37 %).
    assert result.fibtest_periods == 10
    assert result.fibtest_expected_cpu_ms == 500.0
    assert 0.9 <= result.fibtest_cpu_ratio <= 1.1, result.fibtest_cpu_ms
    assert result.fibtest_nr_throttled >= 5  # the fast process really ran out of quota
    assert 0.9 <= result.fibtest_wall_s <= 1.3
    if result.cpus < 6:
        assert result.verdict == VERDICT_INCONCLUSIVE and f"on {result.cpus} CPUs" in result.reason
    else:
        assert result.verdict == VERDICT_DOES_NOT_SHOW, result.reason
    assert json.loads(json.dumps(result.as_dict()))["verdict"] == result.verdict
    # Nothing left: the probe's cgroups are gone, and the root it created with them.
    assert not any(os.path.exists(os.path.join(mount, lab_root)) for mount in controller.hierarchies)


@pytest.mark.root
def test_the_probe_leaves_a_running_labs_root_and_its_shares_as_they_were(
    controller: CpuController, lab_root: str
) -> None:
    cgroups.ensure_root(controller, lab_root)
    cgroups.create_cgroup(controller, lab_root, cgroups.CgroupSettings("kubepods", 2048, None, 100_000))
    shares_file = Path(controller.cpu_dir(lab_root), "cpu.shares" if controller.version == 1 else "cpu.weight")
    before = shares_file.read_text()
    probe.run_probe(root=lab_root, iterations=3, fibtest_periods=2, controller=controller)
    assert cgroups.children(controller, lab_root) == ["kubepods"]
    assert shares_file.read_text() == before
