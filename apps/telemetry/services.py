"""Writing the time series: inventory upserts, delta computation, bulk sample writes, partitions, rollups, retention.

Every function here is idempotent: a batch ingested twice is stored once, a rollup recomputed gives the same rows,
retention run twice drops nothing more.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, models, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Q
from django.utils import timezone

from apps.clusters.models import Cluster, Container, Node, Pod

from .counters import MAX_SANE, BadCounter, check_counter, counter_delta
from .models import HourlyRollup, Sample
from .readings import Batch, ContainerInfo, CounterReading, NodeInfo, PodInfo

log = logging.getLogger(__name__)

SAMPLE_COLUMNS = (
    "container_id",
    "ts",
    "periods_total",
    "throttled_periods_total",
    "throttled_seconds_total",
    "usage_seconds_total",
    "threads",
    "interval_s",
    "periods_delta",
    "throttled_periods_delta",
    "throttled_seconds_delta",
    "usage_seconds_delta",
    "reset",
)
COUNTER_FIELDS = ("periods_total", "throttled_periods_total", "throttled_seconds_total", "usage_seconds_total")
DELETE_BATCH = 5000
HASH_JOIN_MIN_READINGS = 2000  # above this, the PostgreSQL ingest forces hash joins (see _ingest_in_sql)


@dataclass
class IngestResult:
    samples_written: int = 0
    duplicates: int = 0  # readings at or before the container's last stored instant
    resets: int = 0
    containers_created: int = 0
    problems: list[str] = field(default_factory=list)

    def merge(self, other: IngestResult) -> None:
        self.samples_written += other.samples_written
        self.duplicates += other.duplicates
        self.resets += other.resets
        self.containers_created += other.containers_created
        self.problems.extend(other.problems)


# --- what the columns can hold ----------------------------------------------------------------------------------------
# Values from a source are checked against their columns before any write. PostgreSQL refuses text longer than its
# column or holding a NUL, and an integer past its column's range, and the error aborts the whole transaction: one
# broken object would cost its node's readings or the cluster's inventory. SQLite would store them. A lone surrogate
# (from JSON's "\ud800") cannot be encoded for either. So both databases get PostgreSQL's limits, checked here.

_INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges
_Info = TypeVar("_Info", NodeInfo, PodInfo, ContainerInfo, CounterReading)
# Per kind of value: (attribute, its column, whether an unstorable value refuses the whole object, the column's
# length and integer range — kept here for the common case, checked without a call).
_Columns = tuple[tuple[str, models.Field, bool, int, tuple[int, int]], ...]
_NO_RANGE = (-(2**63), 2**63 - 1)


def _column(model: type[models.Model], name: str) -> models.Field:
    column = model._meta.get_field(name)
    if not isinstance(column, models.Field):
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return column


def _columns(model: type[models.Model], attributes: Iterable[str], identity: Iterable[str]) -> _Columns:
    names_it = set(identity)
    return tuple(_spec(name, _column(model, name), name in names_it) for name in attributes)


def _spec(name: str, column: models.Field, names_it: bool) -> tuple[str, models.Field, bool, int, tuple[int, int]]:
    bounds = _INTEGER_RANGES.get(column.get_internal_type(), _NO_RANGE)
    return (name, column, names_it, column.max_length or 2**63, bounds)


# What a source may report of a node besides its name; upsert_nodes keeps the stored value where one is missing.
_NODE_REPORTED = (
    "capacity_mcpu",
    "allocatable_mcpu",
    "kernel_version",
    "os_image",
    "container_runtime",
    "kubelet_version",
    "cpu_manager_policy",
    "cfs_slice_us",
    "cpufreq_governor",
)
_NODE_COLUMNS = _columns(
    Node,
    ["name", *_NODE_REPORTED],
    identity=["name"],
)
_POD_COLUMNS = _columns(
    Pod, ["namespace", "name", "uid", "qos_class", "workload_kind", "workload_name"], identity=["namespace", "name"]
)
_CONTAINER_COLUMNS = _columns(
    Container, ["name", "container_id", "request_mcpu", "limit_mcpu", "restarts"], identity=["name"]
)
_READING_COLUMNS: _Columns = (
    _spec("namespace", _column(Pod, "namespace"), True),
    _spec("pod", _column(Pod, "name"), True),
    _spec("container", _column(Container, "name"), True),
    _spec("node", _column(Node, "name"), False),
    _spec("threads", _column(Sample, "threads"), False),
    _spec("period_us", _column(Container, "period_us"), False),
)


def unstorable(value: Any, column: models.Field) -> str | None:
    """Why `value` cannot be written to `column` on PostgreSQL (and so is not written on SQLite either), or None.

    Text: longer than the column, a NUL character, a lone surrogate. Integers: outside the column type's range.
    """
    if isinstance(value, str):
        max_length = column.max_length
        if (max_length is None or len(value) <= max_length) and value.isascii() and "\x00" not in value:
            return None  # the common case, in three cheap checks (isascii reads a flag)
        if max_length is not None and len(value) > max_length:
            return f"is {len(value)} characters long, more than the {max_length} stored"
        if "\x00" in value:
            return "holds a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode (it holds a lone surrogate)"
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        bounds = _INTEGER_RANGES.get(column.get_internal_type())
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            return f"is outside {bounds[0]} to {bounds[1]}"
    return None


def _shown(value: Any) -> str:
    """A value for a problem message: quoted with escapes, cut to 60 characters; huge numbers by their size."""
    if isinstance(value, int) and value.bit_length() > 64:  # str() of a 5,000-digit int raises ValueError
        return f"(a {value.bit_length()}-bit number)"
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:60]!r}…"
    return repr(value)


def _storable(info: _Info, columns: _Columns, problems: list[str] | None, what: str, *names: str) -> _Info | None:
    """`info` ready for its columns: None when a value that names it cannot be stored, else with every other
    unstorable value replaced by its column's default ("not reported"); each one noted in `problems`, as `what`
    formatted with `names` says (worked out only then)."""
    changes: dict[str, Any] = {}
    for name, column, names_it, max_length, (low, high) in columns:
        value = getattr(info, name)
        if value is None:
            continue
        if type(value) is str:  # the common cases first, without a call (isascii reads a flag)
            if len(value) <= max_length and value.isascii() and "\x00" not in value:
                continue
        elif type(value) is int and low <= value <= high:
            continue
        reason = unstorable(value, column)
        if reason is None:
            continue
        where = _said(what, *names)
        if names_it:
            _note(problems, f"{where}: {name} {_shown(value)} {reason}; not stored")
            return None
        _note(problems, f"{where}: {name} {_shown(value)} {reason}; stored as unknown")
        changes[name] = column.get_default()
    return dataclasses.replace(info, **changes) if changes else info


def _note(problems: list[str] | None, message: str) -> None:
    if problems is None:
        log.warning("%s", message)
    else:
        problems.append(message)


def _said(what: str, *names: str) -> str:
    """`what` formatted with `names` for a problem message: each name cut to 60 characters (they may be garbage of
    any length), NULs and lone surrogates escaped so that the message itself can be stored."""
    cut = (name if len(name) <= 60 else f"{name[:60]}…" for name in names)
    return what.format(*(n.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00") for n in cut))


# --- inventory -------------------------------------------------------------------------------------------------------


def upsert_nodes(
    cluster: Cluster,
    nodes: Sequence[NodeInfo],
    now: datetime,
    problems: list[str] | None = None,
    *,
    method: str = "auto",
) -> dict[str, int]:
    """Create or update the cluster's nodes; returns name → id. Fields a source did not report are left as they were.

    `method`: "sql" (PostgreSQL: COPY and one statement), "orm", or "auto" — "sql" on PostgreSQL for more than one node.

    A node whose name cannot be stored (see `unstorable`) is skipped, another unstorable value is left as it was;
    each is noted in `problems` (logged when None). Of two nodes of one name, the last is kept.
    """
    checked = (_storable(n, _NODE_COLUMNS, problems, "node {}", n.name) for n in nodes)
    nodes = list({n.name: n for n in checked if n is not None}.values())
    if not nodes:
        return dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" and len(nodes) > 1 else "orm"
    if method == "sql":
        _upsert_nodes_in_sql(cluster, nodes, now)
        return dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster, name__in=[n.name for n in nodes])}
    to_create: list[Node] = []
    to_update: list[Node] = []
    for info in nodes:
        node = existing.get(info.name) or Node(cluster=cluster, name=info.name)
        for attr in _NODE_REPORTED:
            value = getattr(info, attr)
            if value not in (None, ""):
                setattr(node, attr, value)
        node.last_seen = now
        (to_update if node.pk else to_create).append(node)
    Node.objects.bulk_create(to_create)
    if to_update:
        Node.objects.bulk_update(to_update, [*_NODE_REPORTED, "last_seen"], batch_size=1000)
    return dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))


_CREATE_NODE_LOAD = """
CREATE TEMP TABLE IF NOT EXISTS node_load (
    name text, capacity_mcpu bigint, allocatable_mcpu bigint, kernel_version text, os_image text,
    container_runtime text, kubelet_version text, cpu_manager_policy text, cfs_slice_us bigint, cpufreq_governor text
) ON COMMIT DELETE ROWS
"""
_NODE_TEXT = frozenset(name for name in _NODE_REPORTED if isinstance(_column(Node, name), models.CharField))
# A field the source did not report (NULL, or "" for text) keeps the stored value, as in the ORM path.
_UPSERT_NODES = """
INSERT INTO clusters_node (cluster_id, name, {columns}, last_seen)
SELECT %(cluster)s, name, {inserted}, %(now)s FROM node_load ORDER BY name
ON CONFLICT (cluster_id, name) DO UPDATE SET {updates}, last_seen = excluded.last_seen
""".format(
    columns=", ".join(_NODE_REPORTED),
    inserted=", ".join(f"COALESCE({c}, '')" if c in _NODE_TEXT else c for c in _NODE_REPORTED),
    updates=", ".join(
        f"{c} = COALESCE(NULLIF(excluded.{c}, ''), clusters_node.{c})"
        if c in _NODE_TEXT
        else f"{c} = COALESCE(excluded.{c}, clusters_node.{c})"
        for c in _NODE_REPORTED
    ),
)


def copy_rows(cursor: Any, table: str, columns: Iterable[str], rows: Iterable[Sequence[Any]]) -> None:
    """PostgreSQL: COPY `rows` (tuples in `columns` order) into `table` through a Django cursor — how every bulk
    write here reaches the database (temporary load tables, then one statement)."""
    with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _upsert_nodes_in_sql(cluster: Cluster, nodes: Sequence[NodeInfo], now: datetime) -> None:
    """PostgreSQL: COPY and one statement (bulk_update's CASE expressions for 1,000 nodes took seconds per cycle)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CREATE_NODE_LOAD)
        cursor.execute("TRUNCATE node_load")  # ON COMMIT empties it only at the outermost commit
        rows = ((node.name, *(getattr(node, c) for c in _NODE_REPORTED)) for node in nodes)
        copy_rows(cursor, "node_load", ("name", *_NODE_REPORTED), rows)
        cursor.execute(_UPSERT_NODES, {"cluster": cluster.pk, "now": now})


def upsert_pods(
    cluster: Cluster,
    pods: Sequence[PodInfo],
    now: datetime,
    node_ids: dict[str, int],
    problems: list[str] | None = None,
    *,
    method: str = "auto",
) -> int:
    """Create or update pods and their containers (matched by namespace/name and container name). Returns pods stored.

    `method`: "sql" (PostgreSQL: COPY and one statement per table), "orm" (bulk_create), or "auto" — "sql" on PostgreSQL.

    A pod or container whose name cannot be stored (see `unstorable`) is skipped, another unstorable value stored as
    unknown; each is noted in `problems` (logged when None). Of two pods (or containers of a pod) of one name, the
    last is kept — PostgreSQL refuses to upsert one row twice in a statement.
    """
    pods = _storable_pods(pods, problems)
    if not pods:
        return 0
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" else "orm"
    if method == "sql":
        _upsert_pods_in_sql(cluster, pods, now, node_ids)
    else:
        # A chunk of pods at a time: model instances for 150,000 pods and 300,000 containers at once held 450 MB.
        for start in range(0, len(pods), UPSERT_CHUNK_PODS):
            _upsert_pod_chunk(cluster, pods[start : start + UPSERT_CHUNK_PODS], now, node_ids)
    analyze_tables("clusters_node", "clusters_pod", "clusters_container")
    return len(pods)


UPSERT_CHUNK_PODS = 5000

# PostgreSQL: the inventory goes to temporary tables by COPY and into the real ones in one statement each. The
# ORM's bulk_create with update_conflicts spent ~5 s of a 1,000-node cycle compiling 30,000 pods' and 60,000
# containers' VALUES lists, before any node of the cycle could be read (benchmarks/bench_scale.py).
_CREATE_POD_LOAD = """
CREATE TEMP TABLE IF NOT EXISTS pod_load (
    namespace text, name text, uid text, node_id bigint, qos_class text, workload_kind text, workload_name text
) ON COMMIT DELETE ROWS
"""
_CREATE_CONTAINER_LOAD = """
CREATE TEMP TABLE IF NOT EXISTS container_load (
    namespace text, pod text, name text, container_id text, request_mcpu bigint, limit_mcpu bigint, restarts bigint
) ON COMMIT DELETE ROWS
"""
# In key order, as every writer of these rows locks them: two writers never wait on each other crosswise.
_UPSERT_PODS = """
INSERT INTO clusters_pod (cluster_id, namespace, name, uid, node_id, qos_class, workload_kind, workload_name, last_seen)
SELECT %(cluster)s, namespace, name, uid, node_id, qos_class, workload_kind, workload_name, %(now)s
FROM pod_load ORDER BY namespace, name
ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET uid = excluded.uid, node_id = excluded.node_id,
    qos_class = excluded.qos_class, workload_kind = excluded.workload_kind, workload_name = excluded.workload_name,
    last_seen = excluded.last_seen
"""
_UPSERT_CONTAINERS = """
INSERT INTO clusters_container (pod_id, name, container_id, request_mcpu, limit_mcpu, restarts, last_seen)
SELECT p.id, l.name, l.container_id, l.request_mcpu, l.limit_mcpu, l.restarts, %(now)s
FROM container_load l
JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
ORDER BY p.id, l.name
ON CONFLICT (pod_id, name) DO UPDATE SET container_id = excluded.container_id,
    request_mcpu = excluded.request_mcpu, limit_mcpu = excluded.limit_mcpu, restarts = excluded.restarts,
    last_seen = excluded.last_seen
"""


def _upsert_pods_in_sql(cluster: Cluster, pods: Sequence[PodInfo], now: datetime, node_ids: dict[str, int]) -> None:
    params: dict[str, int | datetime] = {"cluster": cluster.pk, "now": now}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CREATE_POD_LOAD)
        cursor.execute(_CREATE_CONTAINER_LOAD)
        # Emptied here too: ON COMMIT empties them only at the outermost commit, and a caller may upsert twice in one.
        cursor.execute("TRUNCATE pod_load, container_load")
        copy_rows(
            cursor,
            "pod_load",
            ("namespace", "name", "uid", "node_id", "qos_class", "workload_kind", "workload_name"),
            (
                (p.namespace, p.name, p.uid, node_ids.get(p.node), p.qos_class, p.workload_kind, p.workload_name)
                for p in pods
            ),
        )
        copy_rows(
            cursor,
            "container_load",
            ("namespace", "pod", "name", "container_id", "request_mcpu", "limit_mcpu", "restarts"),
            (
                (p.namespace, p.name, c.name, c.container_id, c.request_mcpu, c.limit_mcpu, c.restarts)
                for p in pods
                for c in p.containers
            ),
        )
        cursor.execute("ANALYZE pod_load, container_load")
        cursor.execute(_UPSERT_PODS, params)
        cursor.execute(_UPSERT_CONTAINERS, params)


