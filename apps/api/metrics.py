"""/metrics: cputune's findings and collection health in the Prometheus text format, read from the database at scrape
time by a Collector built per request (no process-global registry: every web worker answers the same)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from apps.advisor.models import Window
from apps.advisor.pressure import reads_zero_while_throttled
from apps.clusters.visibility import EVERYTHING, Visibility

from .selectors import collection_health, metric_findings

CONTAINER_LABELS = ["cluster", "namespace", "pod", "container"]


class CputuneCollector:
    """Per container, for the default window (1h): throttle ratio, p95 usage, limit and request in millicores, and
    one info-style series (value 1) per recommendation, labelled with its kind and severity. Per cluster: the last
    successful collection, and the last run's node outcomes and duration. Values that are unknown are left out,
    never exported as 0. A prometheus_client Collector: pass it to generate_latest().

    Advice is never a label of the figures: a label value that changes with the advice would start a new ratio
    series (and end the old one) each time the advice changes.
    """

    def __init__(self, window: str = Window.HOUR, visibility: Visibility = EVERYTHING) -> None:
        self.window = window
        self.visibility = visibility

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ratio = GaugeMetricFamily(
            "cputune_container_throttle_ratio",
            f"Share of CFS periods in which the container was throttled over the {self.window} window (0-1).",
            labels=CONTAINER_LABELS,
        )
        advice = GaugeMetricFamily(
            "cputune_container_recommendation",
            f"1 for each recommendation cputune makes for the container over the {self.window} window, by kind and "
            "severity; join on the container labels to alert on advice.",
            labels=[*CONTAINER_LABELS, "kind", "severity"],
        )
        usage = GaugeMetricFamily(
            "cputune_container_cpu_usage_p95_millicores",
            f"95th percentile of the container's CPU usage over the {self.window} window, in millicores.",
            labels=CONTAINER_LABELS,
        )
        limit = GaugeMetricFamily(
            "cputune_container_cpu_limit_millicores",
            "The container's CPU limit, in millicores.",
            labels=CONTAINER_LABELS,
        )
        request = GaugeMetricFamily(
            "cputune_container_cpu_request_millicores",
            "The container's CPU request, in millicores.",
            labels=CONTAINER_LABELS,
        )
        waiting_family = GaugeMetricFamily(
            "cputune_container_cpu_pressure_waiting_ratio",
            f"Share of the time some task of the container waited for CPU (PSI some) over the {self.window} window "
            "(0-1); absent where pressure is not collected or reads 0 on a throttled container (not measured).",
            labels=CONTAINER_LABELS,
        )
        for (
            cluster,
            namespace,
            pod,
            container,
            recommendations,
            ratio_value,
            p95,
            limit_mcpu,
            request_mcpu,
            waiting,
            throttled_s,
        ) in metric_findings(self.window, self.visibility):
            labels = [cluster, namespace, pod, container]
            if ratio_value is not None:
                ratio.add_metric(labels, ratio_value)
            # One series per kind: a duplicate label set would make the whole scrape invalid.
            seen: set[str] = set()
            for rec in recommendations or []:
                if rec["kind"] not in seen:
                    seen.add(rec["kind"])
                    advice.add_metric([*labels, rec["kind"], rec["severity"]], 1)
            if p95 is not None:
                usage.add_metric(labels, p95)
            if limit_mcpu is not None:
                limit.add_metric(labels, limit_mcpu)
            if request_mcpu is not None:
                request.add_metric(labels, request_mcpu)
            if waiting is not None and not reads_zero_while_throttled(waiting, throttled_s):
                waiting_family.add_metric(labels, waiting)
        yield from (ratio, advice, usage, limit, request, waiting_family)
        yield from self._health()

    def _health(self) -> Iterator[GaugeMetricFamily]:
        last_success = GaugeMetricFamily(
            "cputune_collection_last_success_timestamp_seconds",
            "Unix time at which the last collection that stored data (status ok or partial) finished.",
            labels=["cluster"],
        )
        nodes = GaugeMetricFamily(
            "cputune_collection_last_run_nodes",
            "Nodes read in the last finished collection run, by outcome (ok or failed).",
            labels=["cluster", "outcome"],
        )
        duration = GaugeMetricFamily(
            "cputune_collection_last_run_duration_seconds",
            "Wall time of the last finished collection run, in seconds.",
            labels=["cluster"],
        )
        for health in collection_health(self.visibility):
            if health.last_success is not None:
                last_success.add_metric([health.cluster], health.last_success.timestamp())
            if health.last_run_nodes_ok is not None:
                nodes.add_metric([health.cluster, "ok"], health.last_run_nodes_ok)
            if health.last_run_nodes_failed is not None:
                nodes.add_metric([health.cluster, "failed"], health.last_run_nodes_failed)
            if health.last_run_duration_s is not None:
                duration.add_metric([health.cluster], health.last_run_duration_s)
        yield from (last_success, nodes, duration)
