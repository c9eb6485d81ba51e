"""Changes that are one act of an operator form one group (docs/domain.md#change-groups), which the pages, the API and
the chat show as one change with one effect:

- what one container's inventory shows at once: a resize of limit and request, a new image with its restart, a
  node's new kernel with the restart its reboot caused;
- the pods of one workload that change their template values (limit, request, image, CPU env vars) the same way, each within
  ROLLOUT_GAP of the one before: a rollout, whether its pods are new (a Deployment's ReplicaSet) or keep their names
  (a StatefulSet), seen over one collection or many;
- the containers of one workload whose other changes are the same at one instant (a node's new kernel on two
  replicas it runs).

The change that stands for a group is the first seen, of the first kind in KIND_ORDER; its `group` is itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F

from .models import Cluster, ContainerChange

Kind = ContainerChange.Kind
TEMPLATE_KINDS = (Kind.LIMIT, Kind.REQUEST, Kind.IMAGE, Kind.ENV)  # what a workload's pod template sets
KIND_ORDER = (Kind.LIMIT, Kind.REQUEST, Kind.IMAGE, Kind.ENV, Kind.THREADS, Kind.RESTART, Kind.NODE, Kind.KERNEL)
# A workload's pods changing the same way belong to one rollout while each comes within this of the one before: a
# rolling update replaces pods one readiness check at a time, a DaemonSet's node by node.
ROLLOUT_GAP = timedelta(minutes=15)

Transition = tuple[str, str, str]  # kind, before, after
WorkloadContainer = tuple[str, str, str, str]  # namespace, workload kind, workload name (or the pod's), container


@dataclass(frozen=True, slots=True)
class Rollout:
    """A workload's latest template change still going on: its group, its transitions, and the earlier container
    its first pod was compared with."""

    group_id: int
    transitions: tuple[Transition, ...]
    previous_id: int | None


def transitions(changes: Iterable[tuple[str, str, str]]) -> tuple[Transition, ...]:
    """(kind, before, after) of `changes`, in KIND_ORDER: what makes two containers' changes the same."""
    return tuple(sorted(changes, key=lambda t: (KIND_ORDER.index(Kind(t[0])), t[1], t[2])))


def open_rollouts(
    cluster: Cluster, keys: Iterable[WorkloadContainer], at: datetime
) -> dict[WorkloadContainer, Rollout]:
    """For each (namespace, workload kind, workload name, container) among `keys`: its latest template change group,
    when a change of it was seen within ROLLOUT_GAP before `at`."""
    keys = set(keys)
    if not keys:
        return {}
    recent = (
        ContainerChange.objects.filter(
            container__pod__cluster=cluster,
            container__pod__namespace__in={k[0] for k in keys},
            container__pod__workload_name__in={k[2] for k in keys},
            kind__in=TEMPLATE_KINDS,
            seen_at__gte=at - ROLLOUT_GAP,
            seen_at__lt=at,
            group__isnull=False,
        )
        .order_by("seen_at", "id")
        .values_list("group_id", "container__pod__namespace", "container__pod__workload_kind",
                     "container__pod__workload_name", "container__name")
    )  # fmt: skip
    latest: dict[WorkloadContainer, int] = {}
    for group_id, *key in recent:
        if tuple(key) in keys:
            latest[tuple(key)] = group_id  # type: ignore[index]  # the one seen last wins
    if not latest:
        return {}
    rows = ContainerChange.objects.filter(group_id__in=set(latest.values()), kind__in=TEMPLATE_KINDS)
    by_group: dict[int, set[Transition]] = defaultdict(set)
    previous: dict[int, int | None] = {}
    for group_id, change_id, kind, before, after, previous_id in rows.values_list(
        "group_id", "id", "kind", "before", "after", "previous_id"
    ):
        by_group[group_id].add((kind, before, after))
        if change_id == group_id:
            previous[group_id] = previous_id
    return {
        key: Rollout(group_id, transitions(by_group[group_id]), previous.get(group_id))
        for key, group_id in latest.items()
    }


def _workload_key(
    namespace: str, workload_kind: str, workload_name: str, pod: str, container: str
) -> WorkloadContainer:
    # A pod of no workload is its own: its changes group with no other pod's.
    return (namespace, workload_kind, workload_name, container) if workload_name else (namespace, "Pod", pod, container)


