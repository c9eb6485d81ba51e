"""Collection fan-out: a cycle task lists the inventory, then one idempotent task per node. No chords — a node that
fails or hangs never holds the others back; the last node to report closes the run and enqueues the advisor.
"""

from __future__ import annotations

import logging

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections

from apps.clusters.models import Cluster

from . import services
from .cadvisor import ScrapeError
from .sources.base import SourceError

log = logging.getLogger(__name__)
# A node task that loses the database (a PostgreSQL restart or failover takes seconds) tries again after 3, 6 and 9 s
# instead of failing at once: its scrape is read again and what it had already stored is recognised as duplicates.
DATABASE_RETRY_S = 3.0
DATABASE_RETRIES = 3
NODE_READ_ERRORS = (SourceError, ScrapeError)


def _enqueue_advisor(run_id: int) -> None:
    """The run is closed: announce it (the advisor's receiver enqueues its refresh, not inside the last node's)."""
    services.announce_run_closed(run_id)


def _expires() -> float:
    return max(1.0, settings.CPUTUNE_COLLECT_INTERVAL * 0.9)


@shared_task(name="collector.collect_all", acks_late=True, time_limit=60)
def collect_all() -> int:
    """Beat: close runs whose node tasks were lost, then start a cycle for every enabled pulled cluster."""
    services.close_stale_runs(max_age_s=3 * settings.CPUTUNE_COLLECT_INTERVAL + 2 * settings.CPUTUNE_NODE_TIMEOUT)
    clusters = Cluster.objects.filter(enabled=True, source__in=["kubernetes", "prometheus", "lab"])
    for cluster_id in clusters.values_list("id", flat=True):
        collect_cluster.apply_async(args=(cluster_id,), expires=_expires())
    return clusters.count()


@shared_task(name="collector.collect_cluster", acks_late=True, time_limit=300, soft_time_limit=280)
def collect_cluster(cluster_id: int) -> int:
    cluster = Cluster.objects.get(pk=cluster_id)
    run = services.start_run(cluster)
    nodes = services.collect_inventory(run)
    for node in nodes:
        collect_node.apply_async(args=(run.pk, node), expires=_expires())
    return len(nodes)


class NodeTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        """After the last retry (or a non-retryable error): the node is recorded as failed, with the reason.

        If the database is still unreachable this raises too; close_stale_runs closes the run later."""
        run_id, node = args[0], args[1]
        close_old_connections()  # a connection broken by a database restart is replaced, not reused
        if services.record_node_failure(run_id, node, exc):
            _enqueue_advisor(run_id)


@shared_task(
    name="collector.collect_node",
    base=NodeTask,
    bind=True,
    acks_late=True,
    autoretry_for=(ConnectionError,),
    retry_backoff=2,
    retry_backoff_max=20,
    retry_jitter=True,
    max_retries=2,
    soft_time_limit=max(10, settings.CPUTUNE_NODE_TIMEOUT * 2),
    time_limit=max(15, settings.CPUTUNE_NODE_TIMEOUT * 2 + 10),
)
def collect_node(self: Task, run_id: int, node: str) -> int:
    try:
        result, finished = services.collect_node(run_id, node)
    except NODE_READ_ERRORS as exc:
        # A node that answers 500, hangs or sends garbage is an outcome of the cycle, not a crash of the worker:
        # one line in the log (the run's page says the rest), no traceback. Anything else still fails the task.
        log.warning("node %s of run %s not read: %s", node, run_id, exc)
        if services.record_node_failure(run_id, node, exc):
            _enqueue_advisor(run_id)
        return 0
    except (OperationalError, InterfaceError) as exc:
        close_old_connections()
        attempt = self.request.retries + 1
        raise self.retry(exc=exc, countdown=DATABASE_RETRY_S * attempt, max_retries=DATABASE_RETRIES) from exc
    if finished:
        _enqueue_advisor(run_id)
    return result.samples_written