def _upsert_pod_chunk(cluster: Cluster, pods: Sequence[PodInfo], now: datetime, node_ids: dict[str, int]) -> None:
    pod_rows = [
        Pod(
            cluster=cluster,
            namespace=p.namespace,
            name=p.name,
            uid=p.uid,
            node_id=node_ids.get(p.node),
            qos_class=p.qos_class,
            workload_kind=p.workload_kind,
            workload_name=p.workload_name,
            last_seen=now,
        )
        for p in pods
    ]
    Pod.objects.bulk_create(
        pod_rows,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=["cluster", "namespace", "name"],
        update_fields=["uid", "node", "qos_class", "workload_kind", "workload_name", "last_seen"],
    )
    pod_ids = _pod_ids(cluster, [(p.namespace, p.name) for p in pods])
    container_rows = [
        Container(
            pod_id=pod_ids[(p.namespace, p.name)],
            name=c.name,
            container_id=c.container_id,
            request_mcpu=c.request_mcpu,
            limit_mcpu=c.limit_mcpu,
            restarts=c.restarts,
            last_seen=now,
        )
        for p in pods
        for c in p.containers
    ]
    Container.objects.bulk_create(
        container_rows,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=["pod", "name"],
        update_fields=["container_id", "request_mcpu", "limit_mcpu", "restarts", "last_seen"],
    )


