"""Fixtures of the fault drills: the session's private services, the no-fault baseline, and a deadline per drill."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.drill.harness import (
    DrillTimeout,
    Dump,
    Install,
    Run,
    Services,
    postgres_bin,
    simulation_base_s,
    start_services,
    stop_services,
)

DRILL_DEADLINE_S = 150  # one drill, worker start to teardown; the slowest takes about a third of it
BASELINE_CYCLES = 4  # the no-fault run every drill compares with: as many cycles as the longest drill runs


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the drills start a private PostgreSQL as the postgres OS user: run them as root"
    if postgres_bin() is None:
        return "the drills need Debian's PostgreSQL server (apt-get install postgresql)"
    if shutil.which("redis-server") is None:
        return "the drills need redis-server (apt-get install redis-server)"
    return None


@pytest.fixture(autouse=True)
def drill_deadline() -> Iterator[None]:
    """Fail a drill that runs past DRILL_DEADLINE_S, wherever it is waiting (SIGALRM in the main thread)."""

    def expired(signum: int, frame: Any) -> None:
        raise DrillTimeout(f"the drill ran past its deadline of {DRILL_DEADLINE_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, DRILL_DEADLINE_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session")
def drill_services() -> Iterator[Services]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    services = start_services()
    try:
        yield services
    finally:
        stop_services(services)


@pytest.fixture(scope="session")
def base_s() -> float:
    return simulation_base_s()


@dataclass
class Baseline:
    dump: Dump
    runs: list[Run]
    instants: list[float]  # the simulated instant of cycle 1, 2, …
    seconds: float


@pytest.fixture(scope="session")
def baseline(drill_services: Services, base_s: float) -> Baseline:
    """The run without faults: BASELINE_CYCLES cycles collected by a worker on its own database."""
    started = time.monotonic()
    with Install(drill_services, base_s, "baseline") as install:
        runs = [install.run_cycle(cycle) for cycle in range(1, BASELINE_CYCLES + 1)]
        dump = install.db.dump()
        instants = [install.instant(cycle) for cycle in range(1, BASELINE_CYCLES + 1)]
    return Baseline(dump, runs, instants, time.monotonic() - started)


@pytest.fixture()
def install_factory(drill_services: Services, base_s: float, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Make this drill's install (its own database, worker, simulated cluster); all of it stops after the test."""
    made: list[Install] = []

    def make(*, supervised: bool = False, **env_overrides: str) -> Install:
        name = request.node.name.removeprefix("test_")[:40]
        install = Install(drill_services, base_s, name, supervised=supervised, **env_overrides)
        made.append(install.__enter__())
        return install

    try:
        yield make
    finally:
        for install in made:
            install.__exit__(None, None, None)
