"""Was a change our advice? Each change of CPU limit or request is compared, once, with the plan that stood before it
(docs/domain.md#advice-followed): the same kind of value within one rounding step of the suggestion."""

from __future__ import annotations

from datetime import datetime

from apps.clusters.models import Cluster, ContainerChange

from .changes import advice_worked, effect_of, next_changes
from .facts import Policy
from .models import ChangeAdvice, Finding, Window

# change kind → the recommendation field whose value it sets, and the policy's step for it
_SUGGESTS = {
    ContainerChange.Kind.LIMIT: ("suggested_limit_mcpu", "limit_step_mcpu"),
    ContainerChange.Kind.REQUEST: ("suggested_request_mcpu", "request_step_mcpu"),
}


def followed(change_kind: str, new_value: int | None, plan: list[dict], policy: Policy) -> dict | None:
    """The piece of `plan` (stored recommendation dicts) that the change carried out, or None."""
    if change_kind not in _SUGGESTS or new_value is None:
        return None
    field, step = _SUGGESTS[ContainerChange.Kind(change_kind)]
    for rec in plan:
        value = rec.get(field)
        if value is not None and abs(new_value - value) <= getattr(policy, step):
            return rec
    return None


def note_followed_advice(cluster: Cluster, now: datetime, policy: Policy) -> int:
    """Check the cluster's limit and request changes not checked yet against the 1 h findings that stood before
    them, before a refresh replaces those findings; returns changes checked."""
    changes = list(
        ContainerChange.objects.filter(
            container__pod__cluster=cluster, kind__in=list(_SUGGESTS), advice__isnull=True
        ).only("id", "container_id", "previous_id", "kind", "after", "seen_at")
    )
    if not changes:
        return 0
    sources = {c.previous_id or c.container_id for c in changes}
    stood = {
        f.container_id: f
        for f in Finding.objects.filter(container_id__in=sources, window=Window.HOUR).only(
            "container_id", "computed_at", "recommendations"
        )
    }
    rows = []
    for change in changes:
        finding = stood.get(change.previous_id or change.container_id)
        plan = finding.recommendations if finding is not None and finding.computed_at < change.seen_at else []
        rec = followed(change.kind, int(change.after) if change.after.isdigit() else None, plan, policy)
        field = _SUGGESTS[ContainerChange.Kind(change.kind)][0]
        rows.append(
            ChangeAdvice(
                change=change,
                kind=rec["kind"] if rec else "",
                suggested_mcpu=rec.get(field) if rec else None,
                expected_throttle_ratio_max=rec.get("expected_throttle_ratio_max") if rec else None,
                checked_at=now,
            )
        )
    ChangeAdvice.objects.bulk_create(rows, ignore_conflicts=True)  # two parts of one refresh may check at once
    return len(rows)


def settle_followed_advice(cluster: Cluster, now: datetime) -> int:
    """Give each followed piece of advice whose change has a complete after-window its verdict and whether it worked
    (what the overview counts); returns how many were settled."""
    pending = list(
        ChangeAdvice.objects.filter(change__container__pod__cluster=cluster, verdict="")
        .exclude(kind="")
        .select_related("change__container")
    )
    if not pending:
        return 0
    following = next_changes([a.change for a in pending])
    settled = []
    for advice in pending:
        effect = effect_of(advice.change, now, following.get(advice.change_id))
        if effect.verdict in ("too_early", "no_data"):
            continue
        advice.verdict = effect.verdict
        advice.worked = advice_worked(effect.verdict, effect.after.throttle_ratio, advice.expected_throttle_ratio_max)
        settled.append(advice)
    ChangeAdvice.objects.bulk_update(settled, ["verdict", "worked"])
    return len(settled)