def analyze_recent(now: datetime | None = None) -> None:
    """Statistics for the series tables that grow all day: the heads, today's sample partition, the rollups."""
    if connection.vendor != "postgresql":
        return
    today = partition_name((now or timezone.now()).astimezone(UTC).date())
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [today])
        exists = cursor.fetchone()[0] is not None
    analyze_tables("telemetry_serieshead", "telemetry_hourlyrollup", *([today] if exists else []))


def analyze_tables(*tables: str) -> None:
    """PostgreSQL: refresh the planner's statistics of tables that just changed a lot.

    Autovacuum may be off or minutes behind (it was off on the machines cputune is tested on). Without statistics
    the planner took a cluster of 6,000 pods for 2 and ran ingest's container lookup as a nested loop over every
    container for every reading: 27 s for one batch instead of 50 ms. ANALYZE samples at most 30,000 rows per
    table, well under a second even at 150,000 pods.
    """
    if connection.vendor != "postgresql" or not tables:
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(tables)}")


def _storable_pods(pods: Sequence[PodInfo], problems: list[str] | None) -> list[PodInfo]:
    """The pods and containers upsert_pods can write (see its docstring), one per name."""
    by_key: dict[tuple[str, str], PodInfo] = {}
    for pod in pods:
        checked = _storable(pod, _POD_COLUMNS, problems, "pod {}/{}", pod.namespace, pod.name)
        if checked is None:
            continue
        containers: dict[str, ContainerInfo] = {}
        for container in pod.containers:
            names = (pod.namespace, pod.name, container.name)
            stored = _storable(container, _CONTAINER_COLUMNS, problems, "pod {}/{} container {}", *names)
            if stored is not None:
                if stored.name in containers:
                    _note(problems, _said("pod {}/{} container {} is listed twice; the last one kept", *names))
                containers[stored.name] = stored
        kept = tuple(containers.values())
        if kept != pod.containers:
            checked = dataclasses.replace(checked, containers=kept)
        if (checked.namespace, checked.name) in by_key:
            _note(problems, _said("pod {}/{} is listed twice; the last one kept", pod.namespace, pod.name))
        by_key[(checked.namespace, checked.name)] = checked
    return list(by_key.values())


