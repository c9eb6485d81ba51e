"""Changes the inventory sees on stored containers (ContainerChange): noticed by comparing an inventory with what is
stored, just before it is stored, on both upsert paths (the ORM's in Python, PostgreSQL's in one statement over the
load tables). The rules are one list, `CHANGE_RULES`, that both follow:

- limit, request: the applied value differs (None ↔ a value counts: a limit set or dropped);
- image: both known and different;
- env: the CPU env vars the spec sets (GOMAXPROCS and the like, apps/clusters/info.py) differ, set ↔ unset too;
- restart: the restart count went up;
- node: both nodes known and different (the pod was replaced on another node under the same name).

A node that reports another kernel than the stored one gives a `kernel` change on each container it runs
(`record_kernel_changes`). A rollout gives new pods, not changed ones: a new pod of a workload is compared with the
workload's earlier pods (`record_rollout_changes`, the same limit, request and image rules), and a new pod like the
rollout's others while it goes on is one more pod of it. A thread count's new level is found by the refresh in the
series (`record_thread_changes`). Each write ends by grouping what it recorded (change_groups.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.conf import settings

from .change_groups import TEMPLATE_KINDS, group_changes, group_series_changes, open_rollouts
from .info import ContainerInfo, NodeInfo, PodInfo
from .models import Cluster, Container, ContainerChange, Node, Pod

Kind = ContainerChange.Kind
# A pod the readings named before any inventory listed it is stored bare (telemetry's ingest): no QoS class, which
# every inventory gives. Its values are not known yet, so its first listing is its first sight, not a change.
UNLISTED = ""

# A container's CPU env vars in a change's words, in SQL and in Python alike: "GOMAXPROCS=2; UV_THREADPOOL_SIZE=8",
# by name in byte order, cut to the column's length.
ENV_TEXT_CHARS = 500
_ENV_TEXT_SQL = (
    "COALESCE(LEFT((SELECT string_agg(e.key || '=' || e.value, '; ' ORDER BY e.key COLLATE \"C\") "
    "FROM jsonb_each_text({env}) e), " + str(ENV_TEXT_CHARS) + "), '')"
)


def env_text(env: Iterable[tuple[str, str]]) -> str:
    return "; ".join(f"{key}={value}" for key, value in sorted(env))[:ENV_TEXT_CHARS]


def env_of_text(text: str) -> dict[str, str]:
    """env_text read back (a value holding "; " reads short: the words are for people first)."""
    return dict(part.partition("=")[::2] for part in text.split("; ") if "=" in part)


# kind → SQL (over stored c, nb and incoming l, na) giving (before, after, changed); the Python twin is _changes().
# Before and after are worked out only where changed: every container of every inventory passes through here.
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
    Kind.ENV: (
        _ENV_TEXT_SQL.format(env="c.cpu_env"),
        _ENV_TEXT_SQL.format(env="l.cpu_env"),
        "COALESCE(c.cpu_env, '{}') <> COALESCE(l.cpu_env, '{}')",
    ),
    Kind.RESTART: ("c.restarts::text", "l.restarts::text", "l.restarts > c.restarts"),
    Kind.NODE: ("nb.name", "na.name", "nb.id IS NOT NULL AND na.id IS NOT NULL AND nb.id <> na.id"),
}

_JOINS = """
FROM container_load l
JOIN pod_load pl ON pl.namespace = l.namespace AND pl.name = l.pod
JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = l.namespace AND p.name = l.pod
JOIN clusters_container c ON c.pod_id = p.id AND c.name = l.name
LEFT JOIN clusters_node nb ON nb.id = p.node_id
LEFT JOIN clusters_node na ON na.id = pl.node_id
"""
# The rows that changed at all are found first (one test per container); only theirs are spread over the kinds.
RECORD_CHANGES_SQL = f"""
INSERT INTO clusters_containerchange (container_id, seen_at, since, kind, before, after)
SELECT x.id, %(now)s, x.last_seen, k.kind, k.before, k.after
FROM (
    SELECT c.id, p.last_seen, {", ".join(f"{changed} AS changed_{kind}, CASE WHEN {changed} THEN {b} END AS before_{kind}, CASE WHEN {changed} THEN {a} END AS after_{kind}" for kind, (b, a, changed) in CHANGE_RULES.items())}
    {_JOINS}
    WHERE p.qos_class <> '{UNLISTED}' AND ({" OR ".join(f"({changed})" for _, _, changed in CHANGE_RULES.values())})
) x
CROSS JOIN LATERAL (VALUES {", ".join(f"('{kind}', x.before_{kind}, x.after_{kind}, x.changed_{kind})" for kind in CHANGE_RULES)})
    AS k(kind, before, after, changed)
