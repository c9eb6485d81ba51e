"""One measured run: a lab workload in a throwaway cgroup with given quota, shares and process count, read at period
resolution, with a small request loop beside it whose response times are the latency a user of the container feels.

The request loop is the lab's work loop (0.5 ms of CPU every 37 ms, 14m: small beside a 50m limit) in the same
cgroup, so it waits whenever the container is throttled. cpu.stat is read period by period with the node agent's own
sampler (`sample_periods`), so the lab's evidence is what production's agent sends.
"""

from __future__ import annotations

import errno
import json
import math
import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from agent.cputune_agent import PeriodSample, parse_cpu_list, sample_periods
from apps.lab import cgroups
from apps.lab.cgroups import CpuController
from apps.lab.workloads import REPO_ROOT, ParamValue, child_env, command_line, normalize_params, stop_child
from apps.telemetry.counters import throttle_ratio

VERIFY_ROOT = "cputune-verify"
REQUEST_WORK_MS = 0.5
REQUEST_EVERY_MS = 37.0  # not a divisor of the 100 ms period: the requests drift across it
_POLL_S = 0.004
CPUSET_MOUNT = "/sys/fs/cgroup/cpuset"  # cgroup v1's cpuset controller, where the static CPU manager pins


class RunError(RuntimeError):
    """A run could not be made or read (no controller, a workload that did not start, a missing report)."""


@dataclass(frozen=True, slots=True)
class Run:
    """What the kernel counted over one run, and what the request loop felt."""

    seconds: float
    periods: int
    throttled_periods: int
    throttled_us: float
    usage_us: float
    period_throttled_us: tuple[float, ...]  # one per counted period
    usage_per_second_mcpu: tuple[float, ...]  # CPU used in each whole second
    latency_ms: tuple[float, ...]  # each request's response time, from when it was due to when it was done

    @property
    def ratio(self) -> float | None:
        return throttle_ratio(self.throttled_periods, self.periods)

    @property
    def usage_mcpu(self) -> float:
        return self.usage_us / self.seconds / 1000 if self.seconds else 0.0

    def latency_p95_ms(self) -> float | None:
        if not self.latency_ms:
            return None
        ordered = sorted(self.latency_ms)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def _throttled_us(stat: Mapping[str, int]) -> float:
    if "throttled_time" in stat:  # cgroup v1: ns
        return stat["throttled_time"] / 1000
    return float(stat.get("throttled_usec", 0))


