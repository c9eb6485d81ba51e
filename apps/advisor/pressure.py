"""CPU pressure (PSI) beside throttling: what a container's pressure figures say, and when they cannot be believed.
Pure Python (docs/domain.md#cpu-pressure-psi).

Throttling counts periods; pressure measures the waiting. `waiting` is the share of time at least one of the
container's tasks was runnable but not running (PSI "some"), `stalled` the share when all of them were ("full"). A
task held back by its quota is runnable and not running, so a container whose threads spent measurable time
throttled cannot have zero waiting: a zero there means pressure is not being measured, not that nothing waited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from .versions import KUBELET_PSI, KUBELET_PSI_DEFAULT, PSI, dotted
from .windows import WindowSummary

# Below this many seconds of waiting per second, a reading counts as zero (the kernel's totals are µs).
ZERO_WAITING_PER_SECOND = 1e-4
# Throttled thread-seconds per second from which some waiting must show (10 ms of every second).
THROTTLED_MUST_WAIT_PER_SECOND = 0.01
# Lifetime totals: throttled this long since the start, a measured container must show some waiting.
THROTTLED_MUST_WAIT_SECONDS = 0.1
# Waiting below this share of the time is low impact: the throttling delayed the container's work little.
LOW_IMPACT_WAITING = 0.01

PressureStatus = Literal["measured", "not_exported", "not_measured"]
PRESSURE_STATUSES: tuple[PressureStatus, ...] = get_args(PressureStatus)

NOT_EXPORTED = (
    "No CPU pressure from this source. The kubelet exports it (container_pressure_cpu_waiting_seconds_total and "
    f"…_stalled_seconds_total) from Kubernetes {dotted(KUBELET_PSI)} with the KubeletPSI feature gate, on by default "
    f"from {dotted(KUBELET_PSI_DEFAULT)}, on nodes with cgroup v2 and a kernel with PSI enabled (Linux "
    f"{dotted(PSI)} or later); the node agent reads cpu.pressure itself on cgroup v2."
)


@dataclass(frozen=True, slots=True)
class Pressure:
    status: PressureStatus
    waiting_per_second: float | None  # None unless measured
    stalled_per_second: float | None
    note: str  # one or two sentences for a person: what the figures mean here


def reads_zero_while_throttled(waiting: float | None, throttled_seconds_per_second: float | None) -> bool:
    """Whether a pressure figure is a zero that cannot be a measurement: the container's threads spent measurable
    time throttled, and a throttled task counts as waiting."""
    return (
        waiting is not None
        and waiting < ZERO_WAITING_PER_SECOND
        and throttled_seconds_per_second is not None
        and throttled_seconds_per_second >= THROTTLED_MUST_WAIT_PER_SECOND
    )


def pressure_of(window: WindowSummary) -> Pressure:
    """What the window's pressure figures say, judged against its throttled time."""
    if window.lifetime:
        return _lifetime_pressure(window)
    waiting, stalled = window.pressure_waiting_per_second, window.pressure_stalled_per_second
    if waiting is None:
        return Pressure("not_exported", None, None, NOT_EXPORTED)
    throttled = window.throttled_seconds_per_second
    if reads_zero_while_throttled(waiting, throttled):
        return Pressure("not_measured", None, None, _not_measured(f"{throttled or 0:.2f} s per second"))
    return Pressure("measured", waiting, stalled, _impact(window, waiting, stalled or 0.0))


def _lifetime_pressure(window: WindowSummary) -> Pressure:
    """A container seen once: its totals since the start give no rate, but a zero beside throttled time is still
    not a measurement."""
    waiting, throttled = window.pressure_waiting_seconds_total, window.throttled_seconds_total
    if waiting is None:
        return Pressure("not_exported", None, None, NOT_EXPORTED)
    if waiting < ZERO_WAITING_PER_SECOND and throttled is not None and throttled >= THROTTLED_MUST_WAIT_SECONDS:
        return Pressure("not_measured", None, None, _not_measured(f"{throttled:.1f} s since it started"))
    return Pressure(
        "measured",
        None,
        None,
        f"CPU pressure: some task of it waited for CPU {waiting:.1f} s in all since it started; one reading gives "
        "no share of the time, the next collection does.",
    )


def _not_measured(throttled: str) -> str:
    return (
        f"CPU pressure reads 0 although its threads spent {throttled} throttled. A throttled task waits for CPU and "
        "the kernel counts that wait as pressure, so pressure is not being measured on this node: PSI is off in its "
        "kernel (CONFIG_PSI_DEFAULT_DISABLED without psi=1 on the kernel command line, or psi=0), or the kubelet "
        "cannot read cpu.pressure. Zeros are not shown as figures."
    )


def _impact(window: WindowSummary, waiting: float, stalled: float) -> str:
    figures = (
        f"some task of it waited for CPU {waiting:.1%} of the time ({waiting:.3f} s per second) and all of them at "
        f"once {stalled:.1%}"
    )
    if not window.throttle_ratio:
        return f"CPU pressure: {figures}; it was not throttled, so that wait is contention with its neighbours."
    if waiting < LOW_IMPACT_WAITING:
        return (
            f"CPU pressure: {figures}. Throttled, but it hardly waited: the throttling cost it little in this window."
        )
    return f"CPU pressure: {figures}. The throttling has an impact: its work waited while held back by the quota."
