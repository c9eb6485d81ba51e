"""The node page's reads: who holds the node's CPU shares, its kernel verdict and its throttled containers."""

from __future__ import annotations

from dataclasses import dataclass

from apps.advisor.cfs import shares_floor
from apps.advisor.kernel import KernelVerdict, kernel_verdict
from apps.advisor.models import Finding, Window
from apps.clusters.kubelet import shares_from_request_mcpu
from apps.clusters.models import Container, Node

from .selectors import ReportLine, WindowStatus, report_lines, throttle_target, window_status

# Rows the node page's tables show: a node may run thousands of pods, and a page of 15,000 rows is no page.
MAX_TABLE_ROWS = 100


@dataclass(frozen=True)
class ShareHolder:
    namespace: str
    pod: str
    request_mcpu: int | None  # summed over the pod's containers; None when none of them requests CPU
    shares: int  # the pod cgroup's cpu.shares
    fraction: float  # of all pod shares on the node, 0–1
    floor_mcpu: int | None  # allocatable × fraction: what it is guaranteed when every pod wants CPU


@dataclass(frozen=True)
class NodePage:
    node: Node
    verdict: KernelVerdict
    holders: list[ShareHolder]
    requested_mcpu: int
    throttled: list[ReportLine]  # the MAX_TABLE_ROWS most throttled
    throttled_total: int  # containers over the target, listed or not
    target: float
    status: WindowStatus


def share_holders(node: Node) -> list[ShareHolder]:
    """Pods on the node by cpu.shares (from their summed CPU requests), largest first; floors need allocatable CPU."""
    requests: dict[tuple[str, str], int | None] = {}
    for namespace, pod, request in Container.objects.filter(pod__node=node).values_list(
        "pod__namespace", "pod__name", "request_mcpu"
    ):
        key = (namespace, pod)
        if request:
            requests[key] = (requests.get(key) or 0) + request
        else:
            requests.setdefault(key, None)
    budget = node.allocatable_mcpu or node.capacity_mcpu
    shares_of = {key: shares_from_request_mcpu(request) for key, request in requests.items()}
    total_shares = sum(shares_of.values())
    holders = []
    for key, request in requests.items():
        shares = shares_of[key]
        # Against the node's summed shares, added up once (each pod's neighbours listed apart made a node page
        # quadratic in its pods: minutes for 15,000 pods).
        others = total_shares - shares
        floor = shares_floor(shares, (others,) if others else (), budget).floor_mcpu if budget else None
        holders.append(ShareHolder(key[0], key[1], request, shares, shares / total_shares, floor))
    holders.sort(key=lambda h: (-h.shares, h.namespace, h.pod))
    return holders


def node_page(node: Node, *, window: str = Window.HOUR) -> NodePage:
    """The node's kernel verdict, who holds its shares, and its containers over the throttle target in `window`."""
    target = throttle_target()
    holders = share_holders(node)
    throttled_qs = Finding.objects.filter(
        cluster_id=node.cluster_id, window=window, container__pod__node=node, throttle_ratio__gt=target
    ).select_related("container", "container__pod", "container__pod__node", "container__burst", "cluster")
    ranked = throttled_qs.order_by("-throttle_ratio", "namespace", "container__pod__name", "container__name")
    throttled = report_lines(list(ranked[:MAX_TABLE_ROWS]))
    throttled_total = len(throttled) if len(throttled) < MAX_TABLE_ROWS else throttled_qs.count()
    return NodePage(
        node=node,
        verdict=kernel_verdict(node.kernel_version),
        holders=holders,
        requested_mcpu=sum(h.request_mcpu or 0 for h in holders),
        throttled=throttled,
        throttled_total=throttled_total,
        target=target,
        status=window_status(
            node.cluster, window, container_ids=Container.objects.filter(pod__node=node).values_list("pk", flat=True)
        ),
    )
