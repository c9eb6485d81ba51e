"""The kernel probe: does this kernel strand CFS quota (docs/domain.md#slice-expiry-bug)? No Django import.

Two measurements, each in a temporary cgroup under the lab root, removed afterwards:

(a) The work loop (Ivan Babrou's "Overly aggressive CFS"): one process does ≈5 ms of CPU work (a fixed number of
    Fibonacci steps calibrated to 5 ms of CPU time outside the cgroup) then sleeps 100 ms, under quota 20 ms / period
    100 ms. Per-iteration wall times: p50, p99, max, and the iterations of ≥ 50 ms ("throttled iterations").
(b) Indeed's fibtest: one fast process spinning plus N slow ones (100 steps, then 10 ms sleep; N = CPUs − 1 by
    default, as in Indeed's KubeCon 2019 talk) under quota 50 ms / period 100 ms. The CPU time obtained (cpuacct.usage
    delta) over 10 periods is compared with quota × periods. The window is aligned on the kernel's own period
    boundaries: it starts and ends when cpu.stat's nr_periods ticks (polled every 0.5 ms), which is when the quota is
    refilled.

While the probe runs, its cgroups and the lab root get ``priority_shares`` (default 10240, ten CPUs' worth) so that
the quota, not other load on the machine, is what limits them: on a shared 2-CPU machine at load 4, fibtest at the
default 1024 shares got 290–390 ms of its 500 with no throttled period at all, and 493–505 ms with 10240. The quota
still caps the probe at 0.5 CPU, so the extra weight cannot take more than that from anyone. The root's previous
shares are restored afterwards.

Decision arithmetic (defaults; C = CPUs; P = period):

- A throttled work-loop iteration waits for the next refill, so it lasts up to a whole period (≈100 ms); an
  unthrottled one ≈5 ms plus scheduling delay. ``LONG_ITERATION_MS`` = 50 ms (half a period) splits the two.
- The work loop can never exhaust its quota on a correct kernel: a 100 ms window overlaps at most
  ceil((P + w) / (w + s)) = ceil(105 / 105) = 1 burst of w = 5 ms, far under the 20 ms quota. So a throttled
  period (Δnr_throttled > 0) together with long iterations is the bug's symptom, not the workload's demand; long
  iterations without any throttled period are scheduling delay from other load. (w is the larger of the target and
  the p99 CPU time the iterations really took: on a shared machine the same work can cost more CPU time inside the
  cgroup than during calibration, e.g. with a busy hyperthread sibling.)
- On affected kernels each CPU can strand up to min_cfs_rq_runtime = 1 ms of quota per period (commit de53fd7aedb1),
  i.e. up to (C − 1) ms per period on the CPUs the spinning task is not on (docs/domain.md#stranded-quota). This
  bounds what the probe can see on this machine:
  * fibtest loses at most (C − 1) ms of its 50 ms per period. It counts as low CPU below
    ``FIBTEST_LOW_RATIO`` = 90 % of quota × periods (a fixed kernel gives 96–108 %: the talk measured 482 ms of
    500 on a fixed 88-CPU machine and 530–539 ms on 1–16 CPUs, and this probe's aligned window adds at most a poll
    interval of error at each end), so it can only show the bug when (C − 1) ms ≥ 10 % × 50 ms = 5 ms: C ≥ 6.
    The affected 88-CPU machine of the talk got 183 ms (37 %).
  * The work loop can only be pushed over its 20 ms quota when ≤5 ms of work + (C − 1) ms stranded > 20 ms: C ≥ 17.
  On 2 CPUs at most 1 ms per period (2 % of the fibtest's quota) can be stranded: neither test can show the bug, so
  a clean result is "inconclusive", not "does not show".
- fibtest is only meaningful when its fast process actually ran out of quota: if fewer than half of the periods were
  throttled, other load starved the cgroup and CPU time obtained says nothing about the quota ("inconclusive").

Verdict: "shows slice-expiry throttling" when fibtest got < 90 % of its quota while throttled in ≥ 50 % of periods, or
when ≥ max(2, 1 %) work-loop iterations took ≥ 50 ms and the cgroup was throttled at least once; "does not show
slice-expiry throttling" when neither happened and at least one test could have shown the bug on this many CPUs;
otherwise "inconclusive" with the reason.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from apps.clusters.kubelet import weight_from_shares
from apps.lab import cgroups
from apps.lab.cgroups import DEFAULT_ROOT, PROBE_PREFIX, CgroupError, CpuController
from apps.lab.workloads import REPO_ROOT, calibrate_work_units, child_env, command_line, stop_child
from apps.telemetry.counters import throttle_ratio
from apps.words import plural

VERDICT_SHOWS = "shows slice-expiry throttling"
VERDICT_DOES_NOT_SHOW = "does not show slice-expiry throttling"
VERDICT_INCONCLUSIVE = "inconclusive"

LONG_ITERATION_MS = 50.0
FIBTEST_LOW_RATIO = 0.90
FIBTEST_MIN_THROTTLED_RATIO = 0.5
STRANDED_MS_PER_CPU = 1.0  # min_cfs_rq_runtime
_POLL_S = 0.0005


class ProbeError(RuntimeError):
    """The probe could not run (no cgroup access, bad parameters, a workload that failed); the message says why."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Every figure of one probe run. Times in ms unless the name says otherwise; ratios 0–1."""

    kernel_release: str
    cpus: int
    cgroup_version: int
    cfs_slice_us: int | None
    # (a) the work loop (docs/domain.md#work-loop)
    workloop_iterations: int
    workloop_work_units: int  # Fibonacci steps per iteration, calibrated to workloop_target_work_ms of CPU
    workloop_target_work_ms: float
    workloop_work_cpu_p50_ms: float  # CPU time one iteration actually took, as the process measured it
    workloop_max_work_ms_per_period: float  # the loop's own most demand in one period, from its measured work
    workloop_sleep_ms: float
    workloop_quota_us: int
    workloop_period_us: int
    workloop_wall_p50_ms: float
    workloop_wall_p99_ms: float
    workloop_wall_max_ms: float
    workloop_throttled_iterations: int  # iterations of ≥ LONG_ITERATION_MS
    workloop_nr_periods: int  # Δ over the timed iterations
    workloop_nr_throttled: int
    # (b) fibtest (docs/domain.md#fibtest)
    fibtest_slow_processes: int
    fibtest_quota_us: int
    fibtest_period_us: int
    fibtest_periods: int  # Δnr_periods of the measured window (the requested count unless a tick was missed)
    fibtest_nr_throttled: int
    fibtest_cpu_ms: float  # CPU time the cgroup obtained in the window
    fibtest_expected_cpu_ms: float  # quota × periods
    fibtest_cpu_ratio: float  # obtained / expected
    fibtest_wall_s: float
    # what this machine can show
    max_stranded_ms_per_period: float  # (CPUs − 1) × min_cfs_rq_runtime
    fibtest_can_show_bug: bool
    workloop_can_show_bug: bool
    verdict: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _WorkloopFigures:
    work_units: int
    wall_ms: list[float]
    cpu_ms: list[float]
    nr_periods: int
    nr_throttled: int