def group_changes(cluster: Cluster, seen_at: datetime) -> int:
    """Give each of the cluster's changes seen at `seen_at` (or before, left ungrouped by a write that failed half-way)
    its group: a group already standing at that instant on the same container, a rollout going on, another
    container's group of this instant, or a new group of its own. Returns the groups created."""
    rows = (
        ContainerChange.objects.filter(container__pod__cluster=cluster, seen_at__lte=seen_at, group__isnull=True)
        .order_by("seen_at", "container_id", "id")
        .values_list("seen_at", "id", "container_id", "kind", "before", "after", "container__pod__namespace",
                     "container__pod__workload_kind", "container__pod__workload_name", "container__pod__name",
                     "container__name")
    )  # fmt: skip
    by_instant: dict[datetime, list[tuple]] = defaultdict(list)
    for instant, *row in rows:
        by_instant[instant].append(tuple(row))
    return sum(_group_instant(cluster, instant, changes) for instant, changes in by_instant.items())


def _group_instant(cluster: Cluster, seen_at: datetime, rows: list[tuple]) -> int:
    by_container: dict[int, list[tuple]] = defaultdict(list)
    keys: dict[int, WorkloadContainer] = {}
    for row in rows:
        by_container[row[1]].append(row)
        keys[row[1]] = _workload_key(*row[5:])
    standing = dict(
        ContainerChange.objects.filter(container_id__in=list(by_container), seen_at=seen_at, group__isnull=False)
        .values_list("container_id", "group_id")
    )  # fmt: skip
    rollouts = open_rollouts(
        cluster,
        {keys[cid] for cid, changes in by_container.items() if any(c[2] in TEMPLATE_KINDS for c in changes)},
        seen_at,
    )
    created: dict[tuple, int] = {}  # (workload container, transitions) → the group made in this pass
    members: dict[int, list[int]] = defaultdict(list)
    for cid, changes in by_container.items():
        ids = [c[0] for c in changes]
        if cid in standing:
            members[standing[cid]] += ids
            continue
        template = transitions(c[2:5] for c in changes if c[2] in TEMPLATE_KINDS)
        same = (keys[cid], template or transitions(c[2:5] for c in changes))
        group = created.get(same)
        if group is None and template:
            rollout = rollouts.get(keys[cid])
            if rollout is not None and rollout.transitions == template:
                group = rollout.group_id
        if group is None:
            group = min(changes, key=lambda c: KIND_ORDER.index(Kind(c[2])))[0]
            created[same] = group
        members[group] += ids
    _assign(members)
    return len(created)


def _assign(members: dict[int, list[int]]) -> None:
    alone = [ids[0] for group, ids in members.items() if ids == [group]]
    ContainerChange.objects.filter(pk__in=alone).update(group_id=F("id"))
    for group, ids in members.items():
        if ids != [group]:
            ContainerChange.objects.filter(pk__in=ids).update(group_id=group)


def group_alone(change_ids: Sequence[int]) -> None:
    """Changes that stand for themselves."""
    ContainerChange.objects.filter(pk__in=list(change_ids), group__isnull=True).update(group_id=F("id"))


def group_series_changes(change_ids: Sequence[int], gap: timedelta) -> set[int]:
    """Changes found in a series (a thread count's new level, between two samples): each joins the group of another
    change of its container that may have happened in the same interval — the restart that brought the new count
    up, say — and otherwise stands for itself. `gap`: how long before its `seen_at` a change without `since` may
    have happened. Returns the groups they are in now."""
    fresh = list(ContainerChange.objects.filter(pk__in=list(change_ids), group__isnull=True))
    if not fresh:
        return set()
    others = defaultdict(list)
    for other in ContainerChange.objects.filter(
        container_id__in={c.container_id for c in fresh},
        group__isnull=False,
        seen_at__gte=min(c.since or c.seen_at - gap for c in fresh),
        seen_at__lte=max(c.seen_at for c in fresh) + gap,
    ).only("container_id", "group_id", "seen_at", "since"):
        others[other.container_id].append(other)
    alone: list[int] = []
    joined: set[int] = set()
    for change in fresh:
        start = change.since or change.seen_at - gap
        overlapping = [
            o
            for o in others[change.container_id]
            if (o.since or o.seen_at - gap) < change.seen_at and start < o.seen_at
        ]
        if overlapping:
            group = min(overlapping, key=lambda o: o.seen_at).group_id
            assert group is not None  # `others` are grouped changes only
            change.group_id = group
            change.save(update_fields=["group"])
            joined.add(group)
        else:
            alone.append(change.pk)
    group_alone(alone)
    return joined | set(alone)  # a change standing for itself is its own group
