"""The Prometheus source: for clusters whose Prometheus already scrapes every kubelet's `/metrics/cadvisor` and
kube-state-metrics. Nothing is read from the cluster itself; instant queries answer everything (what is asked and
how the answers are read: convert.py).

Nodes. Prometheus answers for the whole cluster in one query, so an adapter that listed the inventory (one
`collect_once` cycle) queries every container of the cluster **once**, at the instant of its first `read_node`, and
hands each node its share — the pods kube-state-metrics places on it. A fresh adapter that never listed the
inventory (a per-node Celery task) instead asks only for that node's containers (`… and on (namespace, pod)
kube_pod_info{node="…"}`), so N node tasks do not run N cluster-wide queries. Either way a node fails on its own: a
node with running pods but no cAdvisor series at all (its kubelet not scraped, or its target down) raises
NodeScrapeError for that node, the other nodes are stored. When the cluster-wide query itself fails, every node of
the cycle fails with that reason, without asking Prometheus again per node.

`throttle_figures()` gives the kubernetes-mixin figures as Prometheus computes them, to cross-check cputune's deltas.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from django.conf import settings

from apps.clusters.info import POD_CGROUP
from apps.clusters.models import Cluster
from apps.collector.sources.base import Inventory, NodeRead, NodeScrapeError, SourceUnavailable
from apps.collector.sources.prometheus.client import PrometheusClient, PrometheusError
from apps.collector.sources.prometheus.convert import (
    COUNTER_QUERIES,
    INVENTORY_QUERIES,
    ThrottleFigures,
    figures_from_readings,
    figures_from_vectors,
    inventory_from_vectors,
    limited_containers_query,
    on_node,
    one_query,
    readings_from_vectors,
    running_pods_query,
    split_families,
    throttle_queries,
)
from apps.telemetry.readings import CounterReading

__all__ = ["PrometheusAdapter"]


@dataclass
class _PodFacts:
    """What the inventory says about a node's pods, to judge its readings."""

    running_pods: int = 0
    limited_containers: int = 0  # containers of running pods with a CPU limit


@dataclass
class _ClusterCounters:
    at: datetime
    by_node: dict[str, list[CounterReading]]
    problems: list[str]
    problems_reported: bool = False