@dataclass(frozen=True, slots=True)
class _FibtestFigures:
    periods: int
    nr_throttled: int
    cpu_ms: float
    wall_s: float


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0–100) of a non-empty sequence: the smallest value ≥ q % of the values."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def workloop_max_work_ms(work_ms: float, sleep_ms: float, period_us: int) -> float:
    """The most work-loop CPU time one period can hold: bursts of ``work_ms`` every ``work_ms + sleep_ms``."""
    period_ms = period_us / 1000
    return work_ms * math.ceil((period_ms + work_ms) / (work_ms + sleep_ms))


def _weight_file(controller: CpuController) -> str:
    return "cpu.shares" if controller.version == 1 else "cpu.weight"


def _weight_value(controller: CpuController, shares: int) -> str:
    return str(shares) if controller.version == 1 else str(weight_from_shares(shares))


@contextlib.contextmanager
def _root_priority(controller: CpuController, root: str, shares: int) -> Iterator[None]:
    """Raise the lab root's shares while the probe runs; restore them afterwards (see the module docstring)."""
    path = os.path.join(controller.cpu_dir(root), _weight_file(controller))
    previous = Path(path).read_text().strip()
    wanted = _weight_value(controller, shares)
    Path(path).write_text(wanted)
    try:
        yield
    finally:
        # Another probe running at the same time may have raised it first: then leave its value to it.
        if previous != wanted:
            with contextlib.suppress(OSError):
                Path(path).write_text(previous)


