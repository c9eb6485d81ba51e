"""Writing the inventory: a source's nodes, pods and containers upserted into this app's tables.

Idempotent: an inventory stored twice is stored once. On PostgreSQL the rows go to temporary tables by COPY and
into the real ones in one statement per table; elsewhere through the ORM's bulk operations.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models, transaction
from psycopg.types.json import Jsonb

from apps.db import analyze_tables, copy_rows

from .change_groups import group_changes
from .changes import (
    NEW_PODS_SQL,
    RECORD_CHANGES_SQL,
    new_pod_keys,
    record_changes,
    record_kernel_changes,
    record_rollout_changes,
    stored_kernels,
)
from .columns import column_specs, model_column, note, said, storable
from .info import ContainerInfo, NodeInfo, PodInfo
from .models import Cluster, Container, Node, Pod

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
_NODE_COLUMNS = column_specs(Node, ["name", *_NODE_REPORTED], identity=["name"], rules={"name": "node"})
# What an upsert writes of a pod besides its names and node, and of a container besides its name: one list, which
# the column checks, both upsert paths and their SQL are built from.
_POD_VALUES = (
    "uid",
    "qos_class",
    "workload_kind",
    "workload_name",
    "resize_status",
    "resize_message",
    "request_mcpu",
    "limit_mcpu",
    "init_limit_mcpu",
    "init_unlimited",
)
_POD_INTEGERS = {"request_mcpu", "limit_mcpu", "init_limit_mcpu"}
_POD_BOOLEANS = {"init_unlimited"}  # the others are text
_CONTAINER_VALUES = (
    "container_id",
    "request_mcpu",
    "limit_mcpu",
    "restarts",
    "spec_request_mcpu",
    "spec_limit_mcpu",
    "image",
    "cpu_env",
)
_CONTAINER_TEXT = {"container_id", "image"}  # cpu_env is JSON, the others are integers
_CPU_ENV_AT = _CONTAINER_VALUES.index("cpu_env")
_pod_values = operator.attrgetter(*_POD_VALUES)
_container_attrs = operator.attrgetter(*_CONTAINER_VALUES)


def _container_values(container: ContainerInfo, as_json: Callable[[Any], Any] = dict) -> tuple[Any, ...]:
    """The container's _CONTAINER_VALUES, its (name, value) env pairs as a JSON object (`as_json` wraps the dict)."""
    values = list(_container_attrs(container))
    values[_CPU_ENV_AT] = as_json(dict(values[_CPU_ENV_AT]))
    return tuple(values)


_POD_COLUMNS = column_specs(
    Pod,
    ["namespace", "name", *_POD_VALUES],
    identity=["namespace", "name"],
    rules={"namespace": "namespace", "name": "pod"},
)
_CONTAINER_COLUMNS = column_specs(
    Container, ["name", *_CONTAINER_VALUES], identity=["name"], rules={"name": "container"}
)


# --- nodes -----------------------------------------------------------------------------------------------------------


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
    checked = (storable(n, _NODE_COLUMNS, problems, "node {}", n.name) for n in nodes)
    nodes = list({n.name: n for n in checked if n is not None}.values())
    if not nodes:
        return dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" and len(nodes) > 1 else "orm"
    kernels = stored_kernels(cluster, nodes)  # before they are replaced
    if method == "sql":
        _upsert_nodes_in_sql(cluster, nodes, now)
        record_kernel_changes(cluster, kernels, nodes, now)
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
    record_kernel_changes(cluster, kernels, nodes, now)
    return dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))


_CREATE_NODE_LOAD = """
CREATE TEMP TABLE IF NOT EXISTS node_load (
    name text, capacity_mcpu bigint, allocatable_mcpu bigint, kernel_version text, os_image text,
    container_runtime text, kubelet_version text, cpu_manager_policy text, cfs_slice_us bigint, cpufreq_governor text
) ON COMMIT DELETE ROWS
"""
_NODE_TEXT = frozenset(name for name in _NODE_REPORTED if isinstance(model_column(Node, name), models.CharField))
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