class PrometheusAdapter:
    """The registry's source for clusters registered with `add_cluster NAME --prometheus URL` (see module docstring)."""

    def __init__(self, cluster: Cluster) -> None:
        if not cluster.prometheus_url:
            raise SourceUnavailable(
                f"cluster {cluster.name} has no Prometheus URL: "
                f"register it with `manage.py add_cluster {cluster.name} --prometheus URL`"
            )
        try:
            self.client = PrometheusClient(cluster.prometheus_url, timeout_s=float(settings.CPUTUNE_NODE_TIMEOUT))
        except ValueError as exc:
            raise SourceUnavailable(str(exc)) from exc
        self._lock = threading.Lock()
        self._pod_nodes: dict[tuple[str, str], str] | None = None  # set by inventory(): this adapter serves a cycle
        self._facts: dict[str, _PodFacts] = {}
        self._counters: _ClusterCounters | PrometheusError | None = None

    # -- the Source interface

    def inventory(self) -> Inventory:
        """Nodes and pods from kube-state-metrics. SourceUnavailable when Prometheus cannot answer, or knows no node."""
        at = datetime.now(UTC)
        try:
            vectors = {name: self.client.query(q, at) for name, q in INVENTORY_QUERIES.items()}
        except PrometheusError as exc:
            raise SourceUnavailable(str(exc)) from exc
        nodes, pods, problems = inventory_from_vectors(vectors)
        if not nodes:
            raise SourceUnavailable(
                f"Prometheus at {self.client.base_url} has no kube_node_info series: does it scrape kube-state-metrics?"
            )
        running = {
            (s.labels.get("namespace", ""), s.labels.get("pod", ""))
            for s in vectors["phase"]
            if s.labels.get("phase") == "Running"
        }
        facts: dict[str, _PodFacts] = defaultdict(_PodFacts)
        for pod in pods:
            if (pod.namespace, pod.name) in running:
                facts[pod.node].running_pods += 1
                facts[pod.node].limited_containers += sum(1 for c in pod.containers if c.limit_mcpu)
        self._facts = dict(facts)
        self._pod_nodes = {(p.namespace, p.name): p.node for p in pods}
        return Inventory(nodes=nodes, pods=pods, problems=problems)

    def read_node(self, node: str, now: datetime) -> NodeRead:
        """This node's container readings. NodeScrapeError when Prometheus cannot answer, or has no cAdvisor series
        for a node with running pods."""
        if self._pod_nodes is None:
            return self._read_single_node(node, now)
        with self._lock:  # collect_once reads nodes from a thread pool: the first one queries, the others wait
            if self._counters is None:
                self._counters = self._query_cluster(now)
            counters = self._counters
            if isinstance(counters, PrometheusError):
                raise NodeScrapeError(node, str(counters))
            cluster_problems = [] if counters.problems_reported else counters.problems
            counters.problems_reported = True
        facts = self._facts.get(node, _PodFacts())
        return self._node_read(node, counters.by_node.get(node, []), facts, counters.at, cluster_problems)

    def close(self) -> None:
        """Nothing is held open: each query is one HTTP request."""

    # -- readings

    def cluster_readings(self, at: datetime, node: str | None = None) -> tuple[list[CounterReading], list[str]]:
        """Every container's reading at `at` (or only `node`'s pods'), and problems. Raises PrometheusError."""
        queries = COUNTER_QUERIES if node is None else {k: on_node(q, node) for k, q in COUNTER_QUERIES.items()}
        vectors = split_families(self.client.query(one_query(queries), at), queries)
        return readings_from_vectors(vectors, default_ts=at, pod_nodes=self._pod_nodes)

    def throttle_figures(
        self, window_s: float | None, at: datetime | None = None
    ) -> dict[tuple[str, str, str], ThrottleFigures]:
        """Per container: lifetime CFS totals (`window_s` None: the raw counters of the newest cgroup) or, over the
        window ending at `at`, the kubernetes-mixin `sum by (namespace, pod, container) (increase(…[window]))` of each
        counter. Window figures are Prometheus' extrapolated increases: see tests/collector/test_prometheus_source.py
        for how they compare with cputune's deltas. Raises PrometheusError.
        """
        at = at or datetime.now(UTC)
        if window_s is None:
            readings, _ = self.cluster_readings(at)
            return figures_from_readings(readings)
        vectors = {name: self.client.query(query, at) for name, query in throttle_queries(window_s).items()}
        return figures_from_vectors(vectors, window_s)

    # -- internals

    def _query_cluster(self, at: datetime) -> _ClusterCounters | PrometheusError:
        try:
            readings, problems = self.cluster_readings(at)
        except PrometheusError as exc:
            return exc
        by_node: dict[str, list[CounterReading]] = defaultdict(list)
        unplaced = 0
        for reading in readings:
            if reading.node:
                by_node[reading.node].append(reading)
            else:
                unplaced += 1
        if unplaced:
            problems.append(
                f"{unplaced} container(s) have cAdvisor series but kube-state-metrics lists no running pod for them "
                "and the series carry no node label: not stored this cycle"
            )
        return _ClusterCounters(at=at, by_node=dict(by_node), problems=problems)

    def _read_single_node(self, node: str, now: datetime) -> NodeRead:
        try:
            readings, problems = self.cluster_readings(now, node)
            running = self._count(running_pods_query(node), now)
            limited = self._count(limited_containers_query(node), now)
        except PrometheusError as exc:
            raise NodeScrapeError(node, str(exc)) from exc
        readings = [r if r.node == node else _with_node(r, node) for r in readings]
        return self._node_read(node, readings, _PodFacts(running, limited), now, problems)

    def _count(self, query: str, at: datetime) -> int:
        samples = self.client.query(query, at)
        return int(samples[0].value) if samples and math.isfinite(samples[0].value) else 0

    def _node_read(
        self, node: str, readings: list[CounterReading], facts: _PodFacts, at: datetime, problems: Iterable[str]
    ) -> NodeRead:
        # The pod cgroups' own series came in the same query: stored, not reported as containers.
        pod_readings = [r for r in readings if r.container == POD_CGROUP]
        readings = [r for r in readings if r.container != POD_CGROUP]
        if not readings and facts.running_pods:
            raise NodeScrapeError(
                node,
                f"Prometheus at {self.client.base_url} has no cAdvisor series for any of the {facts.running_pods} "
                f"running pod(s) kube-state-metrics places on this node (at {at:%Y-%m-%d %H:%M:%S} UTC): "
                "is this node's kubelet /metrics/cadvisor scraped, and is its target up?",
            )
        result = NodeRead(node=node, readings=readings, pod_readings=pod_readings, problems=list(problems))
        if readings:  # no container_pressure_cpu_* series: this node's kubelet exports no CPU pressure
            result.has_pressure = any(r.pressure_waiting_seconds_total is not None for r in readings)
        if any(r.periods_total is not None for r in readings):
            result.has_cfs_counters = True
        elif readings and facts.limited_containers:
            result.has_cfs_counters = False
            result.problems.append(
                f"no container_cpu_cfs_* series in Prometheus for this node although {facts.limited_containers} of "
                "its containers have a CPU limit: its kubelet exposes none, or a relabelling rule drops them; "
                "throttling is not reported on this node (usage is still collected)"
            )
        return result


def _with_node(reading: CounterReading, node: str) -> CounterReading:
    return replace(reading, node=node)
