"""The Celery application. Configuration comes from Django settings (CELERY_* names); tasks live in each app's tasks.py."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")

app = Celery("cputune")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _recycle_old_connections(sender: Any = None, **_: Any) -> None:
    """What Django does around every request: close a database connection older than CONN_MAX_AGE or found broken,
    so that the next query opens a fresh one. Celery itself only closes every 2 × CELERY_DB_REUSE_MAX tasks.

    Not for eager tasks (tests, `collect --once` in-process): they run inside the caller's transaction."""
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
