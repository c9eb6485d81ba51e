from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from apps.clusters.models import Cluster

from .models import Window
from .services import RefreshPart, prepare_refresh, refresh_part, refresh_parts, windows_due


@shared_task(name="advisor.refresh", acks_late=True, time_limit=600, soft_time_limit=540)
def refresh(cluster_id: int) -> int:
    """After a collection closed: roll up, drop stale findings, then recompute the findings in parts — a task per
    PART_CONTAINERS containers, so every worker process takes a share. Returns the number of parts sent."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return 0
    now = timezone.now()
    windows = windows_due(cluster, now=now)
    prepare_refresh(cluster, now=now, windows=windows)
    parts = refresh_parts(cluster, now=now)
    # A part still queued when the next refresh comes is of no use any more (and could not overwrite it anyway).
    expires = max(60.0, float(settings.CPUTUNE_COLLECT_INTERVAL))
    for part in parts:
        refresh_nodes.apply_async(
            args=(cluster_id, now.isoformat(), list(part.node_ids), part.nodeless, windows), expires=expires
        )
    return len(parts)


@shared_task(name="advisor.refresh_nodes", acks_late=True, time_limit=600, soft_time_limit=540)
def refresh_nodes(
    cluster_id: int, now: str, node_ids: list[int], nodeless: bool, windows: list[str] | None = None
) -> int:
    """One part of a refresh: the findings of the containers on these nodes (and of pods on none, if nodeless), for
    the windows due (all when not given: a task sent before windows were passed)."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return 0
    part = RefreshPart(tuple(node_ids), nodeless)
    return refresh_part(cluster, part, now=datetime.fromisoformat(now), windows=windows or tuple(Window.values))
