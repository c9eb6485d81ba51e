"""Kubernetes objects → NodeInfo / PodInfo / ContainerInfo. Pure Python: no Django, no kubernetes client.

The input is plain dicts, exactly as the API server answers (`GET /api/v1/pods`), as `kubectl get -o json|yaml` prints
them, or as the kubelet's `/pods` lists them. Each converter takes one object; the plural forms take many, skip the
objects they cannot read and return `(items, problems)` so one bad pod never hides the rest of a cluster.

Choices made here, because the API leaves them open:

- **Workload.** Found through the controller owner reference. A ReplicaSet's pod belongs to its Deployment when the
  ReplicaSet name is the Deployment name plus the `pod-template-hash` label (also in the encoded form of 1.8–1.10
  clusters); a Job named `<cronjob>-<scheduled time>` whose time matches the pod's creation belongs to that CronJob.
  When the caller knows the real owners (`replicasets=` / `jobs=` mappings), those win over the name rules.
- **Static pods** (mirror pods owned by the Node, or the kubelet's own `config.source: file|http` pods) get kind
  `"StaticPod"` and the pod name without its `-<node>` suffix, so `etcd` on three control-plane nodes is one workload.
  Their `uid` is the kubelet's config hash (`kubernetes.io/config.mirror`), the id in the node's cgroup paths; the
  mirror object's own API uid exists nowhere on the node.
- **Bare pods** get kind `""` and their own name as workload name.
- **Containers** are the regular ones plus sidecars (init containers with `restartPolicy: Always`, which run for the
  pod's life and are throttled like any other); ordinary init containers have exited and are left out.
- **Resources** come from `status.containerStatuses[].resources` when present: that is what the kubelet actually
  applied. After an in-place resize the spec holds the *desired* value until the resize completes, while the cgroup
  quota — what throttles — follows the status. Fields the status omits fall back to the spec.
- **Requests** default to the limit when only a limit is set (API defaulting, so manifests read like API objects).
  A CPU limit of 0 means "no limit" (the kubelet writes no quota for it) and becomes `None`.
- Pod-level resources (`spec.resources`, Kubernetes ≥ 1.32) are used for the QoS class only; PodInfo has no field
  for the pod-level limit yet.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from apps.clusters.info import CPU_ENV_KEYS, CUT_MARK, MAX_CPU_ENV_CHARS
from apps.clusters.kubelet import cpu_quantity_to_mcpu
from apps.telemetry.readings import ContainerInfo, NodeInfo, PodInfo
from apps.words import excerpt, printable

__all__ = [
    "InventoryError",
    "OwnerMap",
    "container_id_without_runtime",
    "kubelet_endpoint",
    "list_items",
    "node_from_object",
    "node_with_kubelet_config",
    "nodes_from_objects",
    "pod_from_object",
    "pods_from_objects",
    "qos_class",
    "workload_of",
]

# (namespace, ReplicaSet or Job name) → (kind, name) of its controller; ("", "") means "it has no owner".
OwnerMap = Mapping[tuple[str, str], tuple[str, str]]

STATIC_POD = "StaticPod"
# JSON and YAML give dicts: checking dict first skips the slow ABC check on the hot path.
_MAPPING = (dict, Mapping)
DEFAULT_KUBELET_PORT = 10250

_RUNTIME_PREFIX = re.compile(r"^[a-z][a-z0-9+.-]*://")
# Kubernetes 1.8–1.10 named ReplicaSets <deployment>-<SafeEncodeString(pod-template-hash)> (apimachinery rand).
_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
# A CronJob names its Jobs <cronjob>-<scheduled time>: minutes since the epoch since 1.21, seconds before.
_CRONJOB_JOB_NAME = re.compile(r"^(?P<cronjob>.+)-(?P<stamp>[0-9]{8,10})$")
# A Job's pods are created at its scheduled time, later only after retries (backoff caps at 6 min per retry).
_CRONJOB_MAX_START_DELAY = timedelta(days=7)
_CLOCK_SKEW = timedelta(minutes=5)
_STATIC_SOURCES = frozenset({"file", "http"})
_ADDRESS_PREFERENCE = ("InternalIP", "InternalDNS", "Hostname", "ExternalIP", "ExternalDNS")
_QOS_RESOURCES = ("cpu", "memory")

# The most millicores a CPU field holds (the database's integer columns): 2.1 million CPUs, far past any machine.
MAX_MCPU = 2**31 - 1
# CPU quantities are refused past 10**15 in their own unit before conversion (a huge exponent such as "1e999000" makes
# an int of millions of digits, "1e9999999" raises decimal.Overflow): even in nano-CPUs that is past MAX_MCPU. Other quantities
# (memory, for the QoS class) past 10**30: far past any node's bytes, and clear of Decimal's overflow.
_MAX_CPU_DIGITS = 15
_MAX_QUANTITY_DIGITS = 30
# Real quantities are a few characters ("250m", "128974848"); the quantity patterns (here and in the kubelet helpers)
# backtrack quadratically on a long string that fails at its end, so longer ones are refused before matching.
_MAX_QUANTITY_CHARS = 64
_CPU_NUMBER = re.compile(r"\s*[+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?")
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))([eE][+-]?[0-9]+|[a-zA-Z]{0,2})$")
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
_QUANTITY_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


class InventoryError(ValueError):
    """A Kubernetes object that cannot be read; the message names the object, the field and the offending value."""


def list_items(document: Any) -> list[Mapping[str, Any]]:
    """The objects of a `kind: *List` document, a bare list of objects, or a single object (as a one-item list).

    Raises InventoryError when the document is none of these (e.g. a scalar, or a dict without `items` or `kind`).
    """
    if isinstance(document, _MAPPING):
        if "items" in document:
            items = document["items"]
            if items is None:  # `kubectl get -o yaml` on an empty list prints `items: []`, some tools print null
                return []
            if not isinstance(items, list):
                raise InventoryError(f"`items` is a {type(items).__name__}, expected a list")
            return [_as_object(item, index) for index, item in enumerate(items)]
        if "kind" in document or "metadata" in document:
            return [document]
        raise InventoryError(f"a mapping with keys {sorted(document)[:5]} is neither a Kubernetes list nor an object")
    if isinstance(document, list):
        return [_as_object(item, index) for index, item in enumerate(document)]
    raise InventoryError(f"expected a Kubernetes list or object, got a {type(document).__name__}")


# ---------------------------------------------------------------------------------------------------------- nodes


def node_from_object(node: Mapping[str, Any]) -> NodeInfo:
    """One Node object → NodeInfo. CPU in millicores; absent capacity/allocatable → None.

    Raises InventoryError for a missing name or an unreadable CPU quantity.
    """
    name = _name_of(node, "node")
    status = _mapping(node.get("status"), f"node {name}: status")
    node_info = _mapping(status.get("nodeInfo"), f"node {name}: status.nodeInfo")
    return NodeInfo(
        name=name,
        capacity_mcpu=_resource_mcpu(status.get("capacity"), f"node {name}: status.capacity"),
        allocatable_mcpu=_resource_mcpu(status.get("allocatable"), f"node {name}: status.allocatable"),
        kernel_version=_text(node_info.get("kernelVersion")),
        os_image=_text(node_info.get("osImage")),
        container_runtime=_text(node_info.get("containerRuntimeVersion")),
        kubelet_version=_text(node_info.get("kubeletVersion")),
    )


def nodes_from_objects(nodes: Iterable[Mapping[str, Any]]) -> tuple[list[NodeInfo], list[str]]:
    """Every readable Node → NodeInfo, plus one problem string per node that was skipped."""
    items: list[NodeInfo] = []
    problems: list[str] = []
    for node in nodes:
        try:
            items.append(node_from_object(node))
        except InventoryError as error:
            problems.append(str(error))
    return items, problems


def kubelet_endpoint(node: Mapping[str, Any]) -> tuple[str, int] | None:
    """(address, port) where this node's kubelet listens, from `status.addresses` and `status.daemonEndpoints`.

    Prefers InternalIP, then InternalDNS, Hostname, ExternalIP, ExternalDNS; the port defaults to 10250.
    None when the node reports no address at all.
    """
    status = _lenient(node, "status")
    addresses = status.get("addresses") or []
    by_type: dict[str, str] = {}
    for entry in addresses if isinstance(addresses, list) else []:
        if isinstance(entry, _MAPPING) and entry.get("address") and entry.get("type"):
            by_type.setdefault(str(entry["type"]), str(entry["address"]))
    address = next((by_type[kind] for kind in _ADDRESS_PREFERENCE if kind in by_type), None)
    if address is None:
        return None
    endpoints = status.get("daemonEndpoints")
    kubelet = endpoints.get("kubeletEndpoint") if isinstance(endpoints, _MAPPING) else None
    port = kubelet.get("Port") if isinstance(kubelet, _MAPPING) else None
    return address, port if isinstance(port, int) and 0 < port < 65536 else DEFAULT_KUBELET_PORT


def node_with_kubelet_config(node: NodeInfo, kubelet_config: Mapping[str, Any]) -> NodeInfo:
    """The node with `cpu_manager_policy` taken from its kubelet config (the `kubeletconfig` of `/configz`).

    The kubelet spells the policies "none" and "static"; any other value is kept as the kubelet reported it.
    """
    policy = kubelet_config.get("cpuManagerPolicy")
    if not isinstance(policy, str) or not policy:
        return node
    return dataclasses.replace(node, cpu_manager_policy=policy.lower())


# ----------------------------------------------------------------------------------------------------------- pods


def pod_from_object(
    pod: Mapping[str, Any], replicasets: OwnerMap | None = None, jobs: OwnerMap | None = None
) -> PodInfo:
    """One Pod object → PodInfo (requests and limits in millicores). See the module docstring for the choices.

    `replicasets` / `jobs` map (namespace, name) to the real owner when the caller listed them.
    Raises InventoryError for a missing name/namespace, no containers, or an unreadable quantity or count.
    """
    metadata = _mapping(pod.get("metadata"), "pod: metadata")
    name = _name_of(pod, "pod")
    namespace = metadata.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise InventoryError(f"pod {name}: metadata.namespace is missing")
    where = f"pod {namespace}/{name}"
    spec = _mapping(pod.get("spec"), f"{where}: spec")
    status = _mapping(pod.get("status"), f"{where}: status")

    kind, workload = workload_of(pod, replicasets, jobs)
    resize = resize_state(status)
    qos = status.get("qosClass")
    if not isinstance(qos, str) or not qos:
        qos = qos_class(spec, where)

    uid = _text(metadata.get("uid"))
    if kind == STATIC_POD:
        annotations = _lenient(metadata, "annotations")
        uid = _text(annotations.get("kubernetes.io/config.mirror")) or uid

    return PodInfo(
        namespace=namespace,
        name=name,
        uid=uid,
        node=_text(spec.get("nodeName")),
        qos_class=qos,
        workload_kind=kind,
        workload_name=workload,
        containers=_running_containers(spec, status, where),
        resize_status=resize[0],
        resize_message=resize[1],
        request_mcpu=_resource_mcpu(_pod_resources(spec, where).get("requests"), f"{where}: spec.resources.requests"),
        limit_mcpu=_resource_mcpu(_pod_resources(spec, where).get("limits"), f"{where}: spec.resources.limits"),
        **_init_phase(spec, where),
    )


def _init_phase(spec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The init containers' part of the pod's CPU limit, as the kubelet's resource.PodLimits takes it: each init
    container runs alone beside the sidecars declared before it, so the phase needs the largest of (its limit + theirs).
    Sidecars (restartPolicy Always) are stored as containers and summed with them."""
    sidecars_before = 0
    largest: int | None = None
    unlimited = False
    for container in spec.get("initContainers") or []:
        if not isinstance(container, _MAPPING):
            continue  # _running_containers reports it
        resources = _mapping(container.get("resources") or {}, f"{where}: an init container's resources")
        limit = _resource_mcpu(resources.get("limits"), f"{where}: an init container's limits")
        if container.get("restartPolicy") == "Always":
            sidecars_before += limit or 0
            unlimited = unlimited or not limit
            continue
        if not limit:
            unlimited = True
            continue
        largest = max(largest or 0, limit + sidecars_before)
    return {"init_limit_mcpu": largest, "init_unlimited": unlimited}