WHERE k.changed
ORDER BY x.id, k.kind
ON CONFLICT DO NOTHING
"""  # noqa: S608 — the SQL comes from this module's constants, never from input

# The pods of the load table that no inventory listed before: not stored, or stored bare from readings.
NEW_PODS_SQL = f"""
SELECT pl.namespace, pl.name FROM pod_load pl
LEFT JOIN clusters_pod p ON p.cluster_id = %(cluster)s AND p.namespace = pl.namespace AND p.name = pl.name
WHERE p.id IS NULL OR p.qos_class = '{UNLISTED}'
"""  # noqa: S608 — module constants only


def _text(value: int | str | None) -> str:
    return "" if value is None else str(value)


# id, request, limit, image, CPU env, restarts, node, when the pod was seen before
_Stored = tuple[int, int | None, int | None, str, dict, int, str | None, datetime | None]


def _changes(stored: _Stored, incoming_container: ContainerInfo, incoming_node: str) -> Iterable[tuple[str, str, str]]:
    _, request, limit, image, env, restarts, node, _ = stored
    if limit != incoming_container.limit_mcpu:
        yield Kind.LIMIT, _text(limit), _text(incoming_container.limit_mcpu)
    if request != incoming_container.request_mcpu:
        yield Kind.REQUEST, _text(request), _text(incoming_container.request_mcpu)
    if image and incoming_container.image and image != incoming_container.image:
        yield Kind.IMAGE, image, incoming_container.image
    if dict(env or {}) != dict(incoming_container.cpu_env):
        yield Kind.ENV, env_text((env or {}).items()), env_text(incoming_container.cpu_env)
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
    ).exclude(pod__qos_class=UNLISTED).values_list("pod__namespace", "pod__name", "name", "id", "request_mcpu", "limit_mcpu", "image", "cpu_env",
                  "restarts", "pod__node__name", "pod__last_seen")  # fmt: skip
    stored: dict[tuple[str, str, str], _Stored] = {
        (ns, pod, name): (cid, request, limit, image, env, restarts, node, seen)
        for ns, pod, name, cid, request, limit, image, env, restarts, node, seen in rows
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
                    ContainerChange(
                        container_id=values[0], seen_at=now, since=values[7], kind=kind, before=before, after=after
                    )
                )
    ContainerChange.objects.bulk_create(changes, batch_size=2000, ignore_conflicts=True)
    return len(changes)


NAMES_PER_QUERY = 5000


def new_pod_keys(cluster: Cluster, pods: Sequence[PodInfo]) -> set[tuple[str, str]]:
    """The (namespace, name) of the pods among `pods` that no inventory listed yet (asked before they are upserted):
    not stored, or stored bare from readings."""
    keys = {(p.namespace, p.name) for p in pods}
    names = sorted({name for _, name in keys})
    stored: set[tuple[str, str]] = set()
    for start in range(0, len(names), NAMES_PER_QUERY):  # SQLite takes at most 32,766 parameters a statement
        chunk = names[start : start + NAMES_PER_QUERY]
        listed = Pod.objects.filter(cluster=cluster, name__in=chunk).exclude(qos_class=UNLISTED)
        stored.update(listed.values_list("namespace", "name"))
    return keys - stored


def record_rollout_changes(cluster: Cluster, new_pods: Sequence[PodInfo], now: datetime) -> int:
    """New pods of a workload whose earlier pods ran a container of the same name with another applied limit or
    request, another image or other CPU env vars: the workload's template changed. Each is recorded on the new container, `previous`
    being the earlier pod's container seen last. A new pod like its earlier pods while the workload's rollout goes on
    (change_groups.open_rollouts), with that rollout's values, is one more pod of it: it gets the rollout's changes.
    Called after the upsert (the new containers have ids); returns changes recorded."""
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
        .values_list("id", "name", "request_mcpu", "limit_mcpu", "image", "cpu_env", "pod__namespace", "pod__name",
                     "pod__workload_kind", "pod__workload_name")
    )  # fmt: skip
    earlier: dict[tuple[str, str, str, str], tuple[int, int | None, int | None, str, dict]] = {}
    created: dict[tuple[str, str, str], int] = {}
    for row_id, name, request, limit, image, env, ns, pod_name, kind, workload in rows:
        if (ns, pod_name) in new_keys:
            created[(ns, pod_name, name)] = row_id
        elif (ns, kind, workload) in workloads:
            earlier[(ns, kind, workload, name)] = (row_id, request, limit, image, env)  # the one seen last wins
    changes: list[ContainerChange] = []
    alike: list[tuple[int, ContainerInfo, tuple[str, str, str, str]]] = []  # new containers like the earlier ones
    for new_pod in new_pods:
        for container in new_pod.containers:
            key = (new_pod.namespace, new_pod.workload_kind, new_pod.workload_name, container.name)
            before = earlier.get(key)
            cid = created.get((new_pod.namespace, new_pod.name, container.name))
            if before is None or cid is None:
                continue
            previous, request, limit, image, env = before
            stored: _Stored = (previous, request, limit, image, env, container.restarts, None, None)
            found = [
                ContainerChange(container_id=cid, previous_id=previous, seen_at=now, kind=kind, before=old, after=new)
                for kind, old, new in _changes(stored, container, "")
            ]
            changes += found
            if not found:
                alike.append((cid, container, key))
    changes += _rollout_members(cluster, alike, now)
    ContainerChange.objects.bulk_create(changes, batch_size=2000, ignore_conflicts=True)
    return len(changes)


def _rollout_members(
    cluster: Cluster, alike: list[tuple[int, ContainerInfo, tuple[str, str, str, str]]], now: datetime
) -> list[ContainerChange]:
    """The rollout's changes on each new container that runs what a rollout going on put in place."""
    rollouts = open_rollouts(cluster, {key for _, _, key in alike}, now)
    members = []
    for cid, container, key in alike:
        rollout = rollouts.get(key)
        if rollout is None:
            continue
        values = {
            Kind.LIMIT: _text(container.limit_mcpu),
            Kind.REQUEST: _text(container.request_mcpu),
            Kind.IMAGE: container.image or "",
            Kind.ENV: env_text(container.cpu_env),
        }
        if all(kind in TEMPLATE_KINDS and values[Kind(kind)] == after for kind, _, after in rollout.transitions):
            members += [
                ContainerChange(
                    container_id=cid, previous_id=rollout.previous_id, seen_at=now, kind=kind, before=old, after=new
                )
                for kind, old, new in rollout.transitions
            ]
    return members