def _pod_ids(cluster: Cluster, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    keys = set(keys)
    names = {name for _, name in keys}
    rows = Pod.objects.filter(cluster=cluster, name__in=names).values_list("namespace", "name", "id")
    return {(ns, name): pk for ns, name, pk in rows if (ns, name) in keys}


def _containers_with_heads(
    cluster: Cluster, readings: Sequence[CounterReading], now: datetime, result: IngestResult
) -> dict[tuple[str, str, str], tuple]:
    """(namespace, pod, container) → (id, period_us, head ts, head counters…) in one query per 5,000 pods.

    Containers not in the inventory yet (a pod started after the list) are created bare, not dropped.
    """
    wanted = {(r.namespace, r.pod, r.container) for r in readings}
    found = _lookup_containers(cluster, wanted, {(ns, p) for ns, p, _ in wanted})
    missing = wanted - found.keys()
    if missing:
        node_of = {(r.namespace, r.pod): r.node for r in readings}
        node_ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
        pods = {(ns, p) for ns, p, _ in missing}
        Pod.objects.bulk_create(
            [
                Pod(
                    cluster=cluster, namespace=ns, name=p, node_id=node_ids.get(node_of.get((ns, p), "")), last_seen=now
                )
                for ns, p in pods
            ],
            ignore_conflicts=True,
        )
        pod_ids = _pod_ids(cluster, pods)
        Container.objects.bulk_create(
            [Container(pod_id=pod_ids[(ns, p)], name=c, last_seen=now) for ns, p, c in missing],
            ignore_conflicts=True,
        )
        result.containers_created += len(missing)
        found.update(_lookup_containers(cluster, missing, pods))
    return found


_LOOKUP_SQL = """
SELECT p.namespace, p.name, c.name, c.id, c.period_us, h.ts, h.periods_total, h.throttled_periods_total,
       h.throttled_seconds_total, h.usage_seconds_total
FROM clusters_container c
JOIN clusters_pod p ON p.id = c.pod_id
LEFT JOIN telemetry_serieshead h ON h.container_id = c.id
{join}
WHERE p.cluster_id = %s {where}
"""
# PostgreSQL takes the wanted pods as two arrays (thousands of placeholders cost more to parse than the query runs);
# SQLite as a VALUES list of pairs.
_LOOKUP_PG = _LOOKUP_SQL.format(
    join="JOIN unnest(%s::text[], %s::text[]) AS w(namespace, name) ON w.namespace = p.namespace AND w.name = p.name",
    where="",
)


def _lookup_containers(
    cluster: Cluster, wanted: set[tuple[str, str, str]], pods: set[tuple[str, str]]
) -> dict[tuple[str, str, str], tuple]:
    # Raw SQL: the ORM's values_list spent 0.33 s of a 1.1 s batch of 10,000 readings building rows in profiling.
    found: dict[tuple[str, str, str], tuple] = {}
    with connection.cursor() as cursor:
        for chunk in _chunks(sorted(pods), 5000):
            if connection.vendor == "postgresql":
                cursor.execute(_LOOKUP_PG, [[ns for ns, _ in chunk], [name for _, name in chunk], cluster.pk])
            else:
                pairs = ", ".join(["(%s, %s)"] * len(chunk))
                where = f"AND (p.namespace, p.name) IN (VALUES {pairs})"
                cursor.execute(
                    _LOOKUP_SQL.format(join="", where=where), [cluster.pk, *(v for pair in chunk for v in pair)]
                )
            for row in cursor.fetchall():
                if row[:3] in wanted:
                    ts = row[5]
                    if ts is not None and ts.tzinfo is None:  # SQLite returns naive UTC
                        ts = ts.replace(tzinfo=UTC)
                    found[row[:3]] = (row[3], row[4], ts, *row[6:])
    return found


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# --- readings --------------------------------------------------------------------------------------------------------


def ingest(cluster: Cluster, batch: Batch, *, now: datetime | None = None) -> IngestResult:
    """Store one source batch: inventory first, then readings (deltas against each container's last reading)."""
    now = now or timezone.now()
    problems: list[str] = []
    with transaction.atomic():
        node_ids = upsert_nodes(cluster, batch.nodes, now, problems)
        upsert_pods(cluster, batch.pods, now, node_ids, problems)
    result = ingest_readings(cluster, batch.readings, now=now)
    result.problems[:0] = problems
    return result


def ingest_readings(
    cluster: Cluster, readings: Sequence[CounterReading], *, now: datetime | None = None, method: str = "auto"
) -> IngestResult:
    """Turn cumulative readings into samples with deltas and write them; idempotent per (container, ts).

    A reading at or before the container's last stored instant is a duplicate and is skipped. A counter that went
    backwards is a reset: the delta is the new value. Counters that cannot be real (NaN, negative, > 2**53) are
    dropped from that reading with a problem noted; the rest of the reading and of the batch is kept. So is a reading
    whose names cannot be stored (see `unstorable`), and a threads count or period the columns cannot hold.
    """
    now = now or timezone.now()
    result = IngestResult()
    readings = _storable_readings(readings, result.problems)
    if not readings:
        return result
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" else "bulk_create"
    if method == "sql":
        return _ingest_in_sql(cluster, readings, now, result)
    containers = _containers_with_heads(cluster, readings, now, result)
    rows: list[tuple] = []
    heads: dict[int, tuple] = {}  # container id → (id, ts, *counters): the new head after this batch
    period_updates: dict[int, int] = {}
    for reading in sorted(readings, key=lambda r: r.ts):
        cid, period_us, head_ts, *head_values = containers[(reading.namespace, reading.pod, reading.container)]
        if cid in heads:  # several readings of one container in this batch: chain from the previous one
            head_ts, *head_values = heads[cid][1:]
        values = _checked_counters(reading, result)
        if head_ts is not None and reading.ts <= head_ts:
            result.duplicates += 1
            continue
        reset = False
        interval_s = None
        deltas: list[float | int | None] = [None, None, None, None]
        if head_ts is not None:
            interval_s = (reading.ts - head_ts).total_seconds()
            for i in range(4):
                deltas[i], was_reset = counter_delta(head_values[i], values[i])
                reset = reset or was_reset
        if reset:
            result.resets += 1
        rows.append((cid, reading.ts, *values, reading.threads, interval_s, *deltas, reset))
        heads[cid] = (cid, reading.ts, *values)
        if reading.period_us and reading.period_us != period_us:
            period_updates[cid] = reading.period_us
    if not rows:
        return result
    ensure_partitions({row[1].astimezone(UTC).date() for row in rows})
    with transaction.atomic():
        result.samples_written = write_samples(rows, method=method)
        _upsert_heads(list(heads.values()))
        for period_us in set(period_updates.values()):
            Container.objects.filter(pk__in=[c for c, p in period_updates.items() if p == period_us]).update(
                period_us=period_us
            )
    return result


def _storable_readings(readings: Sequence[CounterReading], problems: list[str]) -> Sequence[CounterReading]:
    """The readings whose values the columns can hold (see ingest_readings); the same sequence when all can."""
    kept: list[CounterReading] = []
    changed = False
    for reading in readings:
        names = (reading.namespace, reading.pod, reading.container)
        checked = _storable(reading, _READING_COLUMNS, problems, "reading of {}/{}/{}", *names)
        changed = changed or checked is not reading
        if checked is not None:
            kept.append(checked)
    return kept if changed else readings


def _checked_counters(reading: CounterReading, result: IngestResult) -> list[float | int | None]:
    """The reading's four counters (COUNTER_FIELDS order), with impossible values replaced by None and noted."""
    values: list[float | int | None] = [
        reading.periods_total,
        reading.throttled_periods_total,
        reading.throttled_seconds_total,
        reading.usage_seconds_total,
    ]
    for i, value in enumerate(values):
        # The common case in one comparison (NaN fails it too); check_counter words the problem.
        if value is None or 0 <= value <= MAX_SANE:
            continue
        try:
            check_counter(COUNTER_FIELDS[i], value)
        except BadCounter as exc:
            result.problems.append(f"{reading.namespace}/{reading.pod}/{reading.container} at {reading.ts}: {exc}")
            values[i] = None
    return values


# --- the PostgreSQL path: deltas computed by the database -------------------------------------------------------------

_LOAD_COLUMNS = (
    "namespace",
    "pod",
    "container",
    "node",
    "ts",
    "periods_total",
    "throttled_periods_total",
    "throttled_seconds_total",
    "usage_seconds_total",
    "threads",
    "period_us",
)
_CREATE_LOAD = """
CREATE TEMP TABLE IF NOT EXISTS reading_load (
    namespace text, pod text, container text, node text, ts timestamptz,
    periods_total bigint, throttled_periods_total bigint, throttled_seconds_total float8, usage_seconds_total float8,
    threads integer, period_us integer
) ON COMMIT DELETE ROWS
"""
_CREATE_MISSING_PODS = """
INSERT INTO clusters_pod (cluster_id, namespace, name, uid, qos_class, workload_kind, workload_name, last_seen, node_id)
SELECT DISTINCT ON (l.namespace, l.pod) %(cluster)s, l.namespace, l.pod, '', '', '', '', %(now)s, n.id
FROM reading_load l
LEFT JOIN clusters_node n ON n.cluster_id = %(cluster)s AND n.name = l.node
WHERE NOT EXISTS (
    SELECT 1 FROM clusters_pod p WHERE p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
)
ORDER BY l.namespace, l.pod
ON CONFLICT DO NOTHING
"""
_CREATE_MISSING_CONTAINERS = """
INSERT INTO clusters_container (pod_id, name, container_id, restarts, last_seen)
SELECT DISTINCT p.id, l.container, '', 0, %(now)s::timestamptz
FROM reading_load l
JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
WHERE NOT EXISTS (SELECT 1 FROM clusters_container c WHERE c.pod_id = p.id AND c.name = l.container)
ORDER BY p.id, l.container
ON CONFLICT DO NOTHING
"""
# Two ingests of one container at once (overlapping cycles: a double-started beat, a redelivered task beside the
# next cycle's) would both compute their deltas against the same head and store overlapping intervals, counting the
# seconds between their readings twice. So the batch's series heads are locked first, in id order (two batches never
# wait on each other crosswise): the second ingest waits, and its statement then sees the first one's samples and
# head. Only ingests write heads, so nothing else waits; a container's very first readings have no head to lock.
_LOCK_HEADS = """
SELECT h.container_id FROM telemetry_serieshead h
WHERE h.container_id IN (
    SELECT c.id FROM reading_load l
    JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
    JOIN clusters_container c ON c.pod_id = p.id AND c.name = l.container
)
ORDER BY h.container_id
FOR UPDATE
"""
# Readings resolved to containers, deduplicated per (container, instant); the stored heads before them; a window
# over both gives each reading its predecessor — the head, or the previous reading of the same batch. The same rules
# as the Python path: a missing side gives no delta, a value below its predecessor is a reset whose delta is itself.
_INGEST = """
WITH r AS (
    SELECT DISTINCT ON (c.id, l.ts) c.id AS cid, l.ts, l.periods_total AS p, l.throttled_periods_total AS tp,
           l.throttled_seconds_total AS tsec, l.usage_seconds_total AS u, l.threads, l.period_us,
           c.period_us AS old_period_us
    FROM reading_load l
    JOIN clusters_pod pd ON pd.cluster_id = %(cluster)s AND pd.namespace = l.namespace AND pd.name = l.pod
    JOIN clusters_container c ON c.pod_id = pd.id AND c.name = l.container
    ORDER BY c.id, l.ts
), h AS (
    SELECT container_id AS cid, ts, periods_total AS p, throttled_periods_total AS tp,
           throttled_seconds_total AS tsec, usage_seconds_total AS u
    FROM telemetry_serieshead WHERE container_id IN (SELECT cid FROM r)
), fresh AS (
    SELECT r.* FROM r LEFT JOIN h ON h.cid = r.cid WHERE h.ts IS NULL OR r.ts > h.ts
), seq AS (
    SELECT cid, ts, p, tp, tsec, u, threads, false AS is_head FROM fresh
    UNION ALL
    SELECT cid, ts, p, tp, tsec, u, NULL, true FROM h WHERE cid IN (SELECT cid FROM fresh)
), lagged AS (
    SELECT seq.*, lag(ts) OVER w AS prev_ts, lag(p) OVER w AS pp, lag(tp) OVER w AS ptp,
           lag(tsec) OVER w AS ptsec, lag(u) OVER w AS pu
    FROM seq WINDOW w AS (PARTITION BY cid ORDER BY ts)
), inserted AS (
    INSERT INTO telemetry_sample (container_id, ts, periods_total, throttled_periods_total, throttled_seconds_total,
        usage_seconds_total, threads, interval_s, periods_delta, throttled_periods_delta, throttled_seconds_delta,
        usage_seconds_delta, reset)
    SELECT cid, ts, p, tp, tsec, u, threads,
        EXTRACT(EPOCH FROM ts - prev_ts)::float8,
        CASE WHEN pp IS NULL OR p IS NULL THEN NULL WHEN p < pp THEN p ELSE p - pp END,
        CASE WHEN ptp IS NULL OR tp IS NULL THEN NULL WHEN tp < ptp THEN tp ELSE tp - ptp END,
        CASE WHEN ptsec IS NULL OR tsec IS NULL THEN NULL WHEN tsec < ptsec THEN tsec ELSE tsec - ptsec END,
        CASE WHEN pu IS NULL OR u IS NULL THEN NULL WHEN u < pu THEN u ELSE u - pu END,
        COALESCE(p < pp, false) OR COALESCE(tp < ptp, false) OR COALESCE(tsec < ptsec, false) OR COALESCE(u < pu, false)
    FROM lagged WHERE NOT is_head
    ON CONFLICT DO NOTHING
    RETURNING container_id, ts, periods_total, throttled_periods_total, throttled_seconds_total, usage_seconds_total,
              reset
), heads AS (
    INSERT INTO telemetry_serieshead (container_id, ts, periods_total, throttled_periods_total,
        throttled_seconds_total, usage_seconds_total)
    SELECT DISTINCT ON (container_id) container_id, ts, periods_total, throttled_periods_total,
           throttled_seconds_total, usage_seconds_total
    FROM inserted ORDER BY container_id, ts DESC
    ON CONFLICT (container_id) DO UPDATE SET ts = excluded.ts, periods_total = excluded.periods_total,
        throttled_periods_total = excluded.throttled_periods_total,
        throttled_seconds_total = excluded.throttled_seconds_total, usage_seconds_total = excluded.usage_seconds_total
    WHERE telemetry_serieshead.ts < excluded.ts
), periods AS (
    UPDATE clusters_container c SET period_us = x.period_us
    FROM (SELECT DISTINCT ON (cid) cid, period_us, old_period_us FROM r WHERE period_us IS NOT NULL
          ORDER BY cid, ts DESC) x
    WHERE c.id = x.cid AND x.old_period_us IS DISTINCT FROM x.period_us
)
SELECT count(*), count(*) FILTER (WHERE reset) FROM inserted
"""


def _needs_analyze(rows: int) -> bool:
    """Whether this session's reading_load needs fresh statistics for a batch of `rows`: the first time, and when
    the batch is more than twice or less than half the size last analysed. The planner scales the analysed row
    count by the table's current pages, so same-sized batches (a node's scrape, cycle after cycle) plan alike
    without one: measured, the same plans and 0.3 ms less per node read, and no catalog rows (pg_statistic,
    pg_class) rewritten on every read, which pile up as dead rows until a vacuum."""
    session = connection.connection.info.backend_pid
    analysed = _ANALYSED_LOAD_ROWS.get(session)
    if analysed is not None and analysed / 2 <= rows <= analysed * 2:
        return False
    if len(_ANALYSED_LOAD_ROWS) > 256:  # sessions of connections closed since
        _ANALYSED_LOAD_ROWS.clear()
    _ANALYSED_LOAD_ROWS[session] = rows
    return True


_ANALYSED_LOAD_ROWS: dict[int, int] = {}


# The advisory lock class of "writing a cluster's pods" ("cptu"); the second key is the cluster id.
_INGEST_LOCK_CLASS = 0x63707475


def lock_cluster_ingest(cluster: Cluster, *, exclusive: bool) -> None:
    """PostgreSQL: in the current transaction, take the cluster's ingest lock — shared by node ingests (they run
    side by side), exclusive for the inventory's pod upsert. Ingests create the pods and containers they find
    missing and the upsert writes every one: held apart, the two never lock those rows in opposite orders (a
    deadlock), and an ingest waits for the upsert (~2 s at 30,000 pods) rather than the other way round."""
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [_INGEST_LOCK_CLASS, cluster.pk])


