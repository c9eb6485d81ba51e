"""Copyable changes for a recommendation: a `kubectl set resources` command and the manifest's resources block.

Pure Python (no Django): the pod page shows them and the recommendations CSV carries the command, from one function.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import yaml

# kubectl's resource names for the owners a pod can have; anything else (or no owner) is changed on the pod.
_KUBECTL_KINDS = {
    "Deployment": "deployment",
    "StatefulSet": "statefulset",
    "DaemonSet": "daemonset",
    "ReplicaSet": "replicaset",
    "ReplicationController": "replicationcontroller",
    "Job": "job",
    "CronJob": "cronjob",
}


@dataclass(frozen=True, slots=True)
class ResourceChange:
    kubectl: str  # one shell command line
    yaml: str  # the container entry of the pod template, with only the CPU values that change
    target: str  # what the change applies to, e.g. "deployment/api"


def cpu_quantity(mcpu: int) -> str:
    """A CPU quantity in millicores ("250m", "1000m"): the page's unit, and never a bare number YAML would retype."""
    if mcpu < 0:
        raise ValueError(f"a CPU quantity cannot be negative: {mcpu!r} mcpu")
    return f"{mcpu}m"


def kubectl_command(
    *,
    namespace: str,
    pod: str,
    container: str,
    workload_kind: str | None,
    workload_name: str | None,
    request_mcpu: int | None,
    limit_mcpu: int | None,
) -> tuple[str, str] | None:
    """The `kubectl set resources` line that sets the suggested CPU request and/or limit, and its target
    (`kind/name`); None when the recommendation suggests neither. The CSV carries it for every row, so it stays
    cheap: no YAML."""
    if request_mcpu is None and limit_mcpu is None:
        return None
    kind = _KUBECTL_KINDS.get(workload_kind or "")
    target = f"{kind}/{workload_name}" if kind and workload_name else f"pod/{pod}"
    parts = ["kubectl", "set", "resources", target, "-c", container]
    if request_mcpu is not None:
        parts.append(f"--requests=cpu={cpu_quantity(request_mcpu)}")
    if limit_mcpu is not None:
        parts.append(f"--limits=cpu={cpu_quantity(limit_mcpu)}")
    parts += ["-n", namespace]
    return shlex.join(parts), target


def resource_change(
    *,
    namespace: str,
    pod: str,
    container: str,
    workload_kind: str | None,
    workload_name: str | None,
    request_mcpu: int | None,
    limit_mcpu: int | None,
) -> ResourceChange | None:
    """The change that sets the suggested CPU request and/or limit; None when the recommendation suggests neither.

    The command targets the pod's owner (kubectl's `kind/name`) so the change survives a rollout; a pod without a
    known owner is targeted directly. Names are shell-quoted where they need it.
    """
    command = kubectl_command(
        namespace=namespace,
        pod=pod,
        container=container,
        workload_kind=workload_kind,
        workload_name=workload_name,
        request_mcpu=request_mcpu,
        limit_mcpu=limit_mcpu,
    )
    if command is None:
        return None
    kubectl, target = command
    resources: dict[str, dict[str, str]] = {}
    if request_mcpu is not None:
        resources["requests"] = {"cpu": cpu_quantity(request_mcpu)}
    if limit_mcpu is not None:
        resources["limits"] = {"cpu": cpu_quantity(limit_mcpu)}
    # safe_dump quotes any name YAML would read as something else (a number, `null`, `yes`).
    snippet = yaml.safe_dump([{"name": container, "resources": resources}], sort_keys=False, indent=2)
    return ResourceChange(kubectl=kubectl, yaml=snippet.rstrip("\n"), target=target)