def _pod_resources(spec: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    resources = spec.get("resources")
    return {} if resources is None else _mapping(resources, f"{where}: spec.resources")


def pods_from_objects(
    pods: Iterable[Mapping[str, Any]], replicasets: OwnerMap | None = None, jobs: OwnerMap | None = None
) -> tuple[list[PodInfo], list[str]]:
    """Every readable Pod → PodInfo, plus one problem string per pod that was skipped."""
    items: list[PodInfo] = []
    problems: list[str] = []
    for pod in pods:
        try:
            items.append(pod_from_object(pod, replicasets, jobs))
        except InventoryError as error:
            problems.append(str(error))
    return items, problems


def workload_of(
    pod: Mapping[str, Any], replicasets: OwnerMap | None = None, jobs: OwnerMap | None = None
) -> tuple[str, str]:
    """(kind, name) of the workload that runs this pod: Deployment, StatefulSet, DaemonSet, Job, CronJob,
    ReplicaSet, StaticPod, any custom controller's kind, or ("", pod name) for a bare pod."""
    metadata = _lenient(pod, "metadata")
    pod_name = _text(metadata.get("name"))
    namespace = _text(metadata.get("namespace"))
    owner = _controller_owner(metadata)
    if owner is None:
        annotations = _lenient(metadata, "annotations")
        if "kubernetes.io/config.mirror" in annotations or annotations.get("kubernetes.io/config.source") in (
            _STATIC_SOURCES
        ):
            return STATIC_POD, _static_pod_workload(pod_name, pod)
        return "", pod_name
    kind, name = owner
    if kind == "Node":
        return STATIC_POD, _static_pod_workload(pod_name, pod)
    if kind == "ReplicaSet":
        return _replicaset_owner(namespace, name, metadata, replicasets)
    if kind == "Job":
        return _job_owner(namespace, name, metadata, jobs)
    return kind, name


def qos_class(spec: Mapping[str, Any], where: str = "pod") -> str:
    """The QoS class Kubernetes gives a pod spec (GetPodQOS): Guaranteed, Burstable or BestEffort.

    Counts CPU and memory of every container and init container (or the pod-level resources when set); zero
    quantities count as unset; a request left out next to a limit defaults to the limit, as the API does.
    Raises InventoryError for an unreadable quantity.
    """
    pod_resources = spec.get("resources")
    if isinstance(pod_resources, _MAPPING) and (pod_resources.get("requests") or pod_resources.get("limits")):
        resource_sets = [pod_resources]
    else:
        resource_sets = [
            container.get("resources") or {}
            for key in ("containers", "initContainers")
            for container in (spec.get(key) or [])
            if isinstance(container, _MAPPING)
        ]
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for resources in resource_sets:
        if not isinstance(resources, _MAPPING):
            raise InventoryError(f"{where}: resources is a {type(resources).__name__}, expected a mapping")
        own_limits = _qos_quantities(resources.get("limits"), f"{where}: limits")
        own_requests = _qos_quantities(resources.get("requests"), f"{where}: requests")
        for resource, value in own_limits.items():
            own_requests.setdefault(resource, value)  # API defaulting: request := limit
        for resource, value in own_requests.items():
            if value > 0:
                requests[resource] = requests.get(resource, Decimal(0)) + value
        limited = {resource for resource, value in own_limits.items() if value > 0}
        for resource in limited:
            limits[resource] = limits.get(resource, Decimal(0)) + own_limits[resource]
        if not limited.issuperset(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests.keys() == limits.keys() and all(requests[r] == limits[r] for r in requests):
        return "Guaranteed"
    return "Burstable"


def container_id_without_runtime(container_id: str) -> str:
    """`containerd://abc…` → `abc…` (also docker://, cri-o://, any `<runtime>://`); no prefix → unchanged."""
    return _RUNTIME_PREFIX.sub("", container_id, count=1)


# ------------------------------------------------------------------------------------------------------- internals


def _as_object(item: Any, index: int) -> Mapping[str, Any]:
    if not isinstance(item, _MAPPING):
        raise InventoryError(f"item {index} is a {type(item).__name__}, expected an object")
    return item


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, _MAPPING):
        raise InventoryError(f"{where} is a {type(value).__name__}, expected a mapping")
    return value


def _lenient(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """obj[key] when it is a mapping, else an empty one: for optional parts read on a best-effort basis."""
    value = obj.get(key)
    return value if isinstance(value, _MAPPING) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _name_of(obj: Mapping[str, Any], what: str) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, _MAPPING) else None
    if not isinstance(name, str) or not name:
        namespace = metadata.get("namespace") if isinstance(metadata, _MAPPING) else None
        uid = metadata.get("uid") if isinstance(metadata, _MAPPING) else None
        hint = ", ".join(
            f"{key}={excerpt(value, 40)}" for key, value in (("namespace", namespace), ("uid", uid)) if value
        )
        raise InventoryError(f"{what} without metadata.name{f' ({hint})' if hint else ''}")
    return name


def _resource_mcpu(resources: Any, where: str) -> int | None:
    """CPU of a ResourceList (`{"cpu": "250m", …}`) in millicores; None when the list or its cpu is absent."""
    if resources is None:
        return None
    if not isinstance(resources, _MAPPING):
        raise InventoryError(f"{where} is a {type(resources).__name__}, expected a mapping")
    quantity = resources.get("cpu")
    if quantity is None:
        return None
    if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
        raise InventoryError(f"{where}.cpu {excerpt(quantity, 40)} is not a CPU quantity")
    if isinstance(quantity, str) and len(quantity) > _MAX_QUANTITY_CHARS:
        raise InventoryError(
            f"{where}.cpu {excerpt(quantity, 40)} is {len(quantity)} characters long: not a CPU quantity"
        )
    number = _CPU_NUMBER.match(quantity) if isinstance(quantity, str) else None
    if number is not None and Decimal(number.group()).adjusted() > _MAX_CPU_DIGITS:
        raise InventoryError(f"{where}.cpu {excerpt(quantity, 40)} is more CPU than any node has")
    try:
        mcpu = cpu_quantity_to_mcpu(quantity)
    except ValueError as error:
        raise InventoryError(f"{where}.cpu: {error}") from None
    if mcpu > MAX_MCPU:
        raise InventoryError(f"{where}.cpu {excerpt(quantity, 40)} is more CPU than any node has")
    return mcpu


def _qos_quantities(resources: Any, where: str) -> dict[str, Decimal]:
    if resources is None:
        return {}
    if not isinstance(resources, _MAPPING):
        raise InventoryError(f"{where} is a {type(resources).__name__}, expected a mapping")
    return {
        resource: _quantity(resources[resource], f"{where}.{resource}")
        for resource in _QOS_RESOURCES
        if resources.get(resource) is not None
    }


def _quantity(value: Any, where: str) -> Decimal:
    """Any Kubernetes quantity ("1536Mi", "5M", "0.5", "1e3") as an exact Decimal in base units."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InventoryError(f"{where} {excerpt(value, 40)} is not a quantity")
    text = str(value).strip()
    if len(text) > _MAX_QUANTITY_CHARS:
        raise InventoryError(f"{where} {excerpt(value, 40)} is {len(text)} characters long: not a quantity")
    match = _QUANTITY.match(text)
    suffix = match.group(2) if match else ""
    exponent = _EXPONENT.fullmatch(suffix) is not None
    if not match or (not exponent and suffix not in _QUANTITY_SUFFIX):
        raise InventoryError(f"{where} {excerpt(value, 40)} is not a quantity (expected e.g. 128Mi, 1G, 500m)")
    try:
        quantity = Decimal(match.group(1) + suffix) if exponent else Decimal(match.group(1))
        if quantity.adjusted() > _MAX_QUANTITY_DIGITS:
            raise InventoryError(f"{where} {excerpt(value, 40)} is larger than any node's resources")
        return quantity if exponent else quantity * _QUANTITY_SUFFIX[suffix]
    except ArithmeticError:  # InvalidOperation, and any other decimal signal
        raise InventoryError(f"{where} {excerpt(value, 40)} is not a quantity") from None


def _running_containers(spec: Mapping[str, Any], status: Mapping[str, Any], where: str) -> tuple[ContainerInfo, ...]:
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise InventoryError(f"{where}: spec.containers is missing or empty")
    init_containers = spec.get("initContainers") or []
    if not isinstance(init_containers, list):
        raise InventoryError(f"{where}: spec.initContainers is a {type(init_containers).__name__}, expected a list")
    # Sidecars start before the regular containers, so they come first, as the kubelet lists them.
    sidecars = [c for c in init_containers if isinstance(c, _MAPPING) and c.get("restartPolicy") == "Always"]
    statuses = _statuses_by_name(status.get("containerStatuses"), where)
    init_statuses = _statuses_by_name(status.get("initContainerStatuses"), where)
    result = [_container(c, init_statuses.get(_text(c.get("name"))), where) for c in sidecars]
    for container in containers:
        if not isinstance(container, _MAPPING):
            raise InventoryError(f"{where}: a container is a {type(container).__name__}, expected a mapping")
        result.append(_container(container, statuses.get(_text(container.get("name"))), where))
    return tuple(result)


def _statuses_by_name(statuses: Any, where: str) -> dict[str, Mapping[str, Any]]:
    if statuses is None:
        return {}
    if not isinstance(statuses, list):
        raise InventoryError(f"{where}: container statuses are a {type(statuses).__name__}, expected a list")
    return {s["name"]: s for s in statuses if isinstance(s, _MAPPING) and isinstance(s.get("name"), str)}


def _container(container: Mapping[str, Any], status: Mapping[str, Any] | None, where: str) -> ContainerInfo:
    name = container.get("name")
    if not isinstance(name, str) or not name:
        raise InventoryError(f"{where}: a container has no name")
    where = f"{where} container {name}"
    spec_resources = _mapping(container.get("resources"), f"{where}: resources")
    applied = status.get("resources") if status is not None else None
    applied_resources = _mapping(applied, f"{where}: status resources")

    def cpu_of(key: str) -> int | None:
        own = _mapping(applied_resources.get(key), f"{where}: status {key}")
        if own.get("cpu") is not None:
            return _resource_mcpu(own, f"{where}: status {key}")
        return _resource_mcpu(_mapping(spec_resources.get(key), f"{where}: {key}"), f"{where}: {key}")

    limit_mcpu = cpu_of("limits")
    request_mcpu = cpu_of("requests")
    if request_mcpu is None:
        request_mcpu = limit_mcpu
    if limit_mcpu == 0:
        limit_mcpu = None
    spec_request = spec_limit = None
    if applied_resources:  # the status says what is applied: keep the spec's values to compare (a resize under way)
        spec_limit = _resource_mcpu(_mapping(spec_resources.get("limits"), f"{where}: limits"), f"{where}: limits")
        spec_request = _resource_mcpu(
            _mapping(spec_resources.get("requests"), f"{where}: requests"), f"{where}: requests"
        )
        spec_request = spec_limit if spec_request is None else spec_request
        spec_limit = None if spec_limit == 0 else spec_limit
        if (spec_request, spec_limit) == (request_mcpu, limit_mcpu):
            spec_request = spec_limit = None  # nothing pending: every source reports the same container

    restarts: Any = status.get("restartCount", 0) if status is not None else 0
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise InventoryError(f"{where}: restartCount {excerpt(restarts, 40)} is not a count")
    container_id = _text(status.get("containerID")) if status is not None else ""
    return ContainerInfo(
        name=name,
        container_id=container_id_without_runtime(container_id),
        request_mcpu=request_mcpu,
        limit_mcpu=limit_mcpu,
        restarts=restarts,
        spec_request_mcpu=spec_request,
        spec_limit_mcpu=spec_limit,
        image=_text(container.get("image")),
        cpu_env=cpu_env(container.get("env")),
    )


_CPU_ENV_KEYS = frozenset(CPU_ENV_KEYS)


def cpu_env(env: Any) -> tuple[tuple[str, str], ...]:
    """The spec's CPU-related env vars (CPU_ENV_KEYS) with a literal `value`, sorted by name; a var set twice keeps
    its last value, as the kubelet does. Anything else — `valueFrom`, other names, non-text — is left out, never an
    error: the advice only names the knob. Values are cut to MAX_CPU_ENV_CHARS and made printable."""
    kept: dict[str, str] = {}
    for entry in env if isinstance(env, list) else ():
        if not isinstance(entry, _MAPPING):
            continue
        name, value = entry.get("name"), entry.get("value")
        if not isinstance(name, str) or name not in _CPU_ENV_KEYS:
            continue
        if not isinstance(value, str) or entry.get("valueFrom") is not None:
            kept.pop(name, None)  # a later entry wins: its value is not known here
            continue
        text = printable(value[: MAX_CPU_ENV_CHARS + 1])  # escapes lengthen it: cut before and after
        kept[name] = text if len(text) <= MAX_CPU_ENV_CHARS else text[:MAX_CPU_ENV_CHARS] + CUT_MARK
    return tuple(sorted(kept.items()))


# The pod conditions of an in-place resize not yet done (Kubernetes 1.33 and later), and the status field before.
_RESIZE_CONDITIONS = {"PodResizePending": "Pending", "PodResizeInProgress": "In progress"}
_LEGACY_RESIZE = {"Proposed": "Proposed", "InProgress": "In progress", "Deferred": "Pending (Deferred)",
                  "Infeasible": "Pending (Infeasible)"}  # fmt: skip


def resize_state(status: Mapping[str, Any]) -> tuple[str, str]:
    """(state, message) of the pod's in-place resize not yet done, ("", "") when there is none. A pending resize
    says why in its reason: Deferred (the node may fit it later) or Infeasible (it never will)."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        if not isinstance(condition, _MAPPING) or condition.get("status") != "True":
            continue
        state = _RESIZE_CONDITIONS.get(_text(condition.get("type")))
        if state:
            reason = _text(condition.get("reason"))
            shown = f"{state} ({reason})" if reason and state == "Pending" else state
            return shown[:32], printable(_text(condition.get("message")))[:300]
    legacy = _LEGACY_RESIZE.get(_text(status.get("resize")))
    return (legacy, "") if legacy else ("", "")


def _controller_owner(metadata: Mapping[str, Any]) -> tuple[str, str] | None:
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    owners = [ref for ref in refs if isinstance(ref, _MAPPING) and ref.get("kind") and ref.get("name")]
    if not owners:
        return None
    controller = next((ref for ref in owners if ref.get("controller") is True), owners[0])
    return str(controller["kind"]), str(controller["name"])


def _static_pod_workload(pod_name: str, pod: Mapping[str, Any]) -> str:
    spec = _lenient(pod, "spec")
    node = _text(spec.get("nodeName"))
    if node and pod_name.endswith(f"-{node}") and len(pod_name) > len(node) + 1:
        return pod_name[: -len(node) - 1]
    return pod_name


def _replicaset_owner(
    namespace: str, replicaset: str, metadata: Mapping[str, Any], replicasets: OwnerMap | None
) -> tuple[str, str]:
    if replicasets is not None and (namespace, replicaset) in replicasets:
        kind, name = replicasets[(namespace, replicaset)]
        return (kind, name) if kind and name else ("ReplicaSet", replicaset)
    labels = _lenient(metadata, "labels")
    template_hash = _text(labels.get("pod-template-hash"))
    if template_hash:
        for suffix in (template_hash, _safe_encode(template_hash)):
            if replicaset.endswith(f"-{suffix}") and len(replicaset) > len(suffix) + 1:
                return "Deployment", replicaset[: -len(suffix) - 1]
    return "ReplicaSet", replicaset


def _safe_encode(text: str) -> str:
    """apimachinery's rand.SafeEncodeString, used for ReplicaSet names before Kubernetes 1.11."""
    return "".join(_SAFE_ALPHANUMS[ord(char) % len(_SAFE_ALPHANUMS)] for char in text)


def _job_owner(namespace: str, job: str, metadata: Mapping[str, Any], jobs: OwnerMap | None) -> tuple[str, str]:
    if jobs is not None and (namespace, job) in jobs:
        kind, name = jobs[(namespace, job)]
        return (kind, name) if kind and name else ("Job", job)
    match = _CRONJOB_JOB_NAME.match(job)
    created = _timestamp(metadata.get("creationTimestamp"))
    if match and created is not None:
        stamp = int(match.group("stamp"))
        # The same digits read as minutes (CronJob controller v2, ≥ 1.21) and as seconds (v1); either may fit.
        for scheduled_s in (stamp * 60, stamp):
            try:
                scheduled = datetime.fromtimestamp(scheduled_s, tz=created.tzinfo)
            except (OverflowError, OSError, ValueError):
                continue
            if scheduled - _CLOCK_SKEW <= created <= scheduled + _CRONJOB_MAX_START_DELAY:
                return "CronJob", match.group("cronjob")
    return "Job", job


def _timestamp(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else None
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None