_StoredNode = tuple[int, str, datetime | None]  # id, kernel version, when the node was seen before


def stored_kernels(cluster: Cluster, nodes: Sequence[NodeInfo]) -> dict[str, _StoredNode]:
    """name → (id, kernel version, last seen) of the stored nodes among `nodes` that report a kernel (asked before the
    upsert)."""
    names = [n.name for n in nodes if n.kernel_version]
    if not names:
        return {}
    rows = Node.objects.filter(cluster=cluster, name__in=names).exclude(kernel_version="")
    return {
        name: (pk, kernel, seen)
        for name, pk, kernel, seen in rows.values_list("name", "id", "kernel_version", "last_seen")
    }


def record_kernel_changes(
    cluster: Cluster, stored: dict[str, _StoredNode], nodes: Sequence[NodeInfo], now: datetime
) -> int:
    """A node that reports another kernel than the stored one: a `kernel` change on every container it runs (each
    one's effect is its own). Returns changes recorded."""
    changed = {
        stored[n.name][0]: (stored[n.name][1], n.kernel_version, stored[n.name][2])
        for n in nodes
        if n.kernel_version and n.name in stored and stored[n.name][1] != n.kernel_version
    }
    if not changed:
        return 0
    # The containers the node ran when it was seen before (not those of pods gone long ago, kept for their series).
    rows = []
    for cid, node, pod_seen in Container.objects.filter(pod__node_id__in=list(changed)).values_list(
        "id", "pod__node_id", "pod__last_seen"
    ):
        node_seen = changed[node][2]
        if node_seen is None or (pod_seen is not None and pod_seen >= node_seen):
            rows.append((cid, node))
    changes = [
        ContainerChange(
            container_id=cid,
            seen_at=now,
            since=changed[node][2],
            kind=Kind.KERNEL,
            before=changed[node][0],
            after=changed[node][1],
        )
        for cid, node in rows
    ]
    ContainerChange.objects.bulk_create(changes, batch_size=2000, ignore_conflicts=True)
    group_changes(cluster, now)
    return len(changes)


def record_thread_changes(found: Sequence[tuple[int, datetime, datetime, int, int]]) -> set[int]:
    """Thread counts settled at a new level, as the refresh found them in the series: (container id, since, seen
    at, before, after) each, the instant being the first sample at the new level and `since` the sample before.
    A level recorded already is not recorded again. Returns the groups of the changes recorded."""
    if not found:
        return set()
    ContainerChange.objects.bulk_create(
        [
            ContainerChange(
                container_id=cid, since=since, seen_at=at, kind=Kind.THREADS, before=str(old), after=str(new)
            )
            for cid, since, at, old, new in found
        ],
        ignore_conflicts=True,
    )
    fresh = list(
        ContainerChange.objects.filter(
            container_id__in={cid for cid, *_ in found}, kind=Kind.THREADS, group__isnull=True
        ).values_list("id", flat=True)
    )
    return group_series_changes(fresh, timedelta(seconds=settings.CPUTUNE_COLLECT_INTERVAL))
