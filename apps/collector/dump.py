"""Offline dumps: `kubectl get nodes|pods -o json|yaml` and saved `/metrics/cadvisor` scrapes, imported as one batch.

`manage.py import_dump` is a thin wrapper around `import_dump()`. The import reads and checks every file before it
writes anything, so a bad input costs nothing; it then stores the inventory and one reading per container through the
same telemetry ingest the live sources use, records a CollectionRun (source "dump") with a NodeResult per scrape, and
refreshes the findings.

Instants. `--at` stamps every reading of the batch. Without it a reading keeps its scrape's own sample timestamp
(cAdvisor stamps its CPU series), else the time of the import. Nodes and pods are "last seen" at the batch instant
(`--at`, else the newest reading). Findings are computed as of the import when the batch is from the last hour, else
as of the batch itself — a dump saved last month shows what it said then, not an empty hour.

One import gives each container a single reading: lifetime counters (periods and throttled periods since the
container started), shown as such. A second import of later scrapes gives window deltas, reset-safe as in live
collection; re-importing the same scrapes stores nothing new.

Like the Kubernetes source, finished pods (phase Succeeded or Failed) are left out: their containers have exited.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.clusters.inventory import upsert_nodes, upsert_pods
from apps.clusters.models import Cluster, Node, SourceKind
from apps.clusters.services import cgroup_scheme_fields, register_cluster
from apps.collector.cadvisor import ScrapeError, parse_cadvisor_stream
from apps.collector.inventory import InventoryError, list_items, nodes_from_objects, pods_from_objects
from apps.collector.models import CollectionProblem, CollectionRun, NodeResult
from apps.telemetry.ingest import ingest_readings
from apps.telemetry.models import SeriesHead
from apps.telemetry.readings import CounterReading, NodeInfo, PodInfo
from apps.telemetry.signals import announce_series_stored
from apps.words import excerpt
from apps.yaml_input import YamlError, load_yaml

__all__ = [
    "DumpError",
    "ImportResult",
    "ScrapeResult",
    "format_summary",
    "import_dump",
    "load_objects",
]

MAX_PROBLEMS_STORED = 50
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
_RECENT = timedelta(hours=1)  # a batch newer than this is judged "now"; older ones as of their own instant


class DumpError(ValueError):
    """An input that cannot be imported; the message names the file (or value) and what is wrong with it."""


@dataclass
class ScrapeResult:
    """One `--metrics NODE=PATH`: what its scrape held and what was stored."""

    node: str
    path: str
    readings: int = 0
    with_cfs: int = 0
    samples_written: int = 0
    duplicates: int = 0
    lines: int = 0
    has_cfs_counters: bool = False  # False: this kubelet exposes no container_cpu_cfs_* series at all
    has_pressure: bool = False  # False: no container_pressure_cpu_* series
    problems: list[str] = field(default_factory=list)
    pod_readings: list[CounterReading] = field(default_factory=list, repr=False)  # pods with a pod-level quota
    pod_samples_written: int = 0
    spec_shares: dict[tuple[str, str, str], int] = field(default_factory=dict, repr=False)


@dataclass
class ImportResult:
    cluster: str
    cluster_created: bool
    run_id: int
    imported_at: datetime
    at: datetime | None  # the --at instant; None when the scrapes' own timestamps (or the import time) were used
    batch_at: datetime  # the instant nodes and pods were seen: --at, else the newest reading
    nodes: int = 0
    pods: int = 0
    finished_pods_skipped: int = 0
    containers: int = 0  # containers of the stored pods
    readings: int = 0
    readings_with_cfs: int = 0
    samples_written: int = 0
    duplicates: int = 0  # readings not newer than what was stored for their container: skipped
    with_previous: int = 0  # readings that follow an earlier stored one: they carry window deltas
    resets: int = 0
    not_in_pods: int = 0  # readings of containers pods.json does not list (stored as bare containers)
    scrapes: list[ScrapeResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable objects, bad scrape lines, impossible counters
    warnings: list[str] = field(default_factory=list)
    downstream: list[str] = field(default_factory=list)  # what the layers above said of the readings (findings)


# ---------------------------------------------------------------------------------------------------- reading input


def load_objects(path: Path, expected_kind: str) -> list[Mapping[str, Any]]:
    """The objects of a `kubectl get … -o json|yaml` file: a `*List`, a bare list, or one object of `expected_kind`.

    Raises DumpError for a missing or unreadable file, text that is neither JSON nor YAML, YAML the bounded loader
    refuses (apps.yaml_input: too long, aliases standing for too much), a document that is not a list of Kubernetes
    objects, or objects of another kind (e.g. pods given as --nodes).
    """
    what = f"--{expected_kind.lower()}s file {path}"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DumpError(f"{what} does not exist") from None
    except OSError as exc:
        raise DumpError(f"{what} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DumpError(
            f"{what} is not UTF-8 text (byte {exc.start}): expected `kubectl get -o json|yaml` output"
        ) from None
    if not text.strip():
        raise DumpError(f"{what} is empty")
    document: Any
    json_error: json.JSONDecodeError | None = None
    if text.lstrip()[:1] in ("{", "["):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            json_error = exc  # JSON-looking YAML (flow style) still gets its chance below
    if json_error is not None or text.lstrip()[:1] not in ("{", "["):
        try:
            document = load_yaml(text)
        except YamlError as exc:
            if not exc.syntax:
                raise DumpError(f"{what} is refused: {exc}") from None
            reason = f"JSON: {json_error}" if json_error is not None else f"YAML: {exc}"
            raise DumpError(f"{what} is neither JSON nor YAML ({reason})") from None
    try:
        objects = list_items(document)
    except InventoryError as exc:
        raise DumpError(f"{what} is not a Kubernetes list: {exc}") from None
    kinds = Counter(_kind_shown(o.get("kind")) for o in objects if o.get("kind"))
    others = {kind: n for kind, n in kinds.items() if kind != expected_kind}
    if others:
        listed = ", ".join(f"{n} {kind}" for kind, n in sorted(others.items()))
        hint = " (are --nodes and --pods swapped?)" if set(others) & {"Node", "Pod"} else ""
        raise DumpError(f"{what} holds {listed} object(s), expected {expected_kind} objects only{hint}")
    return objects


def _kind_shown(kind: Any) -> str:
    # A kind is quoted in the refusal: a short string as it is, anything else as a bounded excerpt.
    return kind if isinstance(kind, str) and len(kind) <= 60 else excerpt(kind)


def _read_scrape(
    node: str, path: Path, default_ts: datetime, at: datetime | None
) -> tuple[ScrapeResult, list[CounterReading]]:
    result = ScrapeResult(node=node, path=str(path))
    what = f"--metrics {node}={path}"
    # Streamed: a scrape of tens of megabytes is read a chunk at a time, never held whole.
    try:
        with path.open("rb") as stream:
            scrape = parse_cadvisor_stream(stream, node=node, default_ts=default_ts)
    except FileNotFoundError:
        raise DumpError(f"{what}: the file does not exist") from None
    except ScrapeError as exc:
        raise DumpError(f"{what}: {exc}") from None
    except OSError as exc:
        raise DumpError(f"{what}: the file cannot be read: {exc.strerror or exc}") from None
    readings = scrape.readings if at is None else [replace(r, ts=at) for r in scrape.readings]
    pod_readings = scrape.pod_quota_readings()
    result.pod_readings = pod_readings if at is None else [replace(r, ts=at) for r in pod_readings]
    result.readings = len(readings)
    result.with_cfs = sum(1 for r in readings if r.periods_total is not None)
    result.lines = scrape.lines
    result.has_cfs_counters = scrape.has_cfs_counters
    result.has_pressure = scrape.has_pressure
    result.spec_shares = scrape.shares_by_container
    result.problems = [f"{path.name}: {p}" for p in scrape.problems]
    if readings and not scrape.has_cfs_counters:
        result.problems.append(
            f"{path.name}: this kubelet exposes no container_cpu_cfs_* series: throttling is not reported for "
            f"node {node} (usage is still imported)"
        )
    return result, readings


# ----------------------------------------------------------------------------------------------------------- import


def import_dump(
    cluster_name: str,
    nodes_path: Path | str,
    pods_path: Path | str,
    metrics: Mapping[str, Path | str],
    at: datetime | None = None,
    *,
    now: datetime | None = None,
) -> ImportResult:
    """Import one batch of dumps into cluster `cluster_name` (created with source "dump" when missing).

    `metrics` maps node name → saved `/metrics/cadvisor` text of that node. `at` (timezone-aware) stamps every
    reading; without it the scrape's sample timestamps are used, else `now` (the import time). All files are read
    and checked first: DumpError (naming the file) means nothing was written. A scrape's node missing from the
    nodes file is a warning, its readings are kept; malformed scrape lines and unreadable objects are counted
    problems. Returns what was stored, and what the layers above said of it (the findings at a glance).
    """
    if at is not None and at.tzinfo is None:
        raise DumpError(f"--at {at.isoformat()} has no time zone: give one (e.g. {at.isoformat()}Z)")
    imported_at = now or timezone.now()

    node_objects = load_objects(Path(nodes_path), "Node")
    pod_objects = load_objects(Path(pods_path), "Pod")
    live_pods = [p for p in pod_objects if _phase(p) not in _FINISHED_PHASES]
    nodes, node_problems = nodes_from_objects(node_objects)
    pods, pod_problems = pods_from_objects(live_pods)
    scrapes: list[tuple[ScrapeResult, list[CounterReading]]] = [
        _read_scrape(node, Path(path), imported_at, at) for node, path in metrics.items()
    ]

    all_readings = [r for _, readings in scrapes for r in readings]
    pod_cgroup_readings = [r for scrape, _ in scrapes for r in scrape.pod_readings]
    batch_at = at or max((r.ts for r in (*all_readings, *pod_cgroup_readings)), default=imported_at)
    result = ImportResult(
        cluster=cluster_name,
        cluster_created=False,
        run_id=0,
        imported_at=imported_at,
        at=at,
        batch_at=batch_at,
        nodes=len(nodes),
        pods=len(pods),
        finished_pods_skipped=len(pod_objects) - len(live_pods),
        containers=sum(len(p.containers) for p in pods),
        readings=len(all_readings),
        readings_with_cfs=sum(1 for r in all_readings if r.periods_total is not None),
        scrapes=[s for s, _ in scrapes],
    )
    result.problems.extend(node_problems + pod_problems)
    result.warnings.extend(_placement_warnings(nodes, pods, scrapes))
    known = {(p.namespace, p.name, c.name) for p in pods for c in p.containers}
    result.not_in_pods = sum(1 for r in all_readings if (r.namespace, r.pod, r.container) not in known)
    if result.not_in_pods:
        result.warnings.append(
            f"{result.not_in_pods} container reading(s) belong to containers the pods file does not list "
            "(a pod started or finished between the dumps?): stored without requests and limits"
        )

    cluster = _store(cluster_name, result, nodes, pods, scrapes, imported_at)

    findings_at = imported_at if imported_at - _RECENT <= batch_at <= imported_at else batch_at
    if findings_at != imported_at:
        result.warnings.append(
            f"the batch is from {_when(batch_at)}, not the last hour: findings are computed as of that instant"
        )
    result.downstream = announce_series_stored(cluster, at=findings_at, wait=True)
    return result


def _store(
    cluster_name: str,
    result: ImportResult,
    nodes: list[NodeInfo],
    pods: list[PodInfo],
    scrapes: list[tuple[ScrapeResult, list[CounterReading]]],
    imported_at: datetime,
) -> Cluster:
    """Write the checked batch in one transaction: inventory, readings, a finished run with a result per scrape."""
    batch_at = result.batch_at
    all_readings = [r for _, readings in scrapes for r in readings]
    with transaction.atomic():
        cluster = _cluster(cluster_name, result)
        run = CollectionRun.objects.create(
            cluster=cluster, source=SourceKind.DUMP, started_at=imported_at, nodes_total=len(scrapes)
        )
        result.run_id = run.pk
        result.with_previous = _with_previous(cluster, all_readings)
        node_ids = upsert_nodes(cluster, nodes, batch_at)
        upsert_pods(cluster, pods, batch_at, node_ids)
        for scrape, readings in scrapes:
            ingested = ingest_readings(cluster, readings, now=batch_at)
            scrape.samples_written = ingested.samples_written
            scrape.duplicates = ingested.duplicates
            scrape.problems.extend(ingested.problems)
            result.samples_written += ingested.samples_written
            result.duplicates += ingested.duplicates
            result.resets += ingested.resets
            if scrape.pod_readings:
                pods_ingested = ingest_readings(cluster, scrape.pod_readings, now=batch_at)
                scrape.pod_samples_written = pods_ingested.samples_written
                scrape.problems.extend(pods_ingested.problems)
            if readings:
                Node.objects.filter(cluster=cluster, name=scrape.node).update(
                    has_cfs_counters=scrape.has_cfs_counters,
                    has_pressure=scrape.has_pressure,
                    **cgroup_scheme_fields(
                        cluster,
                        scrape.node,
                        scrape.spec_shares,
                        has_pressure=scrape.has_pressure,
                        source=f"the scrape {Path(scrape.path).name}",
                    ),
                )
            NodeResult.objects.create(
                run=run,
                node=scrape.node,
                ok=True,
                readings=scrape.readings,
                samples_written=scrape.samples_written,
                error="",
            )
            result.problems.extend(scrape.problems)
        _store_problems(run, result)
        CollectionRun.objects.filter(pk=run.pk).update(
            finished_at=timezone.now(),
            status=CollectionRun.Status.OK,
            nodes_ok=len(scrapes),
            samples_written=result.samples_written,
        )
    return cluster


def _phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def _cluster(name: str, result: ImportResult) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        try:
            cluster, _ = register_cluster(name, SourceKind.DUMP)
        except ValidationError as exc:
            messages = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise DumpError(f"cluster name {name!r} cannot be used: {messages}") from None
        result.cluster_created = True
    elif cluster.source != SourceKind.DUMP:
        result.warnings.append(
            f"cluster {name} is collected from {cluster.get_source_display()}: the dump's readings join its series "
            "(counters must be newer than what was collected to give deltas)"
        )
    return cluster


def _placement_warnings(
    nodes: list[NodeInfo], pods: list[PodInfo], scrapes: list[tuple[ScrapeResult, list[CounterReading]]]
) -> list[str]:
    """A scrape given under a node name the dump does not know, or whose pods the pods file places elsewhere."""
    warnings: list[str] = []
    node_names = {n.name for n in nodes}
    pod_node = {(p.namespace, p.name): p.node for p in pods}
    for scrape, readings in scrapes:
        if scrape.node not in node_names:
            known = ", ".join(sorted(node_names)[:5]) or "none"
            warnings.append(
                f"node {scrape.node!r} (--metrics {scrape.node}={scrape.path}) is not in the nodes file "
                f"(nodes: {known}): its readings are imported, joined to their pods by name"
            )
        elsewhere = Counter(
            pod_node[(r.namespace, r.pod)]
            for r in readings
            if pod_node.get((r.namespace, r.pod)) not in (None, "", scrape.node)
        )
        if elsewhere:
            on = ", ".join(f"{node} ({n})" for node, n in elsewhere.most_common(3))
            warnings.append(
                f"{sum(elsewhere.values())} container(s) in {scrape.path} belong to pods the pods file places on "
                f"other nodes: {on}. Is {scrape.node!r} the right node for this scrape?"
            )
    return warnings


def _with_previous(cluster: Cluster, readings: list[CounterReading]) -> int:
    """How many readings follow an earlier stored reading of their container (ingest gives those deltas)."""
    if not readings:
        return 0
    heads = {
        (ns, pod, name): ts
        for ns, pod, name, ts in SeriesHead.objects.filter(container__pod__cluster=cluster).values_list(
            "container__pod__namespace", "container__pod__name", "container__name", "ts"
        )
    }
    return sum(
        1 for r in readings if (head := heads.get((r.namespace, r.pod, r.container))) is not None and head < r.ts
    )


def _store_problems(run: CollectionRun, result: ImportResult) -> None:
    notes = [("", p) for p in result.problems] + [("", f"warning: {w}") for w in result.warnings]
    shown = notes[:MAX_PROBLEMS_STORED]
    if len(notes) > len(shown):
        shown.append(("", f"… and {len(notes) - len(shown)} more problems"))
    CollectionProblem.objects.bulk_create(
        [CollectionProblem(run=run, node=node, message=m[:2000]) for node, m in shown]
    )


# ---------------------------------------------------------------------------------------------------------- summary


def _when(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_summary(result: ImportResult, *, max_lines: int = 10) -> list[str]:
    """The import as a few lines of text for the command to print."""
    lines = [
        f"Imported into cluster {result.cluster}{' (created, source dump)' if result.cluster_created else ''} "
        f"as collection run {result.run_id} at {_when(result.imported_at)}.",
        (
            f"Readings stamped --at {_when(result.at)}."
            if result.at is not None
            else f"Readings keep their scrapes' sample timestamps (newest {_when(result.batch_at)})."
        ),
        f"Inventory: {result.nodes} node(s), {result.pods} pod(s), {result.containers} container(s)"
        + (f"; {result.finished_pods_skipped} finished pod(s) left out." if result.finished_pods_skipped else "."),
        f"Readings: {result.readings} container(s) from {len(result.scrapes)} scrape(s), "
        f"{result.readings_with_cfs} with CFS throttling counters; {result.samples_written} sample(s) stored"
        + (f", {result.duplicates} already stored (not newer) and skipped." if result.duplicates else "."),
    ]
    if result.samples_written:
        if result.with_previous:
            lines.append(
                f"  {result.with_previous} reading(s) follow an earlier one: window deltas stored"
                + (f" ({result.resets} counter reset(s))." if result.resets else ".")
            )
        else:
            lines.append(
                "  One reading per container: these are lifetime counters (since each container started). "
                "Import later scrapes of the same nodes for window deltas."
            )
    for scrape in result.scrapes:
        lines.append(
            f"  {scrape.node}: {scrape.path} — {scrape.lines} line(s), {scrape.readings} container(s), "
            f"{scrape.with_cfs} with CFS counters, {len(scrape.pod_readings)} pod cgroup(s) with a pod-level quota, "
            f"{len(scrape.problems)} problem(s)"
        )
    lines.append(f"Problems: {len(result.problems)}")
    lines.extend(f"  {p}" for p in result.problems[:max_lines])
    if len(result.problems) > max_lines:
        lines.append(f"  … and {len(result.problems) - max_lines} more (stored on the collection run)")
    for warning in result.warnings:
        lines.append(f"Warning: {warning}")
    lines.extend(result.downstream)
    return lines
