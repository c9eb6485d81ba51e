"""Fixtures for the lab's tests: a throwaway lab root per test, always removed, and small scenarios."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.lab import cgroups, runtime
from apps.lab.cgroups import CpuController


@pytest.fixture
def controller() -> CpuController:
    """The machine's cpu controller; skips (with the lab's own reason) only when the lab cannot run here."""
    detected = cgroups.detect_cpu_controller()
    ok, reason = cgroups.can_run_lab(f"cputune-labtest-check-{os.getpid()}", detected)
    if not ok or detected is None:
        pytest.skip(f"the lab cannot run here: {reason}")
    return detected


@pytest.fixture
def lab_root(controller: CpuController, tmp_path: Path) -> Iterator[str]:
    """A lab root of its own for one test (other people's cgroups are never touched); removed afterwards."""
    root = f"cputune-labtest-{uuid.uuid4().hex[:10]}"
    yield root
    state_dir = tmp_path / "state"
    if (state_dir / runtime.STATE_FILE).exists():
        runtime.lab_down(state_dir, root=root)
    report = cgroups.remove_tree(controller, root)
    assert not report.leftover, report.leftover


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
