"""Configuration problems as system checks, with stable ids and a hint (run by `manage.py check` and at startup)."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DatabaseError

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


@register("cputune")
def cluster_sources(app_configs: object = None, **kwargs: object) -> list[CheckMessage]:
    from .models import Cluster, SourceKind

    messages: list[CheckMessage] = []
    try:
        clusters = list(Cluster.objects.filter(enabled=True))
    except DatabaseError:
        return []  # not migrated yet: nothing registered to check
    for cluster in clusters:
        if cluster.source == SourceKind.KUBERNETES:
            if cluster.in_cluster and not IN_CLUSTER_TOKEN.exists() and not os.environ.get("KUBERNETES_SERVICE_HOST"):
                messages.append(
                    Error(
                        f"cluster {cluster.name} uses the in-cluster service account, but this process runs outside a pod",
                        hint="Give it a kubeconfig: manage.py add_cluster NAME --kubeconfig PATH",
                        id="collector.E001",
                    )
                )
            elif (
                not cluster.in_cluster
                and cluster.kubeconfig_path
                and not Path(cluster.kubeconfig_path).expanduser().exists()
            ):
                messages.append(
                    Error(
                        f"cluster {cluster.name}: kubeconfig {cluster.kubeconfig_path} does not exist",
                        hint="Fix the path in the admin, or re-run add_cluster with --kubeconfig.",
                        id="collector.E002",
                    )
                )
        if cluster.source == SourceKind.PROMETHEUS and not cluster.prometheus_url:
            messages.append(
                Error(
                    f"cluster {cluster.name} reads Prometheus but has no URL",
                    hint="Set its Prometheus URL.",
                    id="collector.E003",
                )
            )
        if cluster.source == SourceKind.KUBERNETES and cluster.read_kubelet_config:
            messages.append(
                Warning(
                    f"cluster {cluster.name} reads kubelet configs through nodes/proxy",
                    hint="nodes/proxy is close to node admin; grant it only if the CPU manager policy matters to you.",
                    id="collector.W001",
                )
            )
    return messages