def _ingest_in_sql(
    cluster: Cluster, readings: Sequence[CounterReading], now: datetime, result: IngestResult
) -> IngestResult:
    """PostgreSQL: COPY the readings into a temporary table and let one statement resolve containers, compute the
    deltas against the series heads, insert the samples and move the heads (profiling showed the Python path
    spending most of a 10,000-reading batch fetching heads and building rows)."""
    ensure_partitions({r.ts.astimezone(UTC).date() for r in readings})
    params: dict[str, int | datetime] = {"cluster": cluster.pk, "now": now}
    with transaction.atomic(), connection.cursor() as cursor:
        lock_cluster_ingest(cluster, exclusive=False)
        cursor.execute(_CREATE_LOAD)
        rows = (
            (
                reading.namespace,
                reading.pod,
                reading.container,
                reading.node,
                reading.ts,
                *_checked_counters(reading, result),
                reading.threads,
                reading.period_us,
            )
            for reading in readings
        )
        copy_rows(cursor, "reading_load", _LOAD_COLUMNS, rows)
        if _needs_analyze(len(readings)):
            cursor.execute("ANALYZE reading_load")
        cursor.execute(_CREATE_MISSING_PODS, params)
        cursor.execute(_CREATE_MISSING_CONTAINERS, params)
        result.containers_created = max(0, cursor.rowcount)
        cursor.execute(_LOCK_HEADS, params)
        # The CTEs' row counts are guesses (a fresh temporary table, pods not yet analysed): guessing one row, the
        # planner joined 10,000 readings to 10,000 heads in nested loops — 34 s instead of 0.2 s in EXPLAIN
        # ANALYZE. So big batches get hash joins. A node's batch (tens to hundreds of readings) must not: hashing
        # means reading every container and head of the cluster, per node — 15 ms instead of 4 ms per 60-reading
        # batch with 12,000 containers, and growing with the cluster (quadratic over a cycle).
        big = len(readings) > HASH_JOIN_MIN_READINGS
        if big:
            cursor.execute("SET LOCAL enable_nestloop = off")
        cursor.execute(_INGEST, params)
        written, resets = cursor.fetchone()
        if big:
            cursor.execute("SET LOCAL enable_nestloop TO DEFAULT")
        # Emptied for a caller that ingests twice in one transaction (ON COMMIT empties it at the outermost commit).
        # DELETE, not TRUNCATE: a TRUNCATE is catalog work that every other session has to hear about.
        cursor.execute("DELETE FROM reading_load")
    result.samples_written = written
    result.resets = resets
    result.duplicates = len(readings) - written
    return result