def measure(
    controller: CpuController,
    kind: str,
    params: Mapping[str, object],
    quota_us: int | None,
    period_us: int,
    shares: int,
    seconds: float,
    name: str = "run",
    pinned_cpus: int | None = None,
) -> Run:
    """Run the workload for about `seconds` under the quota (None: none) and read what the kernel counted; with
    `pinned_cpus`, on that many CPUs of its own (cpuset), as the static CPU manager gives whole cores."""
    normalized: dict[str, ParamValue] = normalize_params(kind, params)
    iterations = max(10, int(seconds * 1000 / REQUEST_EVERY_MS))
    loop = normalize_params(
        "workloop",
        {
            "work_ms": REQUEST_WORK_MS,
            "sleep_ms": REQUEST_EVERY_MS - REQUEST_WORK_MS,
            "iterations": iterations,
            "report": True,
        },
    )
    name = f"{name}-{os.getpid()}"  # two runs at once (tests in parallel) never share a cgroup
    with ExitStack() as stack:
        # The cpuset is left last: the cpu cgroup's removal kills what is left of the workload first.
        pinned = stack.enter_context(cpuset(name, pinned_cpus)) if pinned_cpus is not None else None
        cpu_dir = stack.enter_context(
            cgroups.temporary_cgroup(controller, VERIFY_ROOT, name, quota_us, period_us, shares)
        )
        procs = cgroups.procs_files(controller, VERIFY_ROOT, name) + ([pinned] if pinned else [])
        workload = subprocess.Popen(command_line(kind, normalized, procs), cwd=REPO_ROOT, env=child_env(), text=True)
        requests = subprocess.Popen(
            command_line("workloop", loop, procs),
            cwd=REPO_ROOT,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            return _read_run(
                controller, name, cpu_dir, requests, iterations * (REQUEST_EVERY_MS / 1000 + 2 * period_us / 1e6)
            )
        finally:
            stop_child(requests)
            stop_child(workload)


@contextmanager
def cpuset(name: str, cpus: int, mount: str = CPUSET_MOUNT) -> Iterator[str]:
    """A cpuset cgroup ``<mount>/cputune-verify/<name>`` holding CPUs 0 … cpus−1 for one run; yields its
    cgroup.procs and removes it (its processes must have exited) on the way out."""
    root, here = Path(mount), Path(mount, VERIFY_ROOT)
    if not (root / "cpuset.cpus").is_file():
        raise RunError(f"no cgroup v1 cpuset controller at {mount}: whole cores cannot be pinned here")
    available = sorted(parse_cpu_list((root / "cpuset.effective_cpus").read_text()))
    if cpus < 1 or cpus > len(available):
        raise RunError(f"cannot pin {cpus} CPUs: this machine has {len(available)}")
    mems = (root / "cpuset.mems").read_text().strip()
    here.mkdir(exist_ok=True)
    # A v1 cpuset takes no process until it has CPUs and memory nodes; a child's must lie within its parent's.
    (here / "cpuset.cpus").write_text((root / "cpuset.cpus").read_text())
    (here / "cpuset.mems").write_text(mems)
    run = here / name
    run.mkdir()
    try:
        (run / "cpuset.cpus").write_text(",".join(str(cpu) for cpu in available[:cpus]))
        (run / "cpuset.mems").write_text(mems)
        yield str(run / "cgroup.procs")
    finally:
        for _ in range(50):  # killed processes leave the cgroup a moment after they are reaped
            try:
                run.rmdir()
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                time.sleep(0.02)
        with suppress(OSError):  # another run's cpuset is still there
            here.rmdir()


def _read_run(
    controller: CpuController, name: str, cpu_dir: str, requests: subprocess.Popen[str], longest_s: float
) -> Run:
    assert requests.stdin is not None and requests.stdout is not None
    if requests.stdout.readline().strip() != "ready":
        raise RunError(f"the request loop did not start (exit status {requests.wait(timeout=10)})")
    time.sleep(0.5)  # the workload's processes have forked and joined by now
    relpath = name
    first = cgroups.read_cpu_stat(cpu_dir)
    usage_first = usage_second = cgroups.read_usage_ns(controller, f"{VERIFY_ROOT}/{relpath}")
    started = next_second = time.monotonic()
    requests.stdin.write("go\n")
    requests.stdin.flush()
    per_second: list[float] = []
    report = ""
    deadline = started + longest_s + 30  # a starved request can wait two periods on top of its own interval
    # The node agent's own period sampler, in a thread until the request loop reports: the lab's per-period figures
    # are read exactly as production's.
    stop = threading.Event()
    sampled: dict[str, PeriodSample] = {}
    sampler = threading.Thread(
        target=lambda: sampled.update(sample_periods({"run": cpu_dir}, longest_s + 30, _POLL_S, stop)), daemon=True
    )
    sampler.start()
    try:
        while not report:
            now = time.monotonic()
            if now > deadline:
                raise RunError("the request loop did not finish in time")
            ready, _, _ = select.select([requests.stdout], [], [], 0.05)
            if ready:
                line = requests.stdout.readline()
                if not line:
                    raise RunError(f"the request loop stopped before its report (exit {requests.wait(timeout=10)})")
                if line.startswith("{"):
                    report = line
            if now - next_second >= 1.0:
                usage = cgroups.read_usage_ns(controller, f"{VERIFY_ROOT}/{relpath}")
                per_second.append((usage - usage_second) / 1e6 / (now - next_second))
                usage_second, next_second = usage, now
    finally:
        stop.set()
        sampler.join(timeout=10)
    if "run" not in sampled:
        raise RunError(f"cannot read {cpu_dir}/cpu.stat period by period")
    per_period = [float(us) for us in sampled["run"].throttled_us]
    ended = time.monotonic()
    final = cgroups.read_cpu_stat(cpu_dir)
    usage_end = cgroups.read_usage_ns(controller, f"{VERIFY_ROOT}/{relpath}")
    latency = json.loads(report)["response_ms"]
    return Run(
        seconds=ended - started,
        periods=final["nr_periods"] - first["nr_periods"],
        throttled_periods=final["nr_throttled"] - first["nr_throttled"],
        throttled_us=_throttled_us(final) - _throttled_us(first),
        usage_us=(usage_end - usage_first) / 1000,
        period_throttled_us=tuple(per_period),
        usage_per_second_mcpu=tuple(per_second),
        latency_ms=tuple(latency),
    )
