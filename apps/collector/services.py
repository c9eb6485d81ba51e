"""Collection: one run per cluster per cycle — inventory first (nodes, then pods), then every node on its own, so
one bad node never spoils the rest. The Celery tasks, `manage.py collect` and the tests all call these functions.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.clusters.inventory import upsert_nodes, upsert_pods
from apps.clusters.models import Cluster, Node
from apps.clusters.services import cgroup_scheme_fields
from apps.telemetry.ingest import ingest_readings, lock_cluster_ingest
from apps.telemetry.readings import PodInfo
from apps.telemetry.signals import announce_series_stored

from .models import CollectionProblem, CollectionRun, NodeResult
from .registry import cached_source_for, source_for
from .sources.base import Inventory, NodeLister, Source, SourceUnavailable

log = logging.getLogger(__name__)
MAX_PROBLEMS_PER_NODE = 20


def start_run(cluster: Cluster) -> CollectionRun:
    return CollectionRun.objects.create(cluster=cluster, source=cluster.source, started_at=timezone.now())


def collect_inventory(run: CollectionRun, source: Source | None = None) -> list[str]:
    """List and store the nodes, then the pods; return the names of the nodes to read. Marks the run failed and
    returns [] when the source cannot be reached, or when the nodes cannot be stored (the error on the run rather
    than a run left open). Pods that cannot be listed or stored make the run partial; its nodes are still read.
    Nodes and pods the database cannot hold are skipped with a problem each.

    The pods are stored before any node is read: node reads overlapping the pod upsert check rows it has not
    committed, which costs PostgreSQL more CPU than the overlap saves, and PostgreSQL is what bounds an install.
    """
    try:
        source = source or source_for(run.cluster)
    except SourceUnavailable as exc:
        fail_run(run, str(exc))
        return []
    names, listed = store_node_list(run, source)
    store_pod_list(run, source, listed)
    return names


def store_node_list(run: CollectionRun, source: Source) -> tuple[list[str], Inventory | None]:
    """List the nodes and store them; the run then waits for its pods (`pods` pending) as well as its nodes.

    Returns the stored node names, and what a source that lists nodes and pods together listed (None when it lists
    them apart: see NodeLister). A source that cannot be reached fails the run ([] and None).
    """
    cluster = run.cluster
    try:
        if isinstance(source, NodeLister):
            nodes, problems = source.list_nodes()
            listed = None
        else:
            listed = source.inventory()
            nodes, problems = listed.nodes, listed.problems
    except SourceUnavailable as exc:
        fail_run(run, str(exc))
        return [], None
    now = timezone.now()
    problems = list(problems)
    try:
        with transaction.atomic():
            # One inventory per cluster at a time: two cycles started together (two beats, a manual collect during
            # a scheduled one) would both find a new node missing and both insert it; the second waits here instead.
            Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
            node_ids = upsert_nodes(cluster, nodes, now, problems)
            _add_problems(run, "", problems)
    except DatabaseError as exc:
        log.exception("storing the nodes of %s failed", cluster)
        fail_run(run, f"the inventory could not be stored: {type(exc).__name__}: {exc}")
        return [], None
    names = sorted({n.name for n in nodes} & node_ids.keys())  # stored ones, each once
    CollectionRun.objects.filter(pk=run.pk).update(nodes_total=len(names), pods=CollectionRun.PodsStatus.PENDING)
    run.nodes_total = len(names)
    return names, listed


def store_pod_list(run: CollectionRun, source: Source, listed: Inventory | None = None) -> bool:
    """List the pods (or take the ones `listed` with the nodes) and store them, then let the run close. Returns
    whether this closed it.

    Pods that cannot be listed or stored cost this cycle's pod changes, not its readings: the problem goes on the
    run and the pods stored before stay. Node reads of the cluster (another cycle's, overlapping) wait while the
    pods are written (see lock_cluster_ingest), so the two never lock pod and container rows in opposite orders.
    """
    if run.finished_at is not None:
        return False  # the nodes could not be stored: the run failed already
    cluster = run.cluster
    problems: list[str] = []
    pods: list[PodInfo] | None = None
    failed = False
    try:
        if listed is not None:
            pods = listed.pods
        elif isinstance(source, NodeLister):
            pods, listing_problems = source.list_pods()
            problems.extend(listing_problems)
    except SourceUnavailable as exc:
        problems.append(f"pods not listed, the ones stored before are kept: {exc}")
        failed = True
    if pods is not None:
        try:
            with transaction.atomic():
                Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
                lock_cluster_ingest(cluster, exclusive=True)
                node_ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
                upsert_pods(cluster, pods, timezone.now(), node_ids, problems)
        except DatabaseError as exc:
            log.exception("storing the pods of %s failed", cluster)
            problems.append(
                f"the pods could not be stored, the ones stored before are kept: {type(exc).__name__}: {exc}"
            )
            failed = True
    _add_problems(run, "", problems)
    status = CollectionRun.PodsStatus.FAILED if failed else CollectionRun.PodsStatus.STORED
    CollectionRun.objects.filter(pk=run.pk).update(pods=status)
    return finish_run(run.pk)


def collect_node(run_id: int, node: str, source: Source | None = None) -> tuple[NodeResult, bool]:
    """Read one node and store its readings; returns its result and whether this node's outcome closed the run.

    Raises when the node cannot be read (the caller records the failure: see record_node_failure); a node already
    done in this run (a redelivered task) is not read twice.
    """
    done = NodeResult.objects.filter(run_id=run_id, node=node, ok=True).first()
    if done is not None:
        return done, False
    run = CollectionRun.objects.select_related("cluster").get(pk=run_id)
    started = time.monotonic()
    now = timezone.now()
    source = source or cached_source_for(run.cluster)
    read = source.read_node(node, now)
    readings = [r if r.node else replace(r, node=node) for r in read.readings]
    pod_readings = [r if r.node else replace(r, node=node) for r in read.pod_readings]
    # Its own transaction (samples and series heads together); if the worker dies after it, the redelivered task
    # reads the node again and the stored readings are recognised as duplicates.
    result = ingest_readings(run.cluster, readings + pod_readings, now=now)
    with transaction.atomic():
        node_updates: dict[str, object] = {"last_seen": now}
        if read.has_cfs_counters is not None:
            node_updates["has_cfs_counters"] = read.has_cfs_counters
        if read.has_pressure is not None:
            node_updates["has_pressure"] = read.has_pressure
        if _cgroup_check_due(run.cluster.pk, node):
            node_updates |= cgroup_scheme_fields(
                run.cluster,
                node,
                read.spec_shares,
                cgroup_version=read.cgroup_version,
                weight_mapping=read.weight_mapping,
                has_pressure=read.has_pressure,
                source=run.cluster.get_source_display(),
            )
        Node.objects.filter(cluster=run.cluster, name=node).update(**node_updates)
        if read.node_info is not None:
            upsert_nodes(run.cluster, [read.node_info], now)
        _add_problems(run, node, [*read.problems, *result.problems])
        outcome = _record_outcome(
            run_id,
            node,
            ok=True,
            readings=len(readings),
            samples_written=result.samples_written,
            duration_s=time.monotonic() - started,
        )
    return outcome, finish_run(run_id)


# A node's cgroup scheme changes only with its runtime: judged at most once an hour per worker process (its query
# was a tenth of a 1,000-node cycle when run every cycle; benchmarks/RESULTS.md).
CGROUP_CHECK_EVERY_S = 3600.0
_cgroup_checked: dict[tuple[int, str], float] = {}


def _cgroup_check_due(cluster_id: int, node: str) -> bool:
    key, now = (cluster_id, node), time.monotonic()
    last = _cgroup_checked.get(key)
    if last is not None and now - last < CGROUP_CHECK_EVERY_S:
        return False
    _cgroup_checked[key] = now
    return True


def record_node_failure(run_id: int, node: str, error: BaseException | str) -> bool:
    """The node could not be read after its retries: say why on the run; the other nodes are unaffected.
    Returns whether this closed the run."""
    if isinstance(error, str):
        message = error
    else:
        message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    with transaction.atomic():
        _record_outcome(run_id, node, ok=False, error=_storable_text(message))
    return finish_run(run_id)


def _record_outcome(run_id: int, node: str, *, ok: bool, **fields: object) -> NodeResult:
    """Store a node's outcome once per run and count it on the run (increments: no re-counting every node)."""
    outcome, created = NodeResult.objects.get_or_create(run_id=run_id, node=node, defaults={"ok": ok, **fields})
    if created:
        counted = F("nodes_ok") + 1 if ok else F("nodes_failed") + 1
        CollectionRun.objects.filter(pk=run_id).update(
            **{"nodes_ok" if ok else "nodes_failed": counted},
            samples_written=F("samples_written") + int(fields.get("samples_written", 0)),  # type: ignore[call-overload]
        )
    return outcome


def finish_run(run_id: int) -> bool:
    """Close the run once every node has an outcome and its pods are stored. True for the one caller that closed it."""
    updated = (
        CollectionRun.objects.filter(pk=run_id, finished_at__isnull=True)
        .exclude(pods=CollectionRun.PodsStatus.PENDING)
        .filter(Q(nodes_total__lte=F("nodes_ok") + F("nodes_failed")))
        .update(
            finished_at=timezone.now(),
            status=_status_expression(),
        )
    )
    return bool(updated)


def _status_expression():
    from django.db.models import Case, Value, When

    return Case(
        When(nodes_total=0, then=Value(CollectionRun.Status.FAILED)),
        When(nodes_failed=0, pods=CollectionRun.PodsStatus.FAILED, then=Value(CollectionRun.Status.PARTIAL)),
        When(nodes_failed=0, then=Value(CollectionRun.Status.OK)),
        When(nodes_ok=0, then=Value(CollectionRun.Status.FAILED)),
        default=Value(CollectionRun.Status.PARTIAL),
    )


def close_stale_runs(max_age_s: float) -> int:
    """Close runs still open after max_age_s: the tasks of their silent nodes expired or were lost. The silent
    nodes count as failed, with a problem saying so. Returns the number of runs closed."""
    cutoff = timezone.now() - timedelta(seconds=max_age_s)
    closed = 0
    for run in CollectionRun.objects.filter(finished_at__isnull=True, started_at__lt=cutoff):
        pending = CollectionRun.objects.filter(pk=run.pk, pods=CollectionRun.PodsStatus.PENDING)
        if pending.update(pods=CollectionRun.PodsStatus.FAILED):
            CollectionProblem.objects.create(
                run=run, message=f"the pods were not stored within {max_age_s:.0f} s: their task was lost"
            )
        finish_run(run.pk)
        run.refresh_from_db()
        silent = run.nodes_total - run.nodes_ok - run.nodes_failed
        if run.finished_at is None and silent > 0:
            CollectionProblem.objects.create(
                run=run,
                message=f"{silent} node(s) gave no outcome within {max_age_s:.0f} s: their tasks expired or were lost",
            )
            CollectionRun.objects.filter(pk=run.pk, finished_at__isnull=True).update(
                finished_at=timezone.now(),
                nodes_failed=F("nodes_failed") + silent,
                status=CollectionRun.Status.PARTIAL if run.nodes_ok else CollectionRun.Status.FAILED,
            )
            closed += 1
    return closed


def fail_run(run: CollectionRun, message: str) -> None:
    CollectionProblem.objects.create(run=run, node="", message=_storable_text(message))
    run.finished_at, run.status = timezone.now(), CollectionRun.Status.FAILED
    CollectionRun.objects.filter(pk=run.pk).update(finished_at=run.finished_at, status=run.status)


def _add_problems(run: CollectionRun, node: str, problems: list[str]) -> None:
    if not problems:
        return
    shown = problems[:MAX_PROBLEMS_PER_NODE]
    if len(problems) > len(shown):
        shown.append(f"… and {len(problems) - len(shown)} more problems")
    CollectionProblem.objects.bulk_create(
        [CollectionProblem(run=run, node=node, message=_storable_text(p)) for p in shown]
    )


def _storable_text(message: str) -> str:
    """A message cut to 2,000 characters, with what PostgreSQL cannot store escaped: NUL characters (a problem may
    quote a hostile name) and lone surrogates (JSON lets "\\ud800" through)."""
    return message[:2000].encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")


def announce_run_closed(run_id: int) -> None:
    """Tell the layers above that a worker's cycle stored its readings (they enqueue their work after the commit)."""
    cluster = Cluster.objects.get(runs__pk=run_id)
    announce_series_stored(cluster, at=timezone.now(), wait=False)


def collect_once(cluster: Cluster, *, workers: int = 4, refresh: bool = True) -> CollectionRun:
    """A whole cycle in this process (manage.py collect --once, tests): inventory, then the nodes in a thread pool
    (scrapes wait on the network), each failure recorded against its node; then the findings are refreshed."""
    run = start_run(cluster)
    try:
        source = source_for(cluster)
    except SourceUnavailable as exc:
        fail_run(run, str(exc))
        run.refresh_from_db()
        return run
    try:
        nodes = collect_inventory(run, source)

        def one(node: str) -> None:
            try:
                collect_node(run.pk, node, source)
            except Exception as exc:
                log.warning("node %s failed: %s", node, exc)
                record_node_failure(run.pk, node, exc)
            finally:
                close_old_connections()

        # SQLite takes one writer at a time: threads would only queue on its lock (or fail with "table is locked").
        if workers <= 1 or len(nodes) <= 1 or connection.vendor == "sqlite":
            for node in nodes:
                one(node)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(one, nodes))
    finally:
        source.close()
    run.refresh_from_db()
    if refresh and run.nodes_ok:
        announce_series_stored(cluster, at=timezone.now(), wait=True)
    return run