def write_samples(rows: Sequence[tuple], *, method: str = "auto") -> int:
    """Insert sample rows (SAMPLE_COLUMNS order), ignoring ones already stored. Returns rows inserted.

    On PostgreSQL "auto" is COPY into a temporary table then INSERT … ON CONFLICT DO NOTHING (measured faster than
    bulk_create: see benchmarks/bench_ingest.py); elsewhere Django's bulk_create with ignore_conflicts.
    """
    if method == "auto":
        method = "copy" if connection.vendor == "postgresql" else "bulk_create"
    if method == "copy":
        return _copy_samples(rows)
    if method != "bulk_create":
        raise ValueError(f"unknown write method {method!r}")
    before = Sample.objects.count() if connection.vendor != "postgresql" else None
    Sample.objects.bulk_create(
        [Sample(**dict(zip(SAMPLE_COLUMNS, row, strict=True))) for row in rows], batch_size=2000, ignore_conflicts=True
    )
    if before is None:
        return len(rows)  # PostgreSQL's bulk_create does not report ignored rows; readings were deduplicated already
    return Sample.objects.count() - before


def _copy_samples(rows: Sequence[tuple]) -> int:
    cols = ", ".join(SAMPLE_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS sample_load (LIKE telemetry_sample INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        copy_rows(cursor, "sample_load", SAMPLE_COLUMNS, rows)
        cursor.execute(f"INSERT INTO telemetry_sample ({cols}) SELECT {cols} FROM sample_load ON CONFLICT DO NOTHING")  # noqa: S608 - constant column names
        inserted = cursor.rowcount
        cursor.execute("TRUNCATE sample_load")
    return inserted


HEAD_COLUMNS = ("container_id", "ts", *COUNTER_FIELDS)


def _upsert_heads(heads: list[tuple]) -> None:
    """Move each series head forward (rows in HEAD_COLUMNS order); a head never goes back in time.

    PostgreSQL: COPY into a temporary table, then one INSERT … ON CONFLICT DO UPDATE (executemany of 10,000 upserts
    took 2 s of a 7 s batch in profiling). Elsewhere: executemany of the same upsert.
    """
    if not heads:
        return
    cols = ", ".join(HEAD_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in HEAD_COLUMNS[1:])
    conflict = f"ON CONFLICT (container_id) DO UPDATE SET {updates} WHERE telemetry_serieshead.ts < excluded.ts"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS head_load (LIKE telemetry_serieshead) ON COMMIT DELETE ROWS"
            )
            copy_rows(cursor, "head_load", HEAD_COLUMNS, heads)
            cursor.execute(f"INSERT INTO telemetry_serieshead ({cols}) SELECT {cols} FROM head_load {conflict}")  # noqa: S608 - constant column names
            cursor.execute("TRUNCATE head_load")
        else:
            placeholders = ", ".join(["%s"] * len(HEAD_COLUMNS))
            cursor.executemany(f"INSERT INTO telemetry_serieshead ({cols}) VALUES ({placeholders}) {conflict}", heads)  # noqa: S608 - constant column names


# --- partitions ------------------------------------------------------------------------------------------------------

_known_partitions: set[date] = set()
PARTITION_PREFIX = "telemetry_sample_p"


def partition_name(day: date) -> str:
    return f"{PARTITION_PREFIX}{day:%Y%m%d}"


def ensure_partitions(days: Iterable[date]) -> list[str]:
    """Create the daily partitions that do not exist yet (PostgreSQL only). Returns the names created."""
    if connection.vendor != "postgresql":
        return []
    created = []
    # Only remember partitions once committed: inside an outer transaction (a test, a caller's atomic block) the
    # creation may still be rolled back.
    cacheable = not connection.in_atomic_block
    for day in sorted(set(days) - _known_partitions):
        name = partition_name(day)
        with transaction.atomic(), connection.cursor() as cursor:
            # Concurrent workers may race to create the same day; an advisory lock makes them take turns.
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('telemetry_sample_partitions'))")
            cursor.execute("SELECT to_regclass(%s)", [name])
            if cursor.fetchone()[0] is None:
                cursor.execute(
                    f"CREATE TABLE {name} PARTITION OF telemetry_sample "
                    f"FOR VALUES FROM ('{day.isoformat()} 00:00:00+00') TO ('{(day + timedelta(days=1)).isoformat()} 00:00:00+00')"
                )
                created.append(name)
        if cacheable:
            _known_partitions.add(day)
    return created


