"""Shared test setup: markers that skip (or, in CI, fail) when a real part is missing, factories, a real Celery worker."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NO_SKIPS = os.environ.get("CPUTUNE_NO_SKIPS") == "1"


def _cgroup_cpu_writable() -> bool:
    root = Path("/sys/fs/cgroup/cpu")
    return os.geteuid() == 0 and root.is_dir() and os.access(root, os.W_OK)


def _missing(marker: str) -> str | None:
    """Why a test with this marker cannot run here, or None when it can."""
    if marker == "postgres":
        from django.conf import settings

        if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
            return "needs PostgreSQL: set DATABASE_URL=postgres://…"
    if marker == "redis" and not os.environ.get("REDIS_URL"):
        return "needs Redis: set REDIS_URL=redis://127.0.0.1:6379/0"
    if marker == "root" and not _cgroup_cpu_writable():
        return "needs root and a writable cgroup v1 cpu controller at /sys/fs/cgroup/cpu"
    if marker == "browser" and not Path("/usr/bin/chromium").exists():
        return "needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in ("postgres", "redis", "root", "browser"):
        if item.get_closest_marker(marker):
            reason = _missing(marker)
            if reason:
                pytest.skip(reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[Any]:
    """In CI (CPUTUNE_NO_SKIPS=1) every test must run: a skip is reported as a failure, with its reason."""
    outcome: Any = yield
    report = outcome.get_result()
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every test must run: {reason}"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture()
def celery_worker_redis(django_db_setup, django_db_blocker):
    """A real Celery worker thread consuming from Redis (not eager mode), for tests marked redis + django_db(transaction)."""
    from celery.contrib.testing.worker import start_worker

    from cputune.celery import app

    app.control.purge()  # tasks left in the queue by an earlier run must not run against this test's database
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        with (
            django_db_blocker.unblock(),
            start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10) as worker,
        ):
            yield worker
    finally:
        # The test worker sets the root logger to its own level (ERROR): later tests reading logs need it back.
        root.setLevel(level)
        root.handlers[:] = handlers


@pytest.fixture()
def chromium_path() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    return path


@pytest.fixture(autouse=True)
def _fresh_cgroup_checks() -> Iterator[None]:
    """Each test judges its nodes' cgroup scheme afresh: the collector remembers, per process, when it last did."""
    from apps.collector import services

    services._cgroup_checked.clear()
    yield
