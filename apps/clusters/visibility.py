"""What a viewer may read: every page, API response, CSV, chat summary and /metrics line goes through one of these.

A viewer is a dashboard user (their ReadGrants) or a read token (its user's grants, narrowed by the token's own
cluster and namespaces). A grant is (cluster id, namespace): None for the cluster means any cluster (a token limited
to namespaces only), "" for the namespace means every namespace. Nodes are shared by every namespace, so node pages
and node lists need a whole-cluster grant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from .models import Node, Pod, ReadGrant

Grant = tuple[int | None, str]


@dataclass(frozen=True)
class Visibility:
    grants: frozenset[Grant] | None = None  # None: everything

    @property
    def everything(self) -> bool:
        return self.grants is None

    def q(self, cluster: str = "cluster_id", namespace: str = "namespace") -> Q:
        """The rows this viewer sees, for a model whose cluster id and namespace are reached by these lookups."""
        if self.grants is None:
            return Q()
        if not self.grants:
            return Q(pk__in=[])
        out = Q(pk__in=[])
        for cluster_id, ns in self.grants:
            term = Q()
            if cluster_id is not None:
                term &= Q(**{cluster: cluster_id})
            if ns:
                term &= Q(**{namespace: ns})
            out |= term
        return out

    def filter(self, queryset: QuerySet[Any], cluster: str = "cluster_id", namespace: str = "namespace") -> Any:
        return queryset if self.grants is None else queryset.filter(self.q(cluster, namespace))

    def sees_cluster(self, cluster_id: int) -> bool:
        """Some of the cluster (one namespace at least, when it has it)."""
        return self.grants is None or any(c in (None, cluster_id) for c, _ in self.grants)

    def sees_whole_cluster(self, cluster_id: int) -> bool:
        return self.grants is None or any(c in (None, cluster_id) and not ns for c, ns in self.grants)

    def sees_namespace(self, cluster_id: int, namespace: str) -> bool:
        return self.grants is None or any(c in (None, cluster_id) and ns in ("", namespace) for c, ns in self.grants)

    def node_q(self) -> Q:
        """The nodes this viewer sees: every node of a cluster it sees whole, else those running a pod it sees."""
        if self.grants is None or (None, "") in self.grants:
            return Q()
        out = Q(pk__in=[])
        for cluster_id, ns in self.grants:
            if not ns:
                out |= Q(cluster_id=cluster_id)
            else:
                pods = Pod.objects.filter(namespace=ns, node__isnull=False)
                if cluster_id is not None:
                    pods = pods.filter(cluster_id=cluster_id)
                out |= Q(pk__in=pods.values("node_id"))
        return out

    def nodes(self, cluster_id: int) -> Any:  # QuerySet[Node], annotated
        """The cluster's nodes this viewer sees, each with `pod_count`: the pods on it that the viewer sees."""
        visible_pods = self.q("pods__cluster_id", "pods__namespace")
        return (
            Node.objects.filter(cluster_id=cluster_id)
            .filter(self.node_q())
            .annotate(pod_count=Count("pods", filter=visible_pods))
        )

    def clusters(self, queryset: QuerySet[Any]) -> Any:
        """The clusters of `queryset` with something to see."""
        if self.grants is None or any(c is None for c, _ in self.grants):
            return queryset
        return queryset.filter(pk__in={c for c, _ in self.grants})

    def narrowed(self, cluster_id: int | None, namespaces: Iterable[str]) -> Visibility:
        """This viewer limited further to one cluster (None: no limit) and these namespaces (none given: all)."""
        limits = frozenset((cluster_id, ns) for ns in namespaces) or frozenset({(cluster_id, "")})
        if cluster_id is None and limits == {(None, "")}:
            return self
        if self.grants is None:
            return Visibility(limits)
        return Visibility(frozenset(g for a in self.grants for b in limits if (g := _both(a, b)) is not None))


EVERYTHING = Visibility()


def _both(a: Grant, b: Grant) -> Grant | None:
    """The grant both allow, or None when they share nothing."""
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return None
    if a[1] and b[1] and a[1] != b[1]:
        return None
    return (a[0] if a[0] is not None else b[0], a[1] or b[1])


def for_user(user: Any) -> Visibility:
    """A user's visibility: everything for a superuser or a user without grants, else the union of their grants."""
    if not getattr(user, "is_authenticated", False):
        return Visibility(frozenset())
    if user.is_superuser:
        return EVERYTHING
    grants = frozenset(ReadGrant.objects.filter(user=user).values_list("cluster_id", "namespace"))
    return Visibility(grants) if grants else EVERYTHING