def _run_workloop(
    controller: CpuController,
    root: str,
    name: str,
    iterations: int,
    work_units: int,
    sleep_ms: float,
    quota_us: int,
    period_us: int,
    shares: int,
) -> _WorkloopFigures:
    params = {"work_units": work_units, "sleep_ms": sleep_ms, "iterations": iterations, "report": True}
    with cgroups.temporary_cgroup(controller, root, name, quota_us, period_us, shares) as cpu_dir:
        argv = command_line("workloop", params, cgroups.procs_files(controller, root, name))
        child = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdin is not None and child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise ProbeError(f"the work loop did not start (exit status {child.wait(timeout=10)})")
            before = cgroups.read_cpu_stat(cpu_dir)
            timeout_s = iterations * (sleep_ms + 200) / 1000 + 30  # even if every iteration were throttled
            child.stdin.write("go\n")
            child.stdin.flush()
            out = _report_line(child, timeout_s)
            # Read before the child exits: the interpreter's own shutdown (tens of ms of CPU on a loaded machine)
            # would otherwise count against the 20 ms quota and show as a throttled period of the loop.
            after = cgroups.read_cpu_stat(cpu_dir)
            child.stdin.close()
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise ProbeError("the work loop did not finish in time") from None
        finally:
            stop_child(child)
        if child.returncode != 0:
            raise ProbeError(f"the work loop failed with exit status {child.returncode}")
    report = json.loads(out)
    return _WorkloopFigures(
        work_units,
        report["wall_ms"],
        report["cpu_ms"],
        after["nr_periods"] - before["nr_periods"],
        after["nr_throttled"] - before["nr_throttled"],
    )