def list_partitions() -> list[tuple[str, date]]:
    """The sample partitions that exist, with their day, oldest first (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'telemetry_sample'::regclass ORDER BY c.relname"
        )
        names = [r[0] for r in cursor.fetchall()]
    out = []
    for name in names:
        suffix = name.removeprefix(PARTITION_PREFIX)
        try:
            out.append((name, datetime.strptime(suffix, "%Y%m%d").date()))
        except ValueError:
            log.warning("ignoring unexpected partition %s", name)
    return out


# --- retention and rollups ---------------------------------------------------------------------------------------------


@dataclass
class RetentionResult:
    partitions_dropped: list[str] = field(default_factory=list)
    samples_deleted: int = 0
    rollups_deleted: int = 0
    pods_deleted: int = 0


def apply_retention(*, now: datetime | None = None) -> RetentionResult:
    """Drop raw samples older than CPUTUNE_RETENTION_RAW_DAYS (whole partitions on PostgreSQL, bounded deletes elsewhere),
    rollups older than CPUTUNE_RETENTION_ROLLUP_DAYS, and pods not seen for that long. Also makes tomorrow's partition.
    """
    now = now or timezone.now()
    result = RetentionResult()
    raw_cutoff = now - timedelta(days=settings.CPUTUNE_RETENTION_RAW_DAYS)
    if connection.vendor == "postgresql":
        for name, day in list_partitions():
            # A partition holds [day, day + 1): drop it once all of it is past the cutoff.
            if datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=UTC) <= raw_cutoff:
                with connection.cursor() as cursor:
                    cursor.execute(f"DROP TABLE IF EXISTS {name}")
                _known_partitions.discard(day)
                result.partitions_dropped.append(name)
        ensure_partitions([now.date(), (now + timedelta(days=1)).date()])
    else:
        result.samples_deleted = _delete_in_batches(Sample.objects.filter(ts__lt=raw_cutoff), ("container_id", "ts"))
    rollup_cutoff = now - timedelta(days=settings.CPUTUNE_RETENTION_ROLLUP_DAYS)
    result.rollups_deleted = _delete_in_batches(HourlyRollup.objects.filter(hour__lt=rollup_cutoff), ("id",))
    stale = Pod.objects.filter(Q(last_seen__lt=rollup_cutoff) | Q(last_seen__isnull=True))
    result.pods_deleted = _delete_in_batches(stale, ("id",))
    return result


def _delete_in_batches(queryset, key: tuple[str, ...]) -> int:
    """Delete what the queryset matches in batches of DELETE_BATCH rows, so no transaction grows without bound."""
    total = 0
    if key == ("container_id", "ts"):
        # Composite keys: delete up to the ts of the batch's last row (a few more rows when many share that instant).
        while True:
            boundary = list(queryset.order_by("ts").values_list("ts", flat=True)[DELETE_BATCH - 1 : DELETE_BATCH])
            batch = queryset.filter(ts__lte=boundary[0]) if boundary else queryset
            deleted, _ = batch.delete()
            total += deleted
            if not boundary:
                return total
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:DELETE_BATCH])
        if not ids:
            return total
        queryset.model.objects.filter(pk__in=ids).delete()
        total += len(ids)


# The same rollup as _rollup's loop, computed where the rows are. percentile_disc is the nearest rank (the first value
# whose cumulative fraction reaches q), as _nearest_rank. At 1,000 nodes an hour holds 3.6 million samples: read into
# Python they took ~15 s and over a gigabyte in the worker on every findings refresh.
_ROLLUP = """
INSERT INTO telemetry_hourlyrollup (container_id, hour, samples, covered_seconds, periods, throttled_periods,
    throttled_seconds, usage_seconds, usage_p95_mcpu, usage_max_mcpu, threads_max)
