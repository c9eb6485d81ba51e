"""Was a change our advice? Each change of CPU limit, request or thread count is compared, once, with the plan that
stood before it (docs/domain.md#advice-followed): the same kind of value within one rounding step of the suggestion;
for threads, which no advice gives a count of, cut_threads for fewer and add_threads for more, and likewise for a
runtime's parallelism knob in the CPU env vars (GOMAXPROCS lowered: cut_threads)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from apps.clusters.changes import env_of_text
from apps.clusters.models import Cluster, ContainerChange

from .changes import advice_worked, effect_of, groups_of, neighbour_changes, window_length
from .facts import Policy
from .models import ChangeAdvice, Finding, Window
from .runtimes import parallelism_knob

# change kind → the recommendation field whose value it sets, and the policy's step for it
_SUGGESTS = {
    ContainerChange.Kind.LIMIT: ("suggested_limit_mcpu", "limit_step_mcpu"),
    ContainerChange.Kind.REQUEST: ("suggested_request_mcpu", "request_step_mcpu"),
}


_THREADS = {True: "cut_threads", False: "add_threads"}  # fewer threads → cut_threads


def followed(change_kind: str, before: str, after: str, plan: list[dict], policy: Policy) -> dict | None:
    """The piece of `plan` (stored recommendation dicts) that the change from `before` to `after` carried out, or
    None."""
    if change_kind == ContainerChange.Kind.THREADS:
        if not (before.isdigit() and after.isdigit()) or before == after:
            return None
        wanted = {_THREADS[int(after) < int(before)]}
        return next((rec for rec in plan if rec.get("kind") in wanted), None)
    if change_kind == ContainerChange.Kind.ENV:
        # A runtime's parallelism knob set, lowered or raised: what cut_threads and add_threads ask for.
        old, new = parallelism_knob(env_of_text(before)), parallelism_knob(env_of_text(after))
        if new is None or new == old:
            return None
        wanted = {_THREADS[True], _THREADS[False]} if old is None else {_THREADS[new < old]}
        return next((rec for rec in plan if rec.get("kind") in wanted), None)
    if change_kind not in _SUGGESTS or not after.isdigit():
        return None
    field, step = _SUGGESTS[ContainerChange.Kind(change_kind)]
    for rec in plan:
        value = rec.get(field)
        if value is not None and abs(int(after) - value) <= getattr(policy, step):
            return rec
    return None


_CHECKED = (*_SUGGESTS, ContainerChange.Kind.THREADS, ContainerChange.Kind.ENV)
CHECK_HORIZON = timedelta(hours=1)


def note_followed_advice(
    cluster: Cluster, now: datetime, policy: Policy, group_ids: Iterable[int] | None = None
) -> int:
    """Check the cluster's changes of limit, request or threads not checked yet (each group once, with every value
    its lead container changed in it; only these groups when `group_ids` is given) against the 1 h findings that
    stood before them, before a refresh replaces those findings; returns changes checked."""
    # A change is checked by the first refresh after it was seen (a thread count, by the one that finds it, within
    # the hour of samples it reads): older ones missed the plan that stood before them for good.
    # The hour's changes of those kinds by time (its index), then their groups not checked yet.
    recent = ContainerChange.objects.filter(seen_at__gte=now - CHECK_HORIZON, kind__in=_CHECKED, group__isnull=False)
    if group_ids is not None:
        recent = recent.filter(group_id__in=list(group_ids))
    groups = set(
        recent.filter(container__pod__cluster=cluster, group__advice__isnull=True).values_list("group_id", flat=True)
    )
    if not groups:
        return 0
    leads = list(
        ContainerChange.objects.filter(pk__in=groups).only(
            "id", "container_id", "previous_id", "kind", "before", "after", "seen_at"
        )
    )
    sources = {c.previous_id or c.container_id for c in leads}
    stood = {
        f.container_id: f
        for f in Finding.objects.filter(container_id__in=sources, window=Window.HOUR).only(
            "container_id", "computed_at", "recommendations"
        )
    }
    rows = []
    for group in groups_of(leads):
        change = group.lead
        finding = stood.get(change.previous_id or change.container_id)
        plan = finding.recommendations if finding is not None and finding.computed_at < change.seen_at else []
        rec, field = None, ""
        for candidate in (change, *group.also_changed):
            rec = followed(candidate.kind, candidate.before, candidate.after, plan, policy)
            if rec is not None:
                field = _SUGGESTS[ContainerChange.Kind(candidate.kind)][0] if candidate.kind in _SUGGESTS else ""
                break
        rows.append(
            ChangeAdvice(
                change=change,
                kind=rec["kind"] if rec else "",
                suggested_mcpu=rec.get(field) if rec and field else None,
                expected_throttle_ratio_max=rec.get("expected_throttle_ratio_max") if rec else None,
                checked_at=now,
            )
        )
    ChangeAdvice.objects.bulk_create(rows, ignore_conflicts=True)  # two parts of one refresh may check at once
    return len(rows)


def settle_followed_advice(cluster: Cluster, now: datetime) -> int:
    """Give each followed piece of advice whose change's after-window is complete its verdict and whether it worked
    (what the overview counts; a window that ended without the figures to judge settles as such); returns how many
    were settled. Only those windows are read: the others are pending until theirs end."""
    pending = list(
        ChangeAdvice.objects.filter(change__container__pod__cluster=cluster, verdict="")
        .exclude(kind="")
        .select_related("change__container")
    )
    if not pending:
        return 0
    groups = groups_of(a.change for a in pending)
    neighbours = neighbour_changes(groups)
    settled = []
    for advice, group in zip(pending, groups, strict=True):
        bounds = neighbours[advice.change_id]
        if group.until + window_length(group, bounds) > now:
            continue
        effect = effect_of(group, now, bounds)
        advice.verdict = effect.verdict
        advice.worked = advice_worked(effect.verdict, effect.after.throttle_ratio, advice.expected_throttle_ratio_max)
        settled.append(advice)
    ChangeAdvice.objects.bulk_update(settled, ["verdict", "worked"])
    return len(settled)
