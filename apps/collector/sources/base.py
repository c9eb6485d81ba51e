"""What every source shares: the interface the collector calls, the values it returns, and the errors it raises.

Sources import this module and nothing of the collector above them (registry, services, tasks), so the registry can
import every source without a cycle. Plain Python: no Django, so a source's client runs without settings too.

Errors: `SourceUnavailable` when the source cannot be reached or set up at all (the run fails); `SourceError` for a
failed call (listing pods, loading credentials); `NodeScrapeError` for one node that could not be read (the collector
records it and goes on with the other nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from apps.telemetry.readings import CounterReading, NodeInfo, PodInfo

__all__ = ["Inventory", "NodeLister", "NodeRead", "NodeScrapeError", "Source", "SourceError", "SourceUnavailable"]


class SourceUnavailable(RuntimeError):
    """The source cannot be reached or configured at all (no kubeconfig, API server down): the whole run fails."""


class SourceError(Exception):
    """A source could not do what was asked; the message names the server, the request and the HTTP status."""


class NodeScrapeError(SourceError):
    """One node's kubelet could not be read; the other nodes are unaffected."""

    def __init__(self, node: str, message: str, status: int | None = None) -> None:
        super().__init__(f"node {node}: {message}")
        self.node = node
        self.status = status  # the HTTP status when there was an answer, else None (timeout, refused, garbage)


@dataclass
class Inventory:
    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class NodeRead:
    """What reading one node gave: its containers' readings, facts about the node, and non-fatal problems."""

    node: str
    readings: list[CounterReading] = field(default_factory=list)
    # The pod cgroups' own counters (container POD_CGROUP), for pods with a pod-level quota: stored, never reported
    # as containers.
    pod_readings: list[CounterReading] = field(default_factory=list)
    node_info: NodeInfo | None = None  # facts only this read knows (CPU manager policy, slice size…)
    has_cfs_counters: bool | None = None
    has_pressure: bool | None = None  # whether CPU pressure (PSI) series came; None: this source cannot tell
    problems: list[str] = field(default_factory=list)
    # (namespace, pod, container) → container_spec_cpu_shares: with the stored requests it tells the cgroup version
    # and weight mapping (apps/clusters/cgroup_scheme.py).
    spec_shares: dict[tuple[str, str, str], int] = field(default_factory=dict)
    cgroup_version: int | None = None  # when the source knows it first-hand (the lab)
    weight_mapping: str = ""  # likewise: the mapping the source itself writes


class Source(Protocol):
    """A source yields the plain values of `apps.telemetry.readings`; the collector services store them."""

    def inventory(self) -> Inventory: ...

    def read_node(self, node: str, now: datetime) -> NodeRead:
        """Read one node; raise an exception with a clear message when the node cannot be read at all."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class NodeLister(Protocol):
    """A source that lists nodes and pods apart (the Kubernetes API): a pod list that fails then costs the cycle
    its pod changes, not its node reads. A source without these methods is listed whole by `inventory()`."""

    def list_nodes(self) -> tuple[list[NodeInfo], list[str]]: ...

    def list_pods(self) -> tuple[list[PodInfo], list[str]]: ...
