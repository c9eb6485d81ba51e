"""Lab scenarios: a YAML file naming the pods a kubelet would run on this machine, parsed into frozen values.

No Django import. The format (every key but ``pods`` optional; see scenarios/default.yaml for a full example)::

    description: what this scenario is for
    node:
      name: lab-node          # default: this machine's hostname
      allocatable: "2"        # CPU quantity; default: every CPU of this machine
    period_us: 100000         # the kubelet's cpuCFSQuotaPeriod
    pods:
      - namespace: shop
        name: checkout-5d9c7b8f4-x2k4q
        workload_kind: Deployment   # the pod's owner; leave out for a bare pod
        workload_name: checkout
        containers:
          - name: app
            request: 250m           # CPU request; when left out and a limit is set, it defaults to the limit
            limit: 250m             # CPU limit
            workload: {kind: burner, params: {processes: 1}}   # or just `workload: idle`

QoS classes are derived from CPU alone (the lab has no memory controller): BestEffort when no container has a
request or a limit, Guaranteed when every container has a limit equal to its request, Burstable otherwise. A real pod
also needs memory requests equal to limits to be Guaranteed.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from apps.clusters.kubelet import DEFAULT_PERIOD_US, cpu_quantity_to_mcpu
from apps.lab.workloads import ParamValue, WorkloadError, normalize_params
from apps.words import excerpt
from apps.yaml_input import YamlError, load_yaml

DEFAULT_SCENARIO = Path(__file__).resolve().parent / "scenarios" / "default.yaml"

QOS_GUARANTEED = "Guaranteed"
QOS_BURSTABLE = "Burstable"
QOS_BEST_EFFORT = "BestEffort"

MAX_SCENARIO_CHARS = 1024 * 1024  # the pods one machine runs: default.yaml is a few kB

# The kubelet accepts CFS periods from 1 ms to 1 s (cpuCFSQuotaPeriod validation).
MIN_PERIOD_US = 1_000
MAX_PERIOD_US = 1_000_000

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_OWNER_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")

_TOP_KEYS = {"description", "node", "period_us", "pods"}
_NODE_KEYS = {"name", "allocatable"}
_POD_KEYS = {"namespace", "name", "workload_kind", "workload_name", "containers"}
_CONTAINER_KEYS = {"name", "request", "limit", "workload"}
_WORKLOAD_KEYS = {"kind", "params"}


class ScenarioError(ValueError):
    """A scenario file is unreadable or invalid. ``source`` is the file, ``field`` the offending key's path."""

    def __init__(self, source: str, field: str, message: str) -> None:
        super().__init__(f"{source}: {field}: {message}")
        self.source = source
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Workload:
    """What runs in a container: a kind from apps.lab.workloads.KINDS and its parameters, defaults filled in."""

    kind: str
    params: Mapping[str, ParamValue]


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    request_mcpu: int | None  # None: no CPU request (2 shares)
    limit_mcpu: int | None  # None: no CPU limit (no quota)
    workload: Workload


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    workload_kind: str  # the owner: Deployment, StatefulSet, DaemonSet, Job, CronJob, …; "" for a bare pod
    workload_name: str
    containers: tuple[Container, ...]

    @property
    def uid(self) -> str:
        """The pod's uid: stable for a namespace/name, so cgroup paths survive a lab restart."""
        return pod_uid(self.namespace, self.name)

    @property
    def qos_class(self) -> str:
        """Guaranteed, Burstable or BestEffort, from the containers' CPU requests and limits (see module doc)."""
        if all(c.request_mcpu is None and c.limit_mcpu is None for c in self.containers):
            return QOS_BEST_EFFORT
        if all(c.limit_mcpu is not None and c.request_mcpu == c.limit_mcpu for c in self.containers):
            return QOS_GUARANTEED
        return QOS_BURSTABLE

    @property
    def request_mcpu(self) -> int:
        """Sum of the containers' CPU requests in millicores (0 when none has one)."""
        return sum(c.request_mcpu or 0 for c in self.containers)

    @property
    def limit_mcpu(self) -> int | None:
        """Sum of the containers' CPU limits in millicores, or None when any container has no limit (no pod quota)."""
        if any(c.limit_mcpu is None for c in self.containers):
            return None
        return sum(c.limit_mcpu or 0 for c in self.containers)