def _upsert_nodes_in_sql(cluster: Cluster, nodes: Sequence[NodeInfo], now: datetime) -> None:
    """PostgreSQL: COPY and one statement (bulk_update's CASE expression per node and column is slow at 1,000 nodes
    a cycle)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CREATE_NODE_LOAD)
        cursor.execute("TRUNCATE node_load")  # ON COMMIT empties it only at the outermost commit
        rows = ((node.name, *(getattr(node, c) for c in _NODE_REPORTED)) for node in nodes)
        copy_rows(cursor, "node_load", ("name", *_NODE_REPORTED), rows)
        cursor.execute(_UPSERT_NODES, {"cluster": cluster.pk, "now": now})


# --- pods and their containers ---------------------------------------------------------------------------------------


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
        new = _upsert_pods_in_sql(cluster, pods, now, node_ids)
    else:
        new = new_pod_keys(cluster, pods)
        # A chunk of pods at a time: model instances for a whole 150,000-pod inventory would take hundreds of MB.
        for start in range(0, len(pods), UPSERT_CHUNK_PODS):
            chunk = pods[start : start + UPSERT_CHUNK_PODS]
            record_changes(cluster, chunk, now, node_ids)  # against the stored rows, before they are replaced
            _upsert_pod_chunk(cluster, chunk, now, node_ids)
    record_rollout_changes(cluster, [p for p in pods if (p.namespace, p.name) in new], now)
    group_changes(cluster, now)
    analyze_tables("clusters_node", "clusters_pod", "clusters_container")
    return len(pods)


UPSERT_CHUNK_PODS = 5000

# PostgreSQL: the inventory goes to temporary tables by COPY and into the real ones in one statement each. The
# ORM's bulk_create with update_conflicts compiles a VALUES list of every pod and container first, which at 1,000
# nodes held back every node read of the cycle (benchmarks/bench_scale.py).
_CREATE_POD_LOAD = f"""
CREATE TEMP TABLE IF NOT EXISTS pod_load (
    namespace text, name text, node_id bigint, {", ".join(f"{c} {'bigint' if c in _POD_INTEGERS else 'boolean' if c in _POD_BOOLEANS else 'text'}" for c in _POD_VALUES)}
) ON COMMIT DELETE ROWS
"""
_CREATE_CONTAINER_LOAD = f"""
CREATE TEMP TABLE IF NOT EXISTS container_load (
    namespace text, pod text, name text,
    {", ".join(f"{c} {'text' if c in _CONTAINER_TEXT else 'jsonb' if c == 'cpu_env' else 'bigint'}" for c in _CONTAINER_VALUES)}
) ON COMMIT DELETE ROWS
"""
# In key order, as every writer of these rows locks them: two writers never wait on each other crosswise. The column
# names come from this module's constants, never from input.
_UPSERT_PODS = f"""
INSERT INTO clusters_pod (cluster_id, namespace, name, node_id, {", ".join(_POD_VALUES)}, last_seen)
SELECT %(cluster)s, namespace, name, node_id, {", ".join(_POD_VALUES)}, %(now)s
FROM pod_load ORDER BY namespace, name
ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET node_id = excluded.node_id,
    {", ".join(f"{c} = excluded.{c}" for c in _POD_VALUES)}, last_seen = excluded.last_seen
"""  # noqa: S608
_UPSERT_CONTAINERS = f"""
INSERT INTO clusters_container (pod_id, name, {", ".join(_CONTAINER_VALUES)}, last_seen)
SELECT p.id, l.name, {", ".join(f"l.{c}" for c in _CONTAINER_VALUES)}, %(now)s
FROM container_load l
JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
ORDER BY p.id, l.name
ON CONFLICT (pod_id, name) DO UPDATE SET
    {", ".join(f"{c} = excluded.{c}" for c in _CONTAINER_VALUES)}, last_seen = excluded.last_seen
