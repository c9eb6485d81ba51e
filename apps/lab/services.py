"""The lab as a cluster: start, change and stop it, register the `lab` cluster, store probe results on its node.

The runtime (runtime.py, changes.py, cgroups.py, workloads.py, probe.py) knows nothing of Django. The collector reads
a running lab through apps/collector/sources/lab/, with the node agent's cgroupfs reader.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.clusters.models import Cluster, Node, SourceKind
from apps.clusters.services import register_cluster

from . import changes, probe, runtime
from .cgroups import can_run_lab
from .reports import LabChange

LAB_CLUSTER = "lab"


def state_dir() -> Path:
    return Path(settings.DATA_DIR) / "lab"


def lab_root() -> str:
    return settings.CPUTUNE_LAB_ROOT


def can_run() -> tuple[bool, str]:
    return can_run_lab(lab_root())


def up(scenario_path: str | None = None) -> runtime.LabState:
    """Start the lab (cleaning up any earlier run) and register the `lab` cluster; raises runtime.LabError."""
    state = runtime.lab_up(scenario_path, root=lab_root(), state_dir=state_dir())
    register_cluster(LAB_CLUSTER, SourceKind.LAB)
    return state


def down() -> runtime.LabDownReport:
    return runtime.lab_down(state_dir(), root=lab_root())


def status() -> runtime.LabStatus:
    return runtime.lab_status(state_dir())


def set_container(
    target: str, *, limit: str | None = None, request: str | None = None, processes: int | None = None
) -> LabChange:
    """`lab set`: resize a running lab container in place and/or restart it with another process count
    (changes.set_container); raises runtime.LabError, with nothing changed, when the change is refused."""
    return changes.set_container(target, limit=limit, request=request, processes=processes, state_dir=state_dir())


def run_kernel_probe(
    *, cluster_name: str | None = None, node_name: str | None = None, iterations: int = 200
) -> tuple[probe.ProbeResult, Node]:
    """Measure this machine's kernel (probe.run_probe) and store the figures on the node they describe.

    The cluster defaults to the lab, or the only cluster there is; the node to the lab's node name, else the host
    name. A node not yet collected is created with this machine's kernel version.
    """
    result = probe.run_probe(root=lab_root(), iterations=iterations)
    if cluster_name:
        cluster = Cluster.objects.get(name=cluster_name)
    else:
        cluster = Cluster.objects.filter(name=LAB_CLUSTER).first() or _only_cluster()
    if node_name is None:
        node_name = _lab_node_name()
    node, _ = Node.objects.get_or_create(
        cluster=cluster,
        name=node_name,
        defaults={"kernel_version": result.kernel_release, "capacity_mcpu": result.cpus * 1000},
    )
    node.probe = result.as_dict()
    node.probe_at = timezone.now()
    node.save(update_fields=["probe", "probe_at"])
    return result, node


def _only_cluster() -> Cluster:
    clusters = list(Cluster.objects.all()[:2])
    if len(clusters) == 1:
        return clusters[0]
    if not clusters:
        cluster, _ = register_cluster(LAB_CLUSTER, SourceKind.LAB)
        return cluster
    raise Cluster.DoesNotExist("several clusters are registered: name one with --cluster")


def _lab_node_name() -> str:
    try:
        return runtime.lab_inventory(state_dir()).node.name
    except runtime.LabError:
        import socket

        return os.environ.get("NODE_NAME") or socket.gethostname()