@dataclass(frozen=True, slots=True)
class Scenario:
    source: str  # the file it came from, for messages
    description: str
    node_name: str  # "" means this machine's hostname
    allocatable_mcpu: int | None  # None means every CPU of this machine
    period_us: int
    pods: tuple[Pod, ...]

    @property
    def request_mcpu(self) -> int:
        """Sum of every pod's CPU requests in millicores (the lab does not refuse pods that exceed allocatable)."""
        return sum(p.request_mcpu for p in self.pods)


def pod_uid(namespace: str, name: str) -> str:
    """A deterministic pod uid: uuid5 (URL namespace) of ``cputune-lab://<namespace>/<name>``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cputune-lab://{namespace}/{name}"))


def container_id(pod_uid: str, container_name: str, boot: int, restarts: int = 0) -> str:
    """A runtime-style container id: 64 hex digits of sha256(pod uid/container name/boot[/restarts]).

    ``boot`` counts lab starts and ``restarts`` the container's restarts within one (``lab set --processes``), so a
    restarted container gets a new id (and a new cgroup), as with a real runtime.
    """
    suffix = f"/{restarts}" if restarts else ""
    return hashlib.sha256(f"{pod_uid}/{container_name}/{boot}{suffix}".encode()).hexdigest()


def load_scenario(path: str | Path | None = None) -> Scenario:
    """Read and validate a scenario file (default: scenarios/default.yaml). Raises ScenarioError."""
    path = Path(path) if path is not None else DEFAULT_SCENARIO
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(path), "(file)", f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(str(path), "(file)", f"is not UTF-8 text: {exc}") from None
    return parse_scenario(text, source=str(path))


def parse_scenario(text: str, source: str = "<string>") -> Scenario:
    """Validate scenario YAML text. Raises ScenarioError naming ``source`` and the offending field."""
    try:
        data = load_yaml(text, max_chars=MAX_SCENARIO_CHARS)
    except YamlError as exc:
        raise ScenarioError(source, "(yaml)", f"not valid YAML: {exc}" if exc.syntax else str(exc)) from None
    top = _mapping(source, "(top level)", data, _TOP_KEYS)
    description = _optional_str(source, "description", top.get("description"))
    node = _mapping(source, "node", top.get("node", {}) or {}, _NODE_KEYS)
    node_name = _optional_str(source, "node.name", node.get("name"))
    allocatable_mcpu = None
    if node.get("allocatable") is not None:
        allocatable_mcpu = quantity_mcpu(source, "node.allocatable", node["allocatable"])
    period_us = top.get("period_us", DEFAULT_PERIOD_US)
    if isinstance(period_us, bool) or not isinstance(period_us, int) or not MIN_PERIOD_US <= period_us <= MAX_PERIOD_US:
        raise ScenarioError(
            source,
            "period_us",
            f"{excerpt(period_us)} is not a whole number of µs from {MIN_PERIOD_US} to {MAX_PERIOD_US}",
        )
    raw_pods = top.get("pods")
    if not isinstance(raw_pods, list) or not raw_pods:
        raise ScenarioError(source, "pods", f"must be a non-empty list of pods, got {excerpt(raw_pods)}")
    pods: list[Pod] = []
    seen: dict[tuple[str, str], str] = {}
    for index, raw_pod in enumerate(raw_pods):
        field = f"pods[{index}]"
        pod = _pod(source, field, raw_pod)
        key = (pod.namespace, pod.name)
        if key in seen:
            raise ScenarioError(source, field, f"pod {pod.namespace}/{pod.name} is already defined at {seen[key]}")
        seen[key] = field
        pods.append(pod)
    return Scenario(
        source=source,
        description=description,
        node_name=node_name,
        allocatable_mcpu=allocatable_mcpu,
        period_us=period_us,
        pods=tuple(pods),
    )


def _pod(source: str, field: str, raw: Any) -> Pod:
    data = _mapping(source, field, raw, _POD_KEYS)
    namespace = _name(source, f"{field}.namespace", data.get("namespace"), _DNS_LABEL, "a DNS label (e.g. shop)")
    name = _name(source, f"{field}.name", data.get("name"), _DNS_SUBDOMAIN, "a DNS subdomain (e.g. web-7d9f-x2k4q)")
    workload_kind = _optional_str(source, f"{field}.workload_kind", data.get("workload_kind"))
    workload_name = _optional_str(source, f"{field}.workload_name", data.get("workload_name"))
    if workload_kind and not _OWNER_KIND.match(workload_kind):
        raise ScenarioError(
            source, f"{field}.workload_kind", f"{excerpt(workload_kind)} is not a kind (e.g. Deployment)"
        )
    if bool(workload_kind) != bool(workload_name):
        raise ScenarioError(source, field, "workload_kind and workload_name go together: give both or neither")
    raw_containers = data.get("containers")
    if not isinstance(raw_containers, list) or not raw_containers:
        raise ScenarioError(source, f"{field}.containers", f"must be a non-empty list, got {excerpt(raw_containers)}")
    containers: list[Container] = []
    names: set[str] = set()
    for index, raw_container in enumerate(raw_containers):
        container_field = f"{field}.containers[{index}]"
        container = _container(source, container_field, raw_container)
        if container.name in names:
            raise ScenarioError(
                source, container_field, f"container name {excerpt(container.name)} is used twice in the pod"
            )
        names.add(container.name)
        containers.append(container)
    return Pod(namespace, name, workload_kind, workload_name, tuple(containers))


def _container(source: str, field: str, raw: Any) -> Container:
    data = _mapping(source, field, raw, _CONTAINER_KEYS)
    name = _name(source, f"{field}.name", data.get("name"), _DNS_LABEL, "a DNS label (e.g. app)")
    request_mcpu = (
        quantity_mcpu(source, f"{field}.request", data["request"]) if data.get("request") is not None else None
    )
    limit_mcpu = quantity_mcpu(source, f"{field}.limit", data["limit"]) if data.get("limit") is not None else None
    if request_mcpu is None and limit_mcpu is not None:
        request_mcpu = limit_mcpu  # the API server's defaulting: a limit without a request requests the limit
    if request_mcpu is not None and limit_mcpu is not None and request_mcpu > limit_mcpu:
        raise ScenarioError(
            source,
            f"{field}.request",
            f"{excerpt(data['request'])} is more than the limit {excerpt(data['limit'])} (the API refuses it)",
        )
    workload = _workload(source, f"{field}.workload", data.get("workload"))
    return Container(name, request_mcpu, limit_mcpu, workload)


def _workload(source: str, field: str, raw: Any) -> Workload:
    if isinstance(raw, str):
        raw = {"kind": raw}
    data = _mapping(source, field, raw, _WORKLOAD_KEYS)
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ScenarioError(source, f"{field}.kind", f"must name a workload kind, got {excerpt(kind)}")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise ScenarioError(source, f"{field}.params", f"must be a mapping, got {excerpt(params)}")
    try:
        normalized = normalize_params(kind, params)
    except WorkloadError as exc:
        raise ScenarioError(source, field, str(exc)) from None
    return Workload(kind, MappingProxyType(normalized))


def _mapping(source: str, field: str, raw: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ScenarioError(source, field, f"must be a mapping, got {type(raw).__name__} {excerpt(raw)}")
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        raise ScenarioError(source, field, f"unknown key {excerpt(unknown[0])} (allowed: {', '.join(sorted(allowed))})")
    return raw


def _optional_str(source: str, field: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ScenarioError(source, field, f"must be text, got {excerpt(raw)}")
    return raw


def _name(source: str, field: str, raw: Any, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(raw, str) or not pattern.match(raw):
        raise ScenarioError(source, field, f"{excerpt(raw)} is not {what}")
    return raw


def quantity_mcpu(source: str, field: str, raw: Any, zero: str = "leave the key out instead (zero means none)") -> int:
    """A CPU quantity (``250m``, ``1``, ``1.5``) in millicores, as a scenario and ``lab set`` take it.

    Raises ScenarioError naming ``source`` and ``field`` for anything else; zero too, with ``zero`` saying what to do.
    """
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ScenarioError(source, field, f"{excerpt(raw)} is not a CPU quantity (expected e.g. 250m, 2, 0.5)")
    try:
        mcpu = cpu_quantity_to_mcpu(raw)
    except ValueError as exc:
        raise ScenarioError(source, field, str(exc)) from None
    if mcpu == 0:
        raise ScenarioError(source, field, f"{excerpt(raw)} is zero: {zero}")
    return mcpu