SELECT container_id, date_trunc('hour', ts), count(*),
    coalesce(sum(interval_s) FILTER (WHERE used), 0),
    sum(periods_delta) FILTER (WHERE used),
    sum(throttled_periods_delta) FILTER (WHERE used),
    sum(throttled_seconds_delta) FILTER (WHERE used),
    sum(usage_seconds_delta) FILTER (WHERE used),
    percentile_disc(0.95) WITHIN GROUP (ORDER BY usage_seconds_delta / interval_s * 1000.0) FILTER (WHERE used),
    max(usage_seconds_delta / interval_s * 1000.0) FILTER (WHERE used),
    max(threads)
FROM (
    SELECT *, interval_s IS NOT NULL AND interval_s > 0 AND interval_s <= %(max_gap_s)s AS used
    FROM telemetry_sample WHERE ts >= %(start)s AND ts < %(end)s
) s
GROUP BY container_id, date_trunc('hour', ts)
ON CONFLICT (container_id, hour) DO UPDATE SET samples = excluded.samples,
    covered_seconds = excluded.covered_seconds, periods = excluded.periods,
    throttled_periods = excluded.throttled_periods, throttled_seconds = excluded.throttled_seconds,
    usage_seconds = excluded.usage_seconds, usage_p95_mcpu = excluded.usage_p95_mcpu,
    usage_max_mcpu = excluded.usage_max_mcpu, threads_max = excluded.threads_max
"""


def rollup_hours(*, now: datetime | None = None, hours: int = 2, method: str = "auto") -> int:
    """Recompute the hourly rollups of the last `hours` hours (the current one included) from raw samples.

    Rows are replaced, so running it again, or over a still-open hour, is harmless. Returns rollup rows written.
    Usage per interval in millicores is usage_seconds_delta / interval_s × 1000; intervals over 3 collection
    intervals are gaps and are left out of usage percentiles and covered time. PostgreSQL computes them in one
    statement ("sql"); elsewhere the rows are read and summed here ("python").
    """
    now = now or timezone.now()
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)
    max_gap_s = 3 * settings.CPUTUNE_COLLECT_INTERVAL
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" else "python"
    if method == "sql":
        with transaction.atomic(), connection.cursor() as cursor:
            params: dict[str, datetime | float] = {
                "start": start,
                "end": start + timedelta(hours=hours),
                "max_gap_s": max_gap_s,
            }
            cursor.execute(_ROLLUP, params)
            return max(0, cursor.rowcount)
    qs = (
        Sample.objects.filter(ts__gte=start, ts__lt=start + timedelta(hours=hours))
        .order_by("container_id", "ts")
        .values_list(
            "container_id",
            "ts",
            "interval_s",
            "periods_delta",
            "throttled_periods_delta",
            "throttled_seconds_delta",
            "usage_seconds_delta",
            "threads",
        )
    )
    groups: dict[tuple[int, datetime], list[tuple]] = {}
    for row in qs.iterator(chunk_size=10000):
        hour = row[1].replace(minute=0, second=0, microsecond=0)
        groups.setdefault((row[0], hour), []).append(row)
    rollups = [_rollup(container_id, hour, rows, max_gap_s) for (container_id, hour), rows in groups.items()]
    with transaction.atomic():
        HourlyRollup.objects.bulk_create(
            rollups,
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["container", "hour"],
            update_fields=[
                "samples",
                "covered_seconds",
                "periods",
                "throttled_periods",
                "throttled_seconds",
                "usage_seconds",
                "usage_p95_mcpu",
                "usage_max_mcpu",
                "threads_max",
            ],
        )
    return len(rollups)


def _rollup(container_id: int, hour: datetime, rows: list[tuple], max_gap_s: float) -> HourlyRollup:
    periods = throttled = None
    throttled_s = usage_s = None
    covered = 0.0
    usages: list[float] = []
    threads_max = None
    for _cid, _ts, interval_s, d_periods, d_throttled, d_throttled_s, d_usage_s, threads in rows:
        if threads is not None:
            threads_max = threads if threads_max is None else max(threads_max, threads)
        if interval_s is None or interval_s <= 0 or interval_s > max_gap_s:
            continue
        covered += interval_s
        if d_periods is not None:
            periods = (periods or 0) + d_periods
        if d_throttled is not None:
            throttled = (throttled or 0) + d_throttled
        if d_throttled_s is not None:
            throttled_s = (throttled_s or 0.0) + d_throttled_s
        if d_usage_s is not None:
            usage_s = (usage_s or 0.0) + d_usage_s
            usages.append(d_usage_s / interval_s * 1000.0)
    usages.sort()
    return HourlyRollup(
        container_id=container_id,
        hour=hour,
        samples=len(rows),
        covered_seconds=covered,
        periods=periods,
        throttled_periods=throttled,
        throttled_seconds=throttled_s,
        usage_seconds=usage_s,
        usage_p95_mcpu=_nearest_rank(usages, 0.95),
        usage_max_mcpu=usages[-1] if usages else None,
        threads_max=threads_max,
    )


def _nearest_rank(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def copy_supported() -> bool:
    return connection.vendor == "postgresql"


__all__ = [
    "IngestResult",
    "RetentionResult",
    "apply_retention",
    "copy_supported",
    "ensure_partitions",
    "ingest",
    "ingest_readings",
    "list_partitions",
    "rollup_hours",
    "unstorable",
    "upsert_nodes",
    "upsert_pods",
    "write_samples",
]
