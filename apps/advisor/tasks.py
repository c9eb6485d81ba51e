from __future__ import annotations

from celery import shared_task

from apps.clusters.models import Cluster

from .services import refresh_findings


@shared_task(name="advisor.refresh", acks_late=True, time_limit=600, soft_time_limit=540)
def refresh(cluster_id: int) -> int:
    """Recompute a cluster's findings after a collection closed."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    return refresh_findings(cluster) if cluster is not None else 0
