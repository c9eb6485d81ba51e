"""Changes the inventory sees on stored containers (ContainerChange): noticed by comparing an inventory with what is
stored, just before it is stored, on both upsert paths (the ORM's in Python, PostgreSQL's in one statement over the
load tables). The rules are one list, `CHANGE_RULES`, that both follow:

- limit, request: the applied value differs (None ↔ a value counts: a limit set or dropped);
- image: both known and different;
- restart: the restart count went up;
- node: both nodes known and different (the pod was replaced on another node under the same name).

A node that reports another kernel than the stored one gives a `kernel` change on each container it runs
(`record_kernel_changes`). A rollout gives new pods, not changed ones: a new pod of a workload is compared with the workload's earlier pods
(`record_rollout_changes`, the same limit, request and image rules).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from .info import ContainerInfo, NodeInfo, PodInfo
from .models import Cluster, Container, ContainerChange, Node, Pod

Kind = ContainerChange.Kind

# kind → SQL (over stored c, nb and incoming l, na) giving (before, after, changed); the Python twin is _changes().
CHANGE_RULES = {
    Kind.LIMIT: (
        "COALESCE(c.limit_mcpu::text, '')",
        "COALESCE(l.limit_mcpu::text, '')",
        "c.limit_mcpu IS DISTINCT FROM l.limit_mcpu",
    ),
    Kind.REQUEST: (
        "COALESCE(c.request_mcpu::text, '')",
        "COALESCE(l.request_mcpu::text, '')",
        "c.request_mcpu IS DISTINCT FROM l.request_mcpu",
    ),
    Kind.IMAGE: ("c.image", "COALESCE(l.image, '')", "c.image <> '' AND l.image <> '' AND c.image <> l.image"),
    Kind.RESTART: ("c.restarts::text", "l.restarts::text", "l.restarts > c.restarts"),
    Kind.NODE: ("nb.name", "na.name", "nb.id IS NOT NULL AND na.id IS NOT NULL AND nb.id <> na.id"),
}

RECORD_CHANGES_SQL = f"""
INSERT INTO clusters_containerchange (container_id, seen_at, kind, before, after)
SELECT c.id, %(now)s, k.kind, k.before, k.after
FROM container_load l
JOIN pod_load pl ON pl.namespace = l.namespace AND pl.name = l.pod
JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
JOIN clusters_container c ON c.pod_id = p.id AND c.name = l.name
LEFT JOIN clusters_node nb ON nb.id = p.node_id
LEFT JOIN clusters_node na ON na.id = pl.node_id
CROSS JOIN LATERAL (VALUES {", ".join(f"('{kind}', {b}, {a}, {changed})" for kind, (b, a, changed) in CHANGE_RULES.items())})
    AS k(kind, before, after, changed)
