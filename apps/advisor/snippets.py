"""Copyable changes for a recommendation: a `kubectl set resources` command, the manifest's resources block and,
where the cluster allows it, an in-place resize of the running pod.

Pure Python (no Django): the pod page shows them and the recommendations CSV carries the command, from one function.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from apps.advisor.versions import IN_PLACE_RESIZE, dotted, kubelet_at_least

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


@dataclass(frozen=True, slots=True)
class InPlaceResize:
    kubectl: str | None  # the patch line; None when the pod cannot be resized in place, and `why_not` says why
    why_not: str | None = None


def in_place_resize(
    *,
    namespace: str,
    pod: str,
    container: str,
    request_mcpu: int | None,
    limit_mcpu: int | None,
    kubelet_version: str,
    qos_class: str,
    containers: Sequence[tuple[str, int | None, int | None]],
) -> InPlaceResize | None:
    """The resize that applies the suggestion to the running pod now, or why there is none; None when nothing
    changes. `containers` are every container of the pod as (name, CPU request, CPU limit) in millicores."""
    if request_mcpu is None and limit_mcpu is None:
        return None
    if not kubelet_at_least(kubelet_version, IN_PLACE_RESIZE):
        running = f"its node runs {kubelet_version}" if kubelet_version else "its node's Kubernetes version is unknown"
        return InPlaceResize(None, f"in-place resize needs Kubernetes {dotted(IN_PLACE_RESIZE)} or later; {running}")
    why_not = _qos_change(qos_class, containers, container, request_mcpu, limit_mcpu)
    if why_not:
        return InPlaceResize(None, why_not)
    resources: dict[str, dict[str, str]] = {}
    if request_mcpu is not None:
        resources["requests"] = {"cpu": cpu_quantity(request_mcpu)}
    if limit_mcpu is not None:
        resources["limits"] = {"cpu": cpu_quantity(limit_mcpu)}
    patch = json.dumps({"spec": {"containers": [{"name": container, "resources": resources}]}}, separators=(",", ":"))
    parts = ["kubectl", "patch", "pod", pod, "-n", namespace, "--subresource", "resize", "--patch", patch]
    return InPlaceResize(shlex.join(parts))


def _qos_change(
    qos_class: str,
    containers: Sequence[tuple[str, int | None, int | None]],
    container: str,
    request_mcpu: int | None,
    limit_mcpu: int | None,
) -> str | None:
    """Why the change could alter the pod's QoS class (so the API would refuse the resize), or None when it cannot.
    Only CPU is known here: a change that could make the pod Guaranteed, if its memory allowed, counts as a change."""
    after = [
        (name, request_mcpu if name == container and request_mcpu is not None else req,
         limit_mcpu if name == container and limit_mcpu is not None else lim)
        for name, req, lim in containers
    ]  # fmt: skip
    if qos_class == "BestEffort":
        return "the pod is BestEffort: any CPU request or limit makes it Burstable, and a resize cannot change the QoS class"
    if qos_class == "Guaranteed":
        unequal = [name for name, req, lim in after if lim is None or (req if req is not None else lim) != lim]
        if unequal:
            return (
                f"the pod is Guaranteed (every request equals its limit): this change leaves {', '.join(unequal)} "
                "with a CPU request unlike its limit, which would make it Burstable, and a resize cannot change the QoS "
                "class; change the template instead, or set request and limit to the same value"
            )
        return None
    if qos_class == "Burstable":
        if after and all(lim is not None and req == lim for _, req, lim in after):
            return (
                "after this change every container's CPU request equals its limit, which can make the pod Guaranteed "
                "(if its memory does the same), and a resize cannot change the QoS class; change the template instead"
            )
        return None
    return "the pod's QoS class is unknown, and a resize that changed it would be refused"
