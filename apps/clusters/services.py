"""Registering clusters. The admin site, `manage.py add_cluster` and the lab all call register_cluster."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from .models import Cluster, SourceKind


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
