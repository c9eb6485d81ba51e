"""Registering clusters (the admin site, `manage.py add_cluster` and the lab all call register_cluster) and the node
facts judged from readings rather than reported."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from .cgroup_scheme import CgroupScheme, Seen, judge_cgroup_scheme
from .kubelet import shares_from_request_mcpu
from .models import Cluster, Container, SourceKind


def register_cluster(
    name: str,
    source: str,
    *,
    kubeconfig_path: str = "",
    kube_context: str = "",
    in_cluster: bool = False,
    kubelet_direct: bool = False,
    read_kubelet_config: bool = False,
    prometheus_url: str = "",
) -> tuple[Cluster, bool]:
    """Create or update a cluster by name; returns it and whether it was created. Invalid settings raise
    ValidationError with a message per field."""
    if source not in SourceKind.values:
        raise ValidationError({"source": f"{source!r} is not one of {', '.join(SourceKind.values)}"})
    cluster = Cluster.objects.filter(name=name).first() or Cluster(name=name)
    created = cluster.pk is None
    cluster.source = source
    cluster.kubeconfig_path = kubeconfig_path
    cluster.kube_context = kube_context
    cluster.in_cluster = in_cluster
    cluster.kubelet_direct = kubelet_direct
    cluster.read_kubelet_config = read_kubelet_config
    cluster.prometheus_url = prometheus_url
    cluster.enabled = True
    cluster.full_clean()
    cluster.save()
    return cluster, created


def cgroup_scheme_fields(
    cluster: Cluster,
    node: str,
    seen_values: dict[tuple[str, str, str], int],
    seen: Seen = "cadvisor_shares",
    *,
    cgroup_version: int | None = None,
    weight_mapping: str = "",
    has_pressure: bool | None = None,
    source: str = "",
) -> dict[str, object]:
    """The Node fields (cgroup_version, weight_mapping, cgroup_evidence) that a read of `node` tells, judged against
    the stored requests of the containers it names; {} when it tells nothing (the stored facts stay)."""
    scheme: CgroupScheme | None
    if cgroup_version and weight_mapping:
        scheme = CgroupScheme(cgroup_version, weight_mapping, f"{source}: the cgroups it writes itself")
    else:
        requests = {}
        if seen_values:
            rows = Container.objects.filter(pod__cluster=cluster, pod__node__name=node).values_list(
                "pod__namespace", "pod__name", "name", "request_mcpu"
            )
            requests = {(namespace, pod, name): request for namespace, pod, name, request in rows}
        observations = [
            (shares_from_request_mcpu(requests[key]), value) for key, value in seen_values.items() if key in requests
        ]
        scheme = judge_cgroup_scheme(
            observations, seen, cgroup_version=cgroup_version, has_pressure=has_pressure, source=source
        )
    if scheme is None:
        return {}
    return {"cgroup_version": scheme.version, "weight_mapping": scheme.mapping, "cgroup_evidence": scheme.evidence}