"""  # noqa: S608


def _upsert_pods_in_sql(
    cluster: Cluster, pods: Sequence[PodInfo], now: datetime, node_ids: dict[str, int]
) -> set[tuple[str, str]]:
    """Returns the (namespace, name) of the pods no inventory had listed before (change.new_pod_keys' answer, from
    the load table: thousands of names as parameters cost more than the join)."""
    params: dict[str, int | datetime] = {"cluster": cluster.pk, "now": now}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CREATE_POD_LOAD)
        cursor.execute(_CREATE_CONTAINER_LOAD)
        # Emptied here too: ON COMMIT empties them only at the outermost commit, and a caller may upsert twice in one.
        cursor.execute("TRUNCATE pod_load, container_load")
        copy_rows(
            cursor,
            "pod_load",
            ("namespace", "name", "node_id", *_POD_VALUES),
            ((p.namespace, p.name, node_ids.get(p.node), *_pod_values(p)) for p in pods),
        )
        copy_rows(
            cursor,
            "container_load",
            ("namespace", "pod", "name", *_CONTAINER_VALUES),
            ((p.namespace, p.name, c.name, *_container_values(c, Jsonb)) for p in pods for c in p.containers),
        )
        cursor.execute("ANALYZE pod_load, container_load")
        cursor.execute(NEW_PODS_SQL, params)
        new = {(namespace, name) for namespace, name in cursor.fetchall()}
        cursor.execute(RECORD_CHANGES_SQL, params)  # against the stored rows, before they are replaced
        cursor.execute(_UPSERT_PODS, params)
        cursor.execute(_UPSERT_CONTAINERS, params)
    return new


def _upsert_pod_chunk(cluster: Cluster, pods: Sequence[PodInfo], now: datetime, node_ids: dict[str, int]) -> None:
    pod_rows = [
        Pod(
            cluster=cluster,
            namespace=p.namespace,
            name=p.name,
            node_id=node_ids.get(p.node),
            last_seen=now,
            **dict(zip(_POD_VALUES, _pod_values(p), strict=True)),
        )
        for p in pods
    ]
    Pod.objects.bulk_create(
        pod_rows,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=["cluster", "namespace", "name"],
        update_fields=["node", *_POD_VALUES, "last_seen"],
    )
    ids = pod_ids(cluster, [(p.namespace, p.name) for p in pods])
    container_rows = [
        Container(
            pod_id=ids[(p.namespace, p.name)],
            name=c.name,
            last_seen=now,
            **dict(zip(_CONTAINER_VALUES, _container_values(c), strict=True)),
        )
        for p in pods
        for c in p.containers
    ]
    Container.objects.bulk_create(
        container_rows,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=["pod", "name"],
        update_fields=[*_CONTAINER_VALUES, "last_seen"],
    )


def _storable_pods(pods: Sequence[PodInfo], problems: list[str] | None) -> list[PodInfo]:
    """The pods and containers upsert_pods can write (see its docstring), one per name."""
    by_key: dict[tuple[str, str], PodInfo] = {}
    for pod in pods:
        checked = storable(pod, _POD_COLUMNS, problems, "pod {}/{}", pod.namespace, pod.name)
        if checked is None:
            continue
        containers: dict[str, ContainerInfo] = {}
        for container in pod.containers:
            names = (pod.namespace, pod.name, container.name)
            stored = storable(container, _CONTAINER_COLUMNS, problems, "pod {}/{} container {}", *names)
            if stored is not None:
                if stored.name in containers:
                    note(problems, said("pod {}/{} container {} is listed twice; the last one kept", *names))
                containers[stored.name] = stored
        kept = tuple(containers.values())
        if kept != pod.containers:
            checked = dataclasses.replace(checked, containers=kept)
        if (checked.namespace, checked.name) in by_key:
            note(problems, said("pod {}/{} is listed twice; the last one kept", pod.namespace, pod.name))
        by_key[(checked.namespace, checked.name)] = checked
    return list(by_key.values())


def pod_ids(cluster: Cluster, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(namespace, name) → id of the cluster's stored pods among `keys`."""
    keys = set(keys)
    names = {name for _, name in keys}
    rows = Pod.objects.filter(cluster=cluster, name__in=names).values_list("namespace", "name", "id")
    return {(ns, name): pk for ns, name, pk in rows if (ns, name) in keys}
