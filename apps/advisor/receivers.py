"""The advisor's answer to telemetry's series_stored: findings follow every stored batch of readings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from .selectors import findings_glance
from .services import refresh_findings


def refresh_after_storing(sender: Any, *, cluster: Any, at: datetime, wait: bool, **kwargs: Any) -> list[str]:
    """A worker's cycle (wait=False): the refresh runs as its own task once the run's transaction commits, expiring
    before the next cycle. A waiting command (collect --once, import_dump): refreshed here, and a glance returned."""
    if not wait:
        from .tasks import refresh

        expires = max(1.0, settings.CPUTUNE_COLLECT_INTERVAL * 0.9)
        transaction.on_commit(lambda: refresh.apply_async(args=(cluster.pk,), expires=expires))
        return []
    refresh_findings(cluster, now=at)
    return findings_glance(cluster, at)
