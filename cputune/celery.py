"""The Celery application. Configuration comes from Django settings (CELERY_* names); tasks live in each app's tasks.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")

app = Celery("cputune")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