def _report_line(child: subprocess.Popen[str], timeout_s: float) -> str:
    """The work loop's JSON report, the line it prints when its last iteration is done (before it exits)."""
    assert child.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([child.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = child.stdout.readline()
        if not line:
            raise ProbeError(f"the work loop stopped before its report (exit status {child.wait(timeout=10)})")
        if line.startswith("{"):
            return line
    raise subprocess.TimeoutExpired(child.args, timeout_s)


def _wait_period_tick(cpu_dir: str, after_periods: int, timeout_s: float) -> dict[str, int]:
    """Poll cpu.stat until nr_periods exceeds ``after_periods`` (the refill instant); returns that cpu.stat."""
    deadline = time.monotonic() + timeout_s
    while True:
        stat = cgroups.read_cpu_stat(cpu_dir)
        if stat["nr_periods"] > after_periods:
            return stat
        if time.monotonic() > deadline:
            raise ProbeError("fibtest's cgroup stopped counting periods: is its fast process running?")
        time.sleep(_POLL_S)


def _run_fibtest(
    controller: CpuController,
    root: str,
    name: str,
    slow: int,
    periods: int,
    quota_us: int,
    period_us: int,
    shares: int,
) -> _FibtestFigures:
    usage_rel = os.path.join(root, name)
    with cgroups.temporary_cgroup(controller, root, name, quota_us, period_us, shares) as cpu_dir:
        argv = command_line("fibtest", {"slow": slow}, cgroups.procs_files(controller, root, name))
        child = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdin=subprocess.DEVNULL)
        try:
            # Wait for the whole tree (leader + fast + slow) to be in the cgroup, then one settling period.
            deadline = time.monotonic() + 15
            while len(cgroups.read_pids(cpu_dir)) < 2 + slow:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise ProbeError(f"fibtest did not start its {1 + slow} processes")
                time.sleep(0.01)
            time.sleep(period_us / 1e6)
            period_timeout_s = 3 * period_us / 1e6 + 1
            start = _wait_period_tick(cpu_dir, cgroups.read_cpu_stat(cpu_dir)["nr_periods"], period_timeout_s)
            usage_start_ns, wall_start = cgroups.read_usage_ns(controller, usage_rel), time.monotonic()
            stat = start
            while stat["nr_periods"] < start["nr_periods"] + periods:
                stat = _wait_period_tick(cpu_dir, stat["nr_periods"], period_timeout_s)
            usage_end_ns, wall_end = cgroups.read_usage_ns(controller, usage_rel), time.monotonic()
        finally:
            stop_child(child)
    return _FibtestFigures(
        periods=stat["nr_periods"] - start["nr_periods"],
        nr_throttled=stat["nr_throttled"] - start["nr_throttled"],
        cpu_ms=(usage_end_ns - usage_start_ns) / 1e6,
        wall_s=wall_end - wall_start,
    )


def decide(
    cpus: int,
    workloop_iterations: int,
    workloop_long: int,
    workloop_nr_throttled: int,
    workloop_max_work_ms: float,
    workloop_quota_ms: float,
    fibtest_cpu_ms: float,
    fibtest_expected_ms: float,
    fibtest_periods: int,
    fibtest_nr_throttled: int,
    fibtest_quota_ms: float,
    period_ms: float,
) -> tuple[str, str, bool, bool]:
    """The verdict and its reason from the probe's figures (see the module docstring for the arithmetic).

    Returns (verdict, reason, fibtest_can_show_bug, workloop_can_show_bug).
    """
    stranded_ms = max(0, cpus - 1) * STRANDED_MS_PER_CPU
    fibtest_can_show = stranded_ms >= (1 - FIBTEST_LOW_RATIO) * fibtest_quota_ms
    workloop_can_show = workloop_max_work_ms + stranded_ms > workloop_quota_ms
    ratio = fibtest_cpu_ms / fibtest_expected_ms if fibtest_expected_ms else 0.0
    throttled_share = throttle_ratio(fibtest_nr_throttled, fibtest_periods) or 0.0
    fib_line = (
        f"fibtest got {fibtest_cpu_ms:.0f} of {fibtest_expected_ms:.0f} ms ({ratio:.0%}) "
        f"while throttled in {fibtest_nr_throttled} of {plural(fibtest_periods, 'period')}"
    )
    loop_line = (
        f"{workloop_long} of {plural(workloop_iterations, 'work-loop iteration')} took ≥ {LONG_ITERATION_MS:.0f} ms "
        f"({plural(workloop_nr_throttled, 'throttled period')})"
    )
    signals: list[str] = []
    fib_valid = throttled_share >= FIBTEST_MIN_THROTTLED_RATIO
    if fib_valid and ratio < FIBTEST_LOW_RATIO:
        signals.append(fib_line)
    if workloop_long >= max(2, math.ceil(0.01 * workloop_iterations)) and workloop_nr_throttled > 0:
        signals.append(
            loop_line + f" although the loop needs at most {workloop_max_work_ms:g} of its {workloop_quota_ms:g} ms"
        )
    if signals:
        reason = "; ".join(signals)
        if not (fibtest_can_show or workloop_can_show):
            reason += (
                f" — more than the {STRANDED_MS_PER_CPU:g} ms per CPU the bug strands can explain on {plural(cpus, 'CPU')}:"
                " check for another cause (other load, CPU frequency)"
            )
        return VERDICT_SHOWS, reason, fibtest_can_show, workloop_can_show
    if not fib_valid:
        return (
            VERDICT_INCONCLUSIVE,
            f"{fib_line}: the fast process ran out of quota in under half the periods, so other load starved the "
            "cgroup and the CPU time obtained says nothing about the quota; rerun on a quieter machine",
            fibtest_can_show,
            workloop_can_show,
        )
    measured = f"measured: {fib_line}; {loop_line}"
    if workloop_long and not workloop_nr_throttled:
        measured += " — long iterations without a throttled period are scheduling delay from other load"
    if not (fibtest_can_show or workloop_can_show):
        return (
            VERDICT_INCONCLUSIVE,
            f"on {plural(cpus, 'CPU')} the bug can strand at most {stranded_ms:g} ms of quota per {period_ms:g} ms period: "
            f"{stranded_ms / fibtest_quota_ms:.0%} of fibtest's {fibtest_quota_ms:g} ms quota (it detects a loss "
            f"of {1 - FIBTEST_LOW_RATIO:.0%}, i.e. needs ≥ {math.ceil(1 + (1 - FIBTEST_LOW_RATIO) * fibtest_quota_ms)} "
            f"CPUs), and not enough to push the work loop's ≤ {workloop_max_work_ms:g} ms per period over its "
            f"{workloop_quota_ms:g} ms quota. The figures are consistent with the quota, but only a probe on a node "
            f"with more CPUs (ideally the production node size) can rule the bug out. {measured}",
            fibtest_can_show,
            workloop_can_show,
        )
    return VERDICT_DOES_NOT_SHOW, measured, fibtest_can_show, workloop_can_show


def run_probe(
    root: str = DEFAULT_ROOT,
    iterations: int = 200,
    work_ms: float = 5.0,
    sleep_ms: float = 100.0,
    workloop_quota_us: int = 20_000,
    fibtest_quota_us: int = 50_000,
    fibtest_periods: int = 10,
    fibtest_slow: int | None = None,
    period_us: int = 100_000,
    priority_shares: int = 10_240,
    controller: CpuController | None = None,
) -> ProbeResult:
    """Run both measurements (≈ iterations × (work + sleep) + 1.5 s of wall time) and decide. Long because the
    result records every figure both measurements took (33 fields), each named where it is filled.

    ``fibtest_slow`` defaults to CPUs − 1 (at least 1). Raises ProbeError when the lab cannot run here, when the
    parameters would make the work loop exceed its own quota, or when a workload fails; the temporary cgroups are
    removed in every case.
    """
    if iterations < 1 or fibtest_periods < 1:
        raise ProbeError(f"iterations ({iterations}) and fibtest periods ({fibtest_periods}) must be at least 1")
    if work_ms <= 0 or sleep_ms < 0:
        raise ProbeError(f"work_ms must be positive and sleep_ms not negative (got {work_ms}, {sleep_ms})")
    max_work_ms = workloop_max_work_ms(work_ms, sleep_ms, period_us)
    if max_work_ms >= workloop_quota_us / 1000:
        raise ProbeError(
            f"{work_ms:g} ms of work every {work_ms + sleep_ms:g} ms can need {max_work_ms:g} ms per period, "
            f"not under the {workloop_quota_us / 1000:g} ms quota: a correct kernel would throttle it too"
        )
    controller = controller or cgroups.detect_cpu_controller()
    ok, why = cgroups.can_run_lab(root, controller)
    if not ok or controller is None:
        raise ProbeError(f"the probe cannot run here: {why}")
    if controller.usage_dir(root) is None:
        raise ProbeError("no cpuacct hierarchy is mounted: fibtest's CPU time cannot be read")
    cpus = os.cpu_count() or 1
    slow = fibtest_slow if fibtest_slow is not None else max(1, cpus - 1)
    tag = f"{PROBE_PREFIX}{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    root_existed = os.path.isdir(controller.cpu_dir(root))
    try:
        work_units = calibrate_work_units(work_ms)  # here, outside any quota
        cgroups.ensure_root(controller, root)
        with _root_priority(controller, root, priority_shares):
            loop = _run_workloop(
                controller,
                root,
                f"{tag}-workloop",
                iterations,
                work_units,
                sleep_ms,
                workloop_quota_us,
                period_us,
                priority_shares,
            )
            fib = _run_fibtest(
                controller,
                root,
                f"{tag}-fibtest",
                slow,
                fibtest_periods,
                fibtest_quota_us,
                period_us,
                priority_shares,
            )
    except (CgroupError, OSError, ValueError, KeyError) as exc:
        raise ProbeError(f"the probe failed: {exc}") from exc
    finally:
        if not root_existed and not cgroups.children(controller, root):
            cgroups.remove_root_if_empty(controller, root)
    long_iterations = sum(1 for ms in loop.wall_ms if ms >= LONG_ITERATION_MS)
    # The same work can cost more CPU time inside the cgroup than during calibration (a busy hyperthread sibling,
    # a lower clock): judge the loop's own demand by what its iterations really took.
    measured_work_ms = max(work_ms, percentile(loop.cpu_ms, 99))
    max_work_ms = workloop_max_work_ms(measured_work_ms, sleep_ms, period_us)
    expected_ms = fibtest_quota_us / 1000 * fib.periods
    verdict, reason, fib_can_show, loop_can_show = decide(
        cpus=cpus,
        workloop_iterations=len(loop.wall_ms),
        workloop_long=long_iterations,
        workloop_nr_throttled=loop.nr_throttled,
        workloop_max_work_ms=round(max_work_ms, 3),
        workloop_quota_ms=workloop_quota_us / 1000,
        fibtest_cpu_ms=fib.cpu_ms,
        fibtest_expected_ms=expected_ms,
        fibtest_periods=fib.periods,
        fibtest_nr_throttled=fib.nr_throttled,
        fibtest_quota_ms=fibtest_quota_us / 1000,
        period_ms=period_us / 1000,
    )
    slice_text = Path("/proc/sys/kernel/sched_cfs_bandwidth_slice_us").read_text().strip()
    return ProbeResult(
        kernel_release=os.uname().release,
        cpus=cpus,
        cgroup_version=controller.version,
        cfs_slice_us=int(slice_text) if slice_text.isdigit() else None,
        workloop_iterations=len(loop.wall_ms),
        workloop_work_units=loop.work_units,
        workloop_target_work_ms=work_ms,
        workloop_work_cpu_p50_ms=round(percentile(loop.cpu_ms, 50), 3),
        workloop_max_work_ms_per_period=round(max_work_ms, 3),
        workloop_sleep_ms=sleep_ms,
        workloop_quota_us=workloop_quota_us,
        workloop_period_us=period_us,
        workloop_wall_p50_ms=round(percentile(loop.wall_ms, 50), 3),
        workloop_wall_p99_ms=round(percentile(loop.wall_ms, 99), 3),
        workloop_wall_max_ms=round(max(loop.wall_ms), 3),
        workloop_throttled_iterations=long_iterations,
        workloop_nr_periods=loop.nr_periods,
        workloop_nr_throttled=loop.nr_throttled,
        fibtest_slow_processes=slow,
        fibtest_quota_us=fibtest_quota_us,
        fibtest_period_us=period_us,
        fibtest_periods=fib.periods,
        fibtest_nr_throttled=fib.nr_throttled,
        fibtest_cpu_ms=round(fib.cpu_ms, 3),
        fibtest_expected_cpu_ms=expected_ms,
        fibtest_cpu_ratio=round(fib.cpu_ms / expected_ms, 4) if expected_ms else 0.0,
        fibtest_wall_s=round(fib.wall_s, 3),
        max_stranded_ms_per_period=max(0, cpus - 1) * STRANDED_MS_PER_CPU,
        fibtest_can_show_bug=fib_can_show,
        workloop_can_show_bug=loop_can_show,
        verdict=verdict,
        reason=reason,
    )
