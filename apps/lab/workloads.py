"""Workloads that reproduce CFS throttling, each a process tree the kernel's quota can count. Pure stdlib: no Django.

Run one as ``python -m apps.lab.workloads KIND --json '{"processes": 2}' --cgroup-procs /sys/fs/cgroup/cpu/…/cgroup.procs``.
The process first writes its own pid into every ``--cgroup-procs`` file (so nothing it does afterwards escapes the
container's cgroup), then either does the work itself (``workloop``, ``single``, ``idle``: one task, as the original
single-threaded loops) or forks worker processes that inherit the cgroup. Python threads share one interpreter lock
and cannot load several CPUs, so parallelism here is always processes: the kernel's quota counts tasks either way.

Workers ask the kernel to SIGKILL them when their parent (the workload's leader) dies, so killing the leader, even
with SIGKILL, leaves nothing behind. The leader handles SIGTERM by killing and reaping its workers, then exits 0.

Kinds (the reproducers are described in docs/domain.md#empirical-checks and #threads):
- ``burner``: N processes spinning: a steady load at its limit.
- ``fibtest``: one fast process computing Fibonacci steps as fast as it can plus N slow processes doing 100 steps
  then sleeping 10 ms (Indeed's fibtest).
- ``workloop``: about 5 ms of CPU work then a sleep, forever or for a number of iterations (the CFS quota bug test
  after Ivan Babrou's gist; its Go original burns 5 ms of CPU time per iteration and sleeps 100 ms or 1 s between
  iterations).
- ``bursty``: N processes busy for ``busy_s`` then idle for ``idle_s``, all in phase (10 s of traffic a minute,
  docs/domain.md#bursty-load).
- ``single``: one process doing ``work_ms`` of work then sleeping (too few threads for a 2-CPU request,
  docs/domain.md#too-few-threads).
- ``idle``: sleeps; a healthy container that uses nothing.
- ``lightweb``: N processes each doing a little work per interval; a healthy, lightly loaded container.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

from apps.words import excerpt

ParamValue = int | float | bool

_MASK_32 = 0xFFFFFFFF
_PR_SET_PDEATHSIG = 1
# Fibonacci steps between two looks at the clock while spinning: ~0.1 ms of CPython work, fine-grained enough for
# bursts and CPU-time budgets, coarse enough that the clock reads (a syscall each) cost nothing measurable.
_STEPS_PER_CHECK = 2000


class WorkloadError(ValueError):
    """A workload kind or parameter is invalid; the message names the offending kind, key or value."""


@dataclass(frozen=True, slots=True)
class Param:
    """One workload parameter: its type (taken from the default), allowed range and meaning."""

    default: ParamValue
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""


@dataclass(frozen=True, slots=True)
class KindSpec:
    """A workload kind: what it does, its parameters, and whether the leader does the work itself (one task)."""

    description: str
    params: Mapping[str, Param]
    inline: bool


KINDS: dict[str, KindSpec] = {
    "burner": KindSpec(
        "N processes spinning: a steady load that sits at its limit",
        {"processes": Param(1, 1, 64, "spinning processes")},
        inline=False,
    ),
    "fibtest": KindSpec(
        "one fast process spinning plus N slow processes (work, then sleep): Indeed's fibtest",
        {
            "slow": Param(3, 0, 256, "slow processes"),
            "slow_steps": Param(100, 1, 1_000_000, "Fibonacci steps a slow process does before sleeping"),
            "slow_sleep_ms": Param(10.0, 0.1, 60_000, "sleep of a slow process between bursts, ms"),
        },
        inline=False,
    ),
    "workloop": KindSpec(
        "work_ms of CPU work then sleep_ms of sleep, in one process: the CFS quota bug test",
        {
            "work_ms": Param(5.0, 0.1, 1000, "CPU time per iteration, ms (used when work_units is 0)"),
            "sleep_ms": Param(100.0, 0, 60_000, "sleep between iterations, ms"),
            "work_units": Param(0, 0, 1_000_000_000, "fixed Fibonacci steps per iteration; 0: burn work_ms of CPU"),
            "iterations": Param(0, 0, 1_000_000, "iterations to run; 0: forever"),
            "report": Param(False, help="handshake on stdin/stdout and print per-iteration times as JSON"),
        },
        inline=True,
    ),
    "bursty": KindSpec(
        "N processes busy for busy_s then idle for idle_s, in phase: bursty load hidden by averages",
        {
            "processes": Param(2, 1, 64, "processes busy during a burst"),
            "busy_s": Param(10.0, 0.1, 3600, "burst length, s"),
            "idle_s": Param(50.0, 0, 3600, "pause between bursts, s"),
        },
        inline=False,
    ),
    "single": KindSpec(
        "one process doing work_ms of work then sleeping sleep_ms: too few threads for the request",
        {
            "work_ms": Param(50.0, 0.1, 10_000, "CPU time per request, ms"),
            "sleep_ms": Param(150.0, 0, 60_000, "pause between requests, ms"),
        },
        inline=True,
    ),
    "idle": KindSpec("one process sleeping: uses no CPU", {}, inline=True),
    "lightweb": KindSpec(
        "N processes each doing work_ms of work every interval_ms: a lightly loaded server",
        {
            "processes": Param(2, 1, 64, "serving processes"),
            "work_ms": Param(2.0, 0.1, 1000, "CPU time per request, ms"),
            "interval_ms": Param(50.0, 1, 60_000, "time between requests, ms"),
        },
        inline=False,
    ),
}


def normalize_params(kind: str, params: Mapping[str, object] | None) -> dict[str, ParamValue]:
    """Check ``params`` against the kind's parameters and fill in defaults.

    Raises WorkloadError naming the unknown kind, an unknown key, a value of the wrong type or one out of range.
    Integers are accepted where a float is expected; booleans are never accepted as numbers.
    """
    spec = KINDS.get(kind)
    if spec is None:
        raise WorkloadError(f"unknown workload kind {kind!r} (known: {', '.join(sorted(KINDS))})")
    given = dict(params or {})
    unknown = sorted(set(given) - set(spec.params))
    if unknown:
        allowed = ", ".join(sorted(spec.params)) or "none"
        raise WorkloadError(f"unknown parameter {unknown[0]!r} for workload {kind!r} (allowed: {allowed})")
    result: dict[str, ParamValue] = {}
    for key, param in spec.params.items():
        value = given.get(key, param.default)
        result[key] = _check_value(kind, key, param, value)
    if kind == "workloop" and result["report"] and not result["iterations"]:
        raise WorkloadError("workload 'workloop': report needs a number of iterations (iterations > 0)")
    return result


def _check_value(kind: str, key: str, param: Param, value: object) -> ParamValue:
    where = f"workload {kind!r} parameter {key!r}"
    if isinstance(param.default, bool):
        if not isinstance(value, bool):
            raise WorkloadError(f"{where}: {excerpt(value)} is not true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkloadError(f"{where}: {excerpt(value)} is not a number")  # a list or mapping: bounded
    if isinstance(param.default, int) and not isinstance(value, int):
        if not float(value).is_integer():
            raise WorkloadError(f"{where}: {value!r} is not a whole number")
        value = int(value)
    if not math.isfinite(value):
        raise WorkloadError(f"{where}: {value!r} is not finite")
    if param.minimum is not None and value < param.minimum:
        raise WorkloadError(f"{where}: {value!r} is below the minimum {param.minimum:g}")
    if param.maximum is not None and value > param.maximum:
        raise WorkloadError(f"{where}: {value!r} is above the maximum {param.maximum:g}")
    return float(value) if isinstance(param.default, float) else int(value)


@dataclass(frozen=True, slots=True)
class Demand:
    """Expected CPU use of a workload in cores: the long-run average and the peak."""

    average_cores: float
    peak_cores: float


def estimated_demand(kind: str, params: Mapping[str, ParamValue], limit_cores: float | None = None) -> Demand:
    """How many cores a workload uses, capped by a CPU limit (a design estimate for sizing scenarios).

    ``params`` must be normalised (see normalize_params). The limit caps the rate while the workload runs, so a
    bursty workload's average is its capped burst rate times its duty cycle. A fibtest counts its fast process
    only: slow ones do microseconds of work per 10 ms.
    """
    cap = math.inf if limit_cores is None else limit_cores
    p = params
    if kind == "burner":
        cores = min(float(p["processes"]), cap)
        return Demand(cores, cores)
    if kind == "fibtest":
        return Demand(min(1.0, cap), min(1.0, cap))
    if kind in ("workloop", "single"):
        work_ms, sleep_ms = float(p["work_ms"]), float(p["sleep_ms"])
        share = min(work_ms / (work_ms + sleep_ms), cap)
        return Demand(share, share)
    if kind == "bursty":
        busy_s, idle_s = float(p["busy_s"]), float(p["idle_s"])
        peak = min(float(p["processes"]), cap)
        return Demand(peak * busy_s / (busy_s + idle_s), peak)
    if kind == "lightweb":
        per_process = min(1.0, float(p["work_ms"]) / float(p["interval_ms"]))
        cores = min(float(p["processes"]) * per_process, cap)
        return Demand(cores, cores)
    if kind == "idle":
        return Demand(0.0, 0.0)
    raise WorkloadError(f"unknown workload kind {kind!r}")


def task_count(kind: str, params: Mapping[str, ParamValue]) -> int:
    """Processes a workload runs in its cgroup once started: the leader plus its workers (inline kinds: 1)."""
    if KINDS[kind].inline:
        return 1
    if kind == "fibtest":
        return 2 + int(params["slow"])
    return 1 + int(params["processes"])


# --- the work itself -------------------------------------------------------------------------------------------


def fib_steps(steps: int) -> int:
    """Advance a 32-bit Fibonacci pair ``steps`` times: a fixed amount of pure-CPU work that nothing optimises away."""
    a, b = 0, 1
    for _ in range(steps):
        a, b = b, (a + b) & _MASK_32
    return a


def burn_cpu_ms(cpu_ms: float) -> None:
    """Spin until this thread has used ``cpu_ms`` of CPU time (like the CFS quota bug test's burn, which reads rusage).

    Time spent throttled or preempted does not count, so the work done is the same whatever the quota.
    """
    deadline_ns = time.thread_time_ns() + int(cpu_ms * 1_000_000)
    while time.thread_time_ns() < deadline_ns:
        fib_steps(_STEPS_PER_CHECK)


def calibrate_work_units(target_ms: float = 5.0, trials: int = 7) -> int:
    """Fibonacci steps that take ``target_ms`` of CPU time on this machine, now (median of ``trials`` runs).

    Measured in thread CPU time, so preemption by other load does not inflate it. Call it outside any quota.
    """
    if target_ms <= 0:
        raise ValueError(f"calibration target {target_ms!r} ms must be positive")
    steps = 20_000
    # Grow the sample until one run takes at least 2 ms of CPU, so the clock's resolution does not matter.
    while True:
        started = time.thread_time_ns()
        fib_steps(steps)
        elapsed_ns = time.thread_time_ns() - started
        if elapsed_ns >= 2_000_000:
            break
        steps *= 2
    rates = []
    for _ in range(trials):
        started = time.thread_time_ns()
        fib_steps(steps)
        elapsed_ns = max(1, time.thread_time_ns() - started)
        rates.append(steps / elapsed_ns)
    steps_per_ns = statistics.median(rates)
    return max(1, round(steps_per_ns * target_ms * 1_000_000))


def _spin_forever() -> None:
    while True:
        fib_steps(_STEPS_PER_CHECK)


def _slow_fibtest(steps: int, sleep_s: float) -> None:
    while True:
        fib_steps(steps)
        time.sleep(sleep_s)


def _bursty(busy_s: float, idle_s: float, epoch: float) -> None:
    cycle_s = busy_s + idle_s
    while True:
        position_s = (time.monotonic() - epoch) % cycle_s
        if position_s < busy_s:
            fib_steps(_STEPS_PER_CHECK)
        else:
            time.sleep(cycle_s - position_s)


def _light_requests(work_ms: float, interval_ms: float) -> None:
    interval_s = interval_ms / 1000
    next_at = time.monotonic()
    while True:
        burn_cpu_ms(work_ms)
        next_at += interval_s
        delay_s = next_at - time.monotonic()
        if delay_s > 0:
            time.sleep(delay_s)
        else:
            next_at = time.monotonic()  # fell behind (throttled or starved): do not try to catch up in a burst


def _single(work_ms: float, sleep_ms: float) -> NoReturn:
    while True:
        burn_cpu_ms(work_ms)
        time.sleep(sleep_ms / 1000)


def _idle() -> NoReturn:
    while True:
        signal.pause()


def _workloop(params: Mapping[str, ParamValue]) -> int:
    work_units, work_ms = int(params["work_units"]), float(params["work_ms"])
    sleep_s = float(params["sleep_ms"]) / 1000
    iterations = int(params["iterations"])

    def one_iteration() -> None:
        if work_units:
            fib_steps(work_units)
        else:
            burn_cpu_ms(work_ms)

    if not params["report"]:
        done = 0
        while not iterations or done < iterations:
            one_iteration()
            time.sleep(sleep_s)
            done += 1
        return 0
    # Report mode (the kernel probe): one untimed warm-up, then wait for the caller to snapshot cpu.stat.
    one_iteration()
    time.sleep(sleep_s)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    wall_ms: list[float] = []
    cpu_ms: list[float] = []
    response_ms: list[float] = []  # from when the iteration was due: a wake-up into a throttled period waits too
    due = time.perf_counter_ns()
    for _ in range(iterations):
        wall_started, cpu_started = time.perf_counter_ns(), time.thread_time_ns()
        one_iteration()
        ended = time.perf_counter_ns()
        wall_ms.append((ended - wall_started) / 1e6)
        response_ms.append((ended - min(due, wall_started)) / 1e6)
        cpu_ms.append((time.thread_time_ns() - cpu_started) / 1e6)
        due = ended + int(sleep_s * 1e9)
        time.sleep(sleep_s)
    print(json.dumps({"wall_ms": wall_ms, "cpu_ms": cpu_ms, "response_ms": response_ms}), flush=True)
    return 0


# --- process tree ----------------------------------------------------------------------------------------------


class _Stop(Exception):
    """Raised by the leader's signal handler to leave os.wait()."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signum)


def die_with_parent(expected_parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; exit now if the parent is already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    # The parent may have died between fork() and prctl(): then nobody will send the signal.
    if os.getppid() != expected_parent_pid:
        os._exit(0)


def _fork_worker(target: Callable[[], None]) -> int:
    parent_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            die_with_parent(parent_pid)
            target()
        except BaseException as exc:  # a worker must never return into the leader's code
            print(f"worker {os.getpid()} failed: {exc!r}", file=sys.stderr, flush=True)
            code = 1
        finally:
            os._exit(code)
    return pid


def _worker_targets(kind: str, params: Mapping[str, ParamValue]) -> list[Callable[[], None]]:
    p = params
    if kind == "burner":
        return [_spin_forever] * int(p["processes"])
    if kind == "fibtest":
        sleep_s = float(p["slow_sleep_ms"]) / 1000
        steps = int(p["slow_steps"])
        return [_spin_forever] + [lambda: _slow_fibtest(steps, sleep_s)] * int(p["slow"])
    if kind == "bursty":
        epoch = time.monotonic()
        busy_s, idle_s = float(p["busy_s"]), float(p["idle_s"])
        return [lambda: _bursty(busy_s, idle_s, epoch)] * int(p["processes"])
    if kind == "lightweb":
        work_ms, interval_ms = float(p["work_ms"]), float(p["interval_ms"])
        return [lambda: _light_requests(work_ms, interval_ms)] * int(p["processes"])
    raise WorkloadError(f"workload kind {kind!r} has no workers")


def _supervise(kind: str, params: Mapping[str, ParamValue]) -> int:
    """Fork the workers, wait; on SIGTERM/SIGINT/SIGHUP (or a worker dying) kill and reap them all."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _raise_stop)
    workers: list[int] = []
    code = 0
    try:
        for target in _worker_targets(kind, params):
            workers.append(_fork_worker(target))
        pid, status = os.wait()
        print(f"worker {pid} exited unexpectedly (status {status}); stopping the workload", file=sys.stderr, flush=True)
        code = 1
    except _Stop:
        code = 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in workers:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return code


def run(kind: str, params: Mapping[str, ParamValue]) -> int:
    """Run a workload in this process (the leader) until stopped; returns the exit code."""
    if kind == "workloop":
        return _workloop(params)
    if kind == "single":
        _single(float(params["work_ms"]), float(params["sleep_ms"]))
    if kind == "idle":
        _idle()
    return _supervise(kind, params)


def join_cgroup(procs_path: str) -> None:
    """Move this process into the cgroup whose ``cgroup.procs`` file is ``procs_path``."""
    with open(procs_path, "w") as procs:
        procs.write(str(os.getpid()))


REPO_ROOT = Path(__file__).resolve().parents[2]  # where `python -m apps.lab.workloads` must run from


def child_env() -> dict[str, str]:
    """This process's environment with the repository on PYTHONPATH, for a workload started by command_line()."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def stop_child(child: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Kill a started workload if it still runs, and reap it."""
    if child.poll() is None:
        child.kill()
    child.wait(timeout=10)


def command_line(kind: str, params: Mapping[str, ParamValue], procs_paths: list[str]) -> list[str]:
    """The argv that runs a workload in the cgroups whose ``cgroup.procs`` files are given (first the cpu one)."""
    argv = [sys.executable, "-m", "apps.lab.workloads", kind, "--json", json.dumps(dict(params), sort_keys=True)]
    for path in procs_paths:
        argv += ["--cgroup-procs", path]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m apps.lab.workloads", description="Run a lab workload.")
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--json", dest="params_json", default="{}", help="workload parameters as a JSON object")
    parser.add_argument(
        "--cgroup-procs",
        action="append",
        default=[],
        metavar="PATH",
        help="a cgroup.procs file to join before any work (repeat for each hierarchy)",
    )
    args = parser.parse_args(argv)
    try:
        raw = json.loads(args.params_json)
        if not isinstance(raw, dict):
            raise WorkloadError(f"--json must be a JSON object, got {args.params_json!r}")
        params = normalize_params(args.kind, raw)
    except ValueError as exc:  # bad JSON or a WorkloadError
        parser.error(str(exc))
    for path in args.cgroup_procs:
        try:
            join_cgroup(path)
        except OSError as exc:
            print(f"cannot join cgroup {path}: {exc}", file=sys.stderr)
            return 3
    return run(args.kind, params)


if __name__ == "__main__":
    sys.exit(main())