WHERE k.changed
ORDER BY c.id, k.kind
"""  # noqa: S608 — the SQL comes from this module's constants, never from input


def _text(value: int | str | None) -> str:
    return "" if value is None else str(value)


_Stored = tuple[int, int | None, int | None, str, int, str | None]  # id, request, limit, image, restarts, node


def _changes(stored: _Stored, incoming_container: ContainerInfo, incoming_node: str) -> Iterable[tuple[str, str, str]]:
    _, request, limit, image, restarts, node = stored
    if limit != incoming_container.limit_mcpu:
        yield Kind.LIMIT, _text(limit), _text(incoming_container.limit_mcpu)
    if request != incoming_container.request_mcpu:
        yield Kind.REQUEST, _text(request), _text(incoming_container.request_mcpu)
    if image and incoming_container.image and image != incoming_container.image:
        yield Kind.IMAGE, image, incoming_container.image
    if incoming_container.restarts > restarts:
        yield Kind.RESTART, str(restarts), str(incoming_container.restarts)
    if node and incoming_node and node != incoming_node:
        yield Kind.NODE, node, incoming_node


def record_changes(cluster: Cluster, pods: Sequence[PodInfo], now: datetime, known_nodes: Iterable[str]) -> int:
    """The ORM path: compare `pods` with their stored containers and record what changed; returns changes recorded.
    `known_nodes`: the node names the inventory stores (a pod on an unknown node has no node to compare)."""
    known = set(known_nodes)
    by_key = {(p.namespace, p.name): p for p in pods}
    rows = Container.objects.filter(
        pod__cluster=cluster, pod__name__in={name for _, name in by_key}
    ).values_list("pod__namespace", "pod__name", "name", "id", "request_mcpu", "limit_mcpu", "image", "restarts",
                  "pod__node__name")  # fmt: skip
    stored: dict[tuple[str, str, str], _Stored] = {
        (ns, pod, name): (cid, request, limit, image, restarts, node)
        for ns, pod, name, cid, request, limit, image, restarts, node in rows
    }
    changes = []
    for key, pod in by_key.items():
        node = pod.node if pod.node in known else ""
        for container in pod.containers:
            values = stored.get((*key, container.name))
            if values is None:
                continue
            for kind, before, after in _changes(values, container, node):
                changes.append(
                    ContainerChange(container_id=values[0], seen_at=now, kind=kind, before=before, after=after)
                )
    ContainerChange.objects.bulk_create(changes, batch_size=2000)
    return len(changes)


NAMES_PER_QUERY = 5000


def new_pod_keys(cluster: Cluster, pods: Sequence[PodInfo]) -> set[tuple[str, str]]:
    """The (namespace, name) of the pods among `pods` that are not stored yet (asked before they are upserted)."""
    keys = {(p.namespace, p.name) for p in pods}
    names = sorted({name for _, name in keys})
    stored: set[tuple[str, str]] = set()
    for start in range(0, len(names), NAMES_PER_QUERY):  # SQLite takes at most 32,766 parameters a statement
        chunk = names[start : start + NAMES_PER_QUERY]
        stored.update(Pod.objects.filter(cluster=cluster, name__in=chunk).values_list("namespace", "name"))
    return keys - stored


def record_rollout_changes(cluster: Cluster, new_pods: Sequence[PodInfo], now: datetime) -> int:
    """New pods of a workload whose earlier pods ran a container of the same name with another applied limit or
    request, or another image: the workload's template changed. Each is recorded on the new container, `previous`
    being the earlier pod's container seen last. Called after the upsert (the new containers have ids); returns
    changes recorded."""
    workloads = {
        (p.namespace, p.workload_kind, p.workload_name) for p in new_pods if p.workload_kind and p.workload_name
    }
    if not workloads:
        return 0
    new_keys = {(p.namespace, p.name) for p in new_pods}
    rows = (
        Container.objects.filter(
            pod__cluster=cluster,
            pod__namespace__in={ns for ns, _, _ in workloads},
            pod__workload_name__in={name for _, _, name in workloads},
        )
        .order_by("pod__last_seen", "id")
        .values_list("id", "name", "request_mcpu", "limit_mcpu", "image", "pod__namespace", "pod__name",
                     "pod__workload_kind", "pod__workload_name")
    )  # fmt: skip
    earlier: dict[tuple[str, str, str, str], tuple[int, int | None, int | None, str]] = {}
    created: dict[tuple[str, str, str], int] = {}
    for row_id, name, request, limit, image, ns, pod_name, kind, workload in rows:
        if (ns, pod_name) in new_keys:
            created[(ns, pod_name, name)] = row_id
        elif (ns, kind, workload) in workloads:
            earlier[(ns, kind, workload, name)] = (row_id, request, limit, image)  # the one seen last wins
    changes = []
    for new_pod in new_pods:
        for container in new_pod.containers:
            before = earlier.get((new_pod.namespace, new_pod.workload_kind, new_pod.workload_name, container.name))
            cid = created.get((new_pod.namespace, new_pod.name, container.name))
            if before is None or cid is None:
                continue
            previous, request, limit, image = before
            stored: _Stored = (previous, request, limit, image, container.restarts, None)
            for kind, old, new in _changes(stored, container, ""):
                changes.append(
                    ContainerChange(
                        container_id=cid, previous_id=previous, seen_at=now, kind=kind, before=old, after=new
                    )
                )
    ContainerChange.objects.bulk_create(changes, batch_size=2000)
    return len(changes)


def stored_kernels(cluster: Cluster, nodes: Sequence[NodeInfo]) -> dict[str, tuple[int, str]]:
    """name → (id, kernel version) of the stored nodes among `nodes` that report a kernel (asked before the upsert)."""
    names = [n.name for n in nodes if n.kernel_version]
    if not names:
        return {}
    rows = Node.objects.filter(cluster=cluster, name__in=names).exclude(kernel_version="")
    return {name: (pk, kernel) for name, pk, kernel in rows.values_list("name", "id", "kernel_version")}


def record_kernel_changes(stored: dict[str, tuple[int, str]], nodes: Sequence[NodeInfo], now: datetime) -> int:
    """A node that reports another kernel than the stored one: a `kernel` change on every container it runs (each
    one's effect is its own). Returns changes recorded."""
    changed = {
        stored[n.name][0]: (stored[n.name][1], n.kernel_version)
        for n in nodes
        if n.kernel_version and n.name in stored and stored[n.name][1] != n.kernel_version
    }
    if not changed:
        return 0
    rows = Container.objects.filter(pod__node_id__in=list(changed)).values_list("id", "pod__node_id")
    changes = [
        ContainerChange(
            container_id=cid, seen_at=now, kind=Kind.KERNEL, before=changed[node][0], after=changed[node][1]
        )
        for cid, node in rows
    ]
    ContainerChange.objects.bulk_create(changes, batch_size=2000)
    return len(changes)
