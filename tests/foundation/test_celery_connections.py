"""Around every task the worker does what Django does around every request: a database connection older than
CONN_MAX_AGE (or broken) is closed, a younger one is kept — Celery itself only recycles every 2 × CELERY_DB_REUSE_MAX
tasks. Eager tasks run inside the caller's transaction and are left alone."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from django.db import connection

from cputune.celery import _recycle_old_connections

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def task(eager: bool) -> SimpleNamespace:
    return SimpleNamespace(request=SimpleNamespace(is_eager=eager))


def test_a_connection_past_its_age_is_closed_around_a_task_and_a_young_one_kept(settings):
    connection.ensure_connection()
    connection.close_at = time.monotonic() + 60  # young: kept
    _recycle_old_connections(sender=task(eager=False))
    assert connection.connection is not None

    connection.close_at = time.monotonic() - 1  # past CONN_MAX_AGE
    _recycle_old_connections(sender=task(eager=False))
    assert connection.connection is None


def test_an_eager_task_leaves_the_callers_connection_alone():
    connection.ensure_connection()
    connection.close_at = time.monotonic() - 1
    _recycle_old_connections(sender=task(eager=True))
    assert connection.connection is not None
