"""What change detection costs a collection cycle: the same cycles with detection on (A) and off (B), in one process.

    python benchmarks/bench_changes.py [--nodes 1000] [--rounds 5] [--profile]

Issue: "ingest and refresh benchmarks show the detection adds no more than 10 % to a cycle". Against real PostgreSQL:
the database cputune_bench_changes on DATABASE_URL's server (BENCH_CHANGES_DATABASE_URL to name another), created if
missing and emptied — the script refuses one whose name lacks "bench".

The cluster is built through the product's own writes: `upsert_nodes` / `upsert_pods` with NodeInfo and PodInfo, and
`ingest_readings` with CounterReading. --nodes nodes (default 1,000) × --pods-per-node pods (15) × --containers-per-pod
containers (2: app and envoy) = 30,000 containers: one DaemonSet pod per node, the other pods in Deployments of 2–12
replicas and StatefulSets of 3 (every eighth workload), spread over 20 namespaces; limits, usage and throttling from
bench_pages' patterns. Every tenth container's thread count steps to a new level at its own minute, about 0.1 % of
the containers a minute.

Setup: an hour of one-minute cycles with detection on, as production runs them (inventory with that minute's changes,
one sample per container, and a refresh of the 1 h window every ten minutes), so the timed cycles start from a steady
state: 60 samples per container in the 1 h window, the last hour's changes and groups stored, rollouts still open
(15 min), the advice that resizes followed still waiting for its verdict (1 h). Then one untimed cycle each way, then
--rounds cycles each way, in the order A B B A A B …: both ends of every pair of rounds see the same drift (the
current hour's rollup grows by a minute each cycle), and the timed cycles stay within minutes 10–59 of one hour (the
refresh rolls up two hours in the first ten minutes).

One cycle, timed per phase:
- inventory: upsert_nodes then upsert_pods of the whole cluster (each in its transaction with the locks the
  collector takes), with that minute's changes: --resize-percent of the pods (1 %) resized in place (limit and
  request; with probability --follow-share, 0.5, to the 1 h finding's suggested limit where there is one, so that
  the refresh has followed advice to note and settle), one Deployment rolled out (new pod names, new image; every
  other workload a new limit too), one StatefulSet rolled out in place (the same), --restart-percent of
  the containers (0.2 %) restarted, --kernel-nodes nodes (1) rebooted into a new kernel (their containers restart);
- ingest: a new sample for every container, one ingest_readings call per node as collect_node makes it (the ingest
  has no detection of its own: it is timed so that the cycle is whole, and A and B run the same code);
- refresh: prepare_refresh and refresh_part over the whole cluster for the 1 h window, as the per-cycle refresh does.

Each cycle is at its own minute and draws its changes from a generator seeded by that minute, so A and B cycles
change different pods but as many: every round starts from an equivalent state, with as much to detect, whichever
kind it is. What B leaves unrecorded (its pods' new values are stored, not compared) is not seen again by the next
A, except thread levels: a level that became visible in a B cycle is recorded by the next A refresh, so an A that
follows a B records up to two cycles' thread levels (the measure errs against detection).

B switches detection off by replacing, in the modules where they are looked up, every detection function with a
no-op: in apps.clusters.inventory `stored_kernels`, `record_kernel_changes` (which also groups the kernel changes),
`new_pod_keys` and `record_changes` (the ORM path's, unused on PostgreSQL), `record_rollout_changes`, `group_changes`,
and the two statements the PostgreSQL path executes, `NEW_PODS_SQL` (the new pods a rollout may have made) and
`RECORD_CHANGES_SQL` (trivial SELECTs instead: no new pod, nothing inserted); in apps.advisor.services
`note_followed_advice` (called by prepare_refresh, and by refresh_part when it found thread levels),
`settle_followed_advice` and `record_thread_levels`. The script checks that a B cycle leaves
the ContainerChange and ChangeAdvice tables as they were, and prints what each A cycle recorded.

In A cycles the same functions (and the statements, through connection.execute_wrapper) are wrapped with a timer:
the time inside detection is printed as well, a figure that the machine's noise moves less than A − B.
--profile runs one more A cycle with pyinstrument over the inventory and the refresh and prints both profiles.

Each phase is timed in wall seconds and in CPU seconds of this process and its PostgreSQL backend: on a shared
machine other work stretches wall time by tens of percent from one cycle to the next, CPU time much less.

Prints per phase and for the whole cycle the medians with and without detection and their ratios, A − B within each
pair of consecutive cycles (the two ran under about the same load: the least noisy comparison), and JSON lines
{"name", "value", "unit", "target", "baseline"} for benchmarks/run_all.py: change_detection_cycle_ratio (wall),
change_detection_cycle_cpu_ratio, change_detection_share_of_cycle (time inside detection / cycle, A), and each phase's
wall and CPU seconds with "detection off" as the baseline. Names without a size are the default 1,000-node cluster's;
another size is named in them. Target: cycle ratio ≤ 1.10.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from common import BENCH_SECRET_KEY, ensure_database  # noqa: E402 - next to this script

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "0")  # no query log: it would be part of what is measured
os.environ.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
# Its own database on DATABASE_URL's server (it empties it; run_all.py hands every script cputune_bench), and Redis
# db 11 (nothing is sent there: no Celery task runs in this process).
_SERVER = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench").rsplit("/", 1)[0]
os.environ["DATABASE_URL"] = os.environ.get("BENCH_CHANGES_DATABASE_URL", f"{_SERVER}/cputune_bench_changes")
os.environ["REDIS_URL"] = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0] + "/11"

from bench_pages import limit_of, usage_of  # noqa: E402 - the same container patterns as the pages benchmark

CLUSTER = "bench-changes"
NAMESPACES = 20
TARGET_RATIO = 1.10
DEFAULT_NODES = 1000
SETUP_MINUTES = 60
SETUP_REFRESH_EVERY = 10
PHASES = ("inventory", "ingest", "refresh")
CONTAINER_NAMES = ("app", "envoy", "logs")
KERNEL_BEFORE, KERNEL_AFTER = "5.4.0-1018-gke", "5.15.0-1049-gke"

# What B switches off: module → names looked up there at call time (see the docstring).
INVENTORY = "apps.clusters.inventory"
SERVICES = "apps.advisor.services"
OFF: dict[tuple[str, str], Callable[..., Any]] = {
    (INVENTORY, "stored_kernels"): lambda *a, **k: {},
    (INVENTORY, "record_kernel_changes"): lambda *a, **k: 0,
    (INVENTORY, "new_pod_keys"): lambda *a, **k: set(),
    (INVENTORY, "record_changes"): lambda *a, **k: 0,
    (INVENTORY, "record_rollout_changes"): lambda *a, **k: 0,
    (INVENTORY, "group_changes"): lambda *a, **k: 0,
    (SERVICES, "note_followed_advice"): lambda *a, **k: 0,
    (SERVICES, "settle_followed_advice"): lambda *a, **k: 0,
    (SERVICES, "record_thread_levels"): lambda *a, **k: set(),
}
# The statements the PostgreSQL upsert executes for detection (looked up in apps.clusters.inventory) and what B
# executes instead: as trivial, with the same parameters; the new-pod lookup answers no pod.
SQL_OFF = {
    "NEW_PODS_SQL": "SELECT ''::text, ''::text WHERE %(cluster)s::bigint IS NULL",
    "RECORD_CHANGES_SQL": "SELECT %(cluster)s::bigint, %(now)s::timestamptz",
}


# --- the simulated cluster -------------------------------------------------------------------------------------------


@dataclass
class Series:
    """One container's cumulative counters, advanced a minute at a time."""

    index: int
    app: bool
    periods: int = 0
    throttled: int = 0
    throttled_s: float = 0.0
    usage_s: float = 0.0


@dataclass
class Workload:
    namespace: str
    kind: str
    name: str
    number: int
    revision: int = 1
    limit_step: int = 0  # added to the app container's limit by rollouts


@dataclass
class Cluster:
    """The cluster as its source would list it now; changed a minute at a time by `evolve`."""

    nodes: list[Any]  # NodeInfo
    pods: dict[tuple[str, str], Any]  # (namespace, name) → PodInfo
    workloads: list[Workload]
    series: dict[tuple[str, str, str], Series] = field(default_factory=dict)
    next_index: int = 0
    rollouts: int = 0

    def series_of(self, key: tuple[str, str, str], app: bool) -> Series:
        found = self.series.get(key)
        if found is None:
            found = self.series[key] = Series(self.next_index, app)
            self.next_index += 1
        return found


def pod_hash(workload: Workload) -> str:
    return f"{workload.number:05x}{workload.revision:04x}"[-9:]


def containers_of(workload: Workload, per_pod: int) -> tuple[Any, ...]:
    """The workload's pod template: every replica alike (a resize in place makes one differ)."""
    from apps.clusters.info import ContainerInfo

    limit = limit_of(workload.number) + workload.limit_step
    app = ContainerInfo(
        name="app",
        request_mcpu=limit // 2,
        limit_mcpu=limit,
        image=f"registry.example/{workload.name}:1.{workload.revision}",
        cpu_env=(("GOMAXPROCS", "2"),) if workload.number % 3 == 0 else (),
    )
    sidecars = tuple(
        ContainerInfo(name=name, request_mcpu=100, limit_mcpu=200, image=f"registry.example/{name}:2.4")
        for name in CONTAINER_NAMES[1:per_pod]
    )
    return (app, *sidecars)


def pod_of(workload: Workload, replica: int, node: str, per_pod: int) -> Any:
    from apps.clusters.info import PodInfo

    if workload.kind == "Deployment":
        name = f"{workload.name}-{pod_hash(workload)}-{replica:05d}"
    elif workload.kind == "StatefulSet":
        name = f"{workload.name}-{replica}"
    else:
        name = f"{workload.name}-{node.rsplit('-', 1)[1]}"
    return PodInfo(
        namespace=workload.namespace,
        name=name,
        uid=f"{name}-{workload.revision}",
        node=node,
        qos_class="Burstable",
        workload_kind=workload.kind,
        workload_name=workload.name,
        containers=containers_of(workload, per_pod),
    )


def build_cluster(nodes: int, pods_per_node: int, per_pod: int) -> Cluster:
    """One DaemonSet pod per node; the other slots filled with Deployments (2–12 replicas) and StatefulSets (3),
    replicas on consecutive nodes."""
    from apps.clusters.info import NodeInfo

    node_infos = [
        NodeInfo(
            name=f"bench-node-{n:05d}",
            capacity_mcpu=16_000,
            allocatable_mcpu=15_500,
            kernel_version=KERNEL_BEFORE,
            os_image="Container-Optimized OS from Google",
            container_runtime="containerd://1.7.15",
            kubelet_version="v1.30.5",
            cpu_manager_policy="none",
        )
        for n in range(nodes)
    ]
    daemonset = Workload("kube-system", "DaemonSet", "node-agent", 0)
    workloads = [daemonset]
    pods = {}
    for node in node_infos:
        pod = pod_of(daemonset, 0, node.name, per_pod)
        pods[(pod.namespace, pod.name)] = pod
    slots = [node_infos[n].name for _ in range(1, pods_per_node) for n in range(nodes)]
    at = 0
    number = 1
    while at < len(slots):
        kind = "StatefulSet" if number % 8 == 7 else "Deployment"
        replicas = 3 if kind == "StatefulSet" else (2, 3, 4, 6, 8, 12)[number % 6]
        workload = Workload(f"team-{number % NAMESPACES:02d}", kind, f"svc-{number:05d}", number)
        workloads.append(workload)
        for replica, node_name in enumerate(slots[at : at + replicas]):
            pod = pod_of(workload, replica, node_name, per_pod)
            pods[(pod.namespace, pod.name)] = pod
        at += replicas
        number += 1
    return Cluster(node_infos, pods, workloads)


@dataclass
class Done:
    """What `evolve` changed in the listed inventory."""

    resized: int = 0
    following: int = 0
    rolled_out: list[str] = field(default_factory=list)
    restarted: int = 0
    rebooted: int = 0


def evolve(
    state: Cluster, minute: int, args: argparse.Namespace, suggest: Callable[[list[tuple[str, str]]], dict]
) -> Done:
    """This minute's changes (drawn from a generator seeded by the minute): resizes, a rollout, restarts, reboots."""
    rng = random.Random(args.seed * 100_003 + minute)
    done = Done()
    keys = sorted(k for k, p in state.pods.items() if p.workload_kind != "DaemonSet")
    chosen = rng.sample(keys, max(1, round(len(state.pods) * args.resize_percent / 100)))
    suggested = suggest(chosen)
    for key in chosen:
        pod = state.pods[key]
        app, *others = pod.containers
        limit = app.limit_mcpu or 500
        advice = suggested.get(key)
        if advice is not None and advice[0] != limit and rng.random() < args.follow_share:
            new_limit, new_request = advice[0], advice[1] or app.request_mcpu
            done.following += 1
        else:
            new_limit = max(100, limit + rng.choice((-100, 200, 300)))
            new_request = new_limit // 2
        state.pods[key] = replace(
            pod, containers=(replace(app, limit_mcpu=new_limit, request_mcpu=new_request), *others)
        )
        done.resized += 1
    # One Deployment rolled out with new pod names on the same nodes, one StatefulSet in place: a new image, and for
    # every other workload (by its number, not the minute: A and B cycles get as many) a new limit too.
    deployments = [w for w in state.workloads if w.kind == "Deployment"]
    statefulsets = [w for w in state.workloads if w.kind == "StatefulSet"]
    rolled = [deployments[minute % len(deployments)]]
    if statefulsets:
        rolled.append(statefulsets[minute % len(statefulsets)])
    for workload in rolled:
        old = {k: p for k, p in state.pods.items() if k[0] == workload.namespace and p.workload_name == workload.name}
        workload.revision += 1
        if workload.number % 2 == 1:
            workload.limit_step += 100
        for replica, (key, pod) in enumerate(sorted(old.items())):
            del state.pods[key]
            new = pod_of(workload, replica, pod.node, args.containers_per_pod)
            state.pods[(new.namespace, new.name)] = new
        done.rolled_out.append(f"{workload.kind} {workload.namespace}/{workload.name} ({len(old)} pods)")
    # Restarts here and there.
    containers = sorted((k, c.name) for k, p in state.pods.items() for c in p.containers)
    for key, name in rng.sample(containers, round(len(containers) * args.restart_percent / 100)):
        _restart(state, key, {name})
        done.restarted += 1
    # Nodes rebooted into a new kernel: every container they run restarts.
    for n in range(args.kernel_nodes):
        node = state.nodes[(minute * args.kernel_nodes + n) % len(state.nodes)]
        kernel = KERNEL_AFTER if node.kernel_version == KERNEL_BEFORE else KERNEL_BEFORE
        state.nodes[state.nodes.index(node)] = replace(node, kernel_version=kernel)
        for key in [k for k, p in state.pods.items() if p.node == node.name]:
            _restart(state, key, None)
        done.rebooted += 1
    return done


def _restart(state: Cluster, key: tuple[str, str], names: set[str] | None) -> None:
    pod = state.pods[key]
    containers = tuple(
        replace(c, restarts=c.restarts + 1) if names is None or c.name in names else c for c in pod.containers
    )
    state.pods[key] = replace(pod, containers=containers)


def readings_by_node(state: Cluster, minute: int, ts: datetime) -> dict[str, list[Any]]:
    """Every listed container's reading at `minute` (its counters advanced by one minute), per node."""
    from apps.telemetry.readings import CounterReading

    by_node: dict[str, list[Any]] = defaultdict(list)
    for (namespace, name), pod in state.pods.items():
        for container in pod.containers:
            series = state.series_of((namespace, name, container.name), container.name == "app")
            i = series.index
            wobble = 0.8 + ((i * 7919 + minute * 104_729) % 41) / 100
            demand = usage_of(i, minute // 60) * wobble * (1.0 if series.app else 0.08)
            limit = container.limit_mcpu
            used = min(demand, limit) if limit else demand
            ratio = max(0.0, (used / limit - 0.6) / 0.4) * 0.8 if limit else 0.0
            throttled = round(600 * ratio)
            series.periods += 600
            series.throttled += throttled
            series.throttled_s += throttled * 0.03
            series.usage_s += used / 1000 * 60
            base = 4 + i % 40
            steps = i % 10 == 0 and minute >= (i // 10) % 90
            by_node[pod.node].append(
                CounterReading(
                    namespace=namespace,
                    pod=name,
                    container=container.name,
                    ts=ts,
                    periods_total=series.periods,
                    throttled_periods_total=series.throttled,
                    throttled_seconds_total=round(series.throttled_s, 3),
                    usage_seconds_total=round(series.usage_s, 3),
                    threads=2 * base + 8 if steps else base,
                    period_us=100_000,
                    node=pod.node,
                )
            )
    return by_node


# --- one cycle -------------------------------------------------------------------------------------------------------


@dataclass
class Cycle:
    minute: int
    detection: bool
    seconds: dict[str, float]  # wall
    cpu: dict[str, float]  # CPU: this process and its PostgreSQL backend
    inside: dict[str, float]  # seconds spent inside each detection function (A cycles)
    recorded: Counter[str]  # ContainerChange rows by kind
    groups: int
    advice_checked: int
    advice_settled: int
    advice_pending: int
    done: Done


class Switch:
    """Detection on (each piece timed) or off (each piece a no-op), in the modules where the product looks it up."""

    def __init__(self) -> None:
        import importlib

        self.modules: dict[str, Any] = {name: importlib.import_module(name) for name in (INVENTORY, SERVICES)}
        self.original = {key: getattr(self.modules[key[0]], key[1]) for key in OFF}
        self.original_sql = {name: getattr(self.modules[INVENTORY], name) for name in SQL_OFF}
        self.sql_names = {id(sql): name for name, sql in self.original_sql.items()}  # the originals stay referenced
        self.spent: defaultdict[str, float] = defaultdict(float)

    def on(self) -> None:
        for (module, name), function in self.original.items():
            setattr(self.modules[module], name, self._timed(name, function))
        for name, sql in self.original_sql.items():
            setattr(self.modules[INVENTORY], name, sql)

    def off(self) -> None:
        for (module, name), noop in OFF.items():
            setattr(self.modules[module], name, noop)
        for name, sql in SQL_OFF.items():
            setattr(self.modules[INVENTORY], name, sql)

    def _timed(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[name] += time.perf_counter() - began

        return timed

    def statement_timer(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        """connection.execute_wrapper: the time of the detection statement."""
        name = self.sql_names.get(id(sql))
        if name is None:
            return execute(sql, params, many, context)
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.spent[name] += time.perf_counter() - began


@contextmanager
def profiled(label: str, enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.002)
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        print(f"\n--- pyinstrument: {label} ---")
        print(profiler.output_text(unicode=True, color=False, show_all=False), flush=True)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class CpuClock:
    """CPU seconds of this process and of its PostgreSQL backend (local: its /proc entry), which other work on the
    machine inflates far less than wall time. Parallel query workers, autovacuum and the WAL writer are not counted."""

    def __init__(self) -> None:
        self.backend = 0

    def __call__(self) -> float:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.backend = cursor.fetchone()[0]
        try:
            fields = Path(f"/proc/{self.backend}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            sys.exit("bench_changes reads its PostgreSQL backend's CPU time: run it on the database's machine")
        return time.process_time() + (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


cpu_clock = CpuClock()


@contextmanager
def measured(phase: str, seconds: dict[str, float], cpu: dict[str, float]) -> Iterator[None]:
    cpu_began = cpu_clock()
    began = time.perf_counter()
    yield
    seconds[phase] = time.perf_counter() - began
    cpu[phase] = cpu_clock() - cpu_began


def write_inventory(cluster: Any, state: Cluster, now: datetime) -> None:
    """As the collector stores an inventory: nodes, then pods, each in its transaction under the cluster's locks."""
    from django.db import transaction

    from apps.clusters.inventory import upsert_nodes, upsert_pods
    from apps.clusters.models import Cluster as ClusterModel
    from apps.clusters.models import Node
    from apps.telemetry.ingest import lock_cluster_ingest

    with transaction.atomic():
        ClusterModel.objects.select_for_update().filter(pk=cluster.pk).first()
        upsert_nodes(cluster, state.nodes, now)
    with transaction.atomic():
        ClusterModel.objects.select_for_update().filter(pk=cluster.pk).first()
        lock_cluster_ingest(cluster, exclusive=True)
        node_ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
        upsert_pods(cluster, list(state.pods.values()), now + timedelta(seconds=1), node_ids)


def refresh(cluster: Any, now: datetime) -> None:
    from apps.advisor.services import prepare_refresh, refresh_part

    prepare_refresh(cluster, now=now, windows=["1h"])
    refresh_part(cluster, None, now=now, windows=["1h"])


def suggestions_for(cluster: Any) -> Callable[[list[tuple[str, str]]], dict]:
    """(namespace, pod) → (suggested limit, suggested request) of the app container's 1 h finding, where it has one."""
    from apps.advisor.models import Finding

    def suggest(keys: list[tuple[str, str]]) -> dict:
        wanted = set(keys)
        rows = Finding.objects.filter(
            cluster=cluster, window="1h", container__name="app", container__pod__name__in=[n for _, n in keys]
        ).values_list("container__pod__namespace", "container__pod__name", "recommendations")
        out = {}
        for namespace, name, recommendations in rows:
            for rec in recommendations or []:
                if (namespace, name) in wanted and rec.get("suggested_limit_mcpu"):
                    out[(namespace, name)] = (rec["suggested_limit_mcpu"], rec.get("suggested_request_mcpu"))
                    break
        return out

    return suggest


def table_state() -> tuple[int, int, int, int, int]:
    """(last change id, changes, changes ungrouped, advice rows, advice settled)."""
    from django.db.models import Max

    from apps.advisor.models import ChangeAdvice
    from apps.clusters.models import ContainerChange

    changes = ContainerChange.objects.aggregate(last=Max("id"))["last"] or 0
    return (
        changes,
        ContainerChange.objects.count(),
        ContainerChange.objects.filter(group__isnull=True).count(),
        ChangeAdvice.objects.count(),
        ChangeAdvice.objects.exclude(verdict="").count(),
    )


def run_cycle(
    cluster: Any,
    state: Cluster,
    switch: Switch,
    args: argparse.Namespace,
    epoch: datetime,
    minute: int,
    *,
    detection: bool,
    refresh_too: bool = True,
    per_node: bool = True,
    profile: bool = False,
) -> Cycle:
    from django.db import connection
    from django.db.models import Count, F

    from apps.advisor.models import ChangeAdvice
    from apps.clusters.models import ContainerChange
    from apps.telemetry.ingest import ingest_readings

    at = epoch + timedelta(minutes=minute)
    done = evolve(state, minute, args, suggestions_for(cluster)) if minute else Done()
    readings = readings_by_node(state, minute, at + timedelta(seconds=5))
    (switch.on if detection else switch.off)()
    switch.spent.clear()
    before = table_state()
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}

    with (
        measured("inventory", seconds, cpu),
        profiled(f"inventory, minute {minute}", profile),
        connection.execute_wrapper(switch.statement_timer),
    ):
        write_inventory(cluster, state, at)

    # Timed: one call per node, as collect_node makes them; the untimed setup ingests the whole cluster at once.
    batches = list(readings.values()) if per_node else [[r for rs in readings.values() for r in rs]]
    with measured("ingest", seconds, cpu):
        for batch in batches:
            result = ingest_readings(cluster, batch, now=at + timedelta(seconds=10))
            if result.problems or result.samples_written != len(batch):
                raise SystemExit(f"minute {minute}: ingest wrote {result.samples_written}: {result.problems[:3]}")

    if refresh_too:
        with measured("refresh", seconds, cpu), profiled(f"refresh, minute {minute}", profile):
            refresh(cluster, at + timedelta(seconds=30))
    switch.on()  # what the untimed reads below and the next setup cycle use

    after = table_state()
    if not detection and (after[1:] != before[1:]):
        raise SystemExit(f"minute {minute}: detection off still wrote changes or advice: {before} → {after}")
    fresh = ContainerChange.objects.filter(id__gt=before[0])
    recorded = Counter(dict(fresh.values_list("kind").annotate(n=Count("id")).values_list("kind", "n")))
    return Cycle(
        minute=minute,
        detection=detection,
        seconds=seconds,
        cpu=cpu,
        inside=dict(switch.spent),
        recorded=recorded,
        groups=fresh.filter(group_id=F("id")).count(),
        advice_checked=after[3] - before[3],
        advice_settled=after[4] - before[4],
        advice_pending=ChangeAdvice.objects.filter(verdict="").exclude(kind="").count(),
        done=done,
    )


# --- reporting -------------------------------------------------------------------------------------------------------


def describe(cycle: Cycle) -> str:
    times = "  ".join(
        f"{phase} {cycle.seconds[phase]:5.2f} s ({cycle.cpu[phase]:5.2f})" for phase in PHASES if phase in cycle.seconds
    )
    line = (
        f"minute {cycle.minute:3d} {'A' if cycle.detection else 'B'}  {times}  cycle {sum(cycle.seconds.values()):6.2f} s"
        f" (CPU {sum(cycle.cpu.values()):6.2f} s)"
    )
    if cycle.detection:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(cycle.recorded.items())) or "none"
        inside = sum(cycle.inside.values())
        line += (
            f"\n      recorded {sum(cycle.recorded.values())} changes ({kinds}) in {cycle.groups} new groups; advice "
            f"checked {cycle.advice_checked}, settled {cycle.advice_settled}, pending {cycle.advice_pending}; "
            f"{inside:.2f} s inside detection"
        )
    done = cycle.done
    line += (
        f"\n      listed: {done.resized} pods resized ({done.following} to the advice), {done.restarted} restarts, "
        f"{done.rebooted} nodes rebooted, rolled out: {'; '.join(done.rolled_out) or 'nothing'}"
    )
    return line


def figure(name: str, value: float, unit: str, target: float | None, baseline: float | None) -> str:
    base = None if baseline is None else {"name": "detection off", "value": round(baseline, 3)}
    return json.dumps({"name": name, "value": round(value, 3), "unit": unit, "target": target, "baseline": base})


def report(cycles: list[Cycle], nodes: int) -> None:
    with_on = [c for c in cycles if c.detection]
    with_off = [c for c in cycles if not c.detection]

    def median(group: list[Cycle], clock: str, phase: str | None) -> float:
        values = [getattr(c, clock) for c in group]
        return statistics.median(sum(v.values()) if phase is None else v[phase] for v in values)

    hooks = {
        "inventory": [name for (module, name) in OFF if module == INVENTORY] + list(SQL_OFF),
        "ingest": [],
        "refresh": [name for (module, name) in OFF if module == SERVICES],
    }
    print(f"\nMedians over {len(with_on)} cycles with detection (A) and {len(with_off)} without (B), in seconds:")
    print(
        f"{'phase':<11}{'wall A':>9}{'wall B':>9}{'A/B':>7}{'CPU A':>9}{'CPU B':>9}{'A/B':>7}"
        f"{'inside detection (wall, A)':>28}"
    )
    suffix = "" if nodes == DEFAULT_NODES else f"_{nodes}_nodes"
    ratios, seconds, cpu_seconds = [], [], []
    for phase in (*PHASES, None):
        label = phase or "cycle"
        on, off = median(with_on, "seconds", phase), median(with_off, "seconds", phase)
        cpu_on, cpu_off = median(with_on, "cpu", phase), median(with_off, "cpu", phase)
        names = [n for p in PHASES if phase in (None, p) for n in hooks[p]]
        inside = statistics.median(sum(c.inside.get(n, 0.0) for n in names) for c in with_on)
        print(
            f"{label:<11}{on:>9.2f}{off:>9.2f}{on / off:>7.3f}{cpu_on:>9.2f}{cpu_off:>9.2f}{cpu_on / cpu_off:>7.3f}"
            f"{inside:>17.2f} ({inside / on:.1%})"
        )
        seconds.append(figure(f"change_detection_{label}_seconds{suffix}", on, "s", None, off))
        cpu_seconds.append(figure(f"change_detection_{label}_cpu_seconds{suffix}", cpu_on, "s", None, cpu_off))
        if phase is None:
            ratios.append(figure(f"change_detection_cycle_ratio{suffix}", on / off, "ratio", TARGET_RATIO, off))
            ratios.append(
                figure(f"change_detection_cycle_cpu_ratio{suffix}", cpu_on / cpu_off, "ratio", TARGET_RATIO, cpu_off)
            )
            ratios.append(figure(f"change_detection_share_of_cycle{suffix}", inside / on, "share", None, None))
    # Each pair of timed cycles (A B or B A, one after the other) under about the same load: A − B per pair.
    print("\nA − B within each pair of consecutive cycles (seconds; median, and share of B's median):")
    pairs = [(a, b) if a.detection else (b, a) for a, b in zip(cycles[::2], cycles[1::2], strict=True)]
    for phase in (*PHASES, None):
        parts = []
        for clock in ("seconds", "cpu"):
            diffs = [
                sum(getattr(a, clock).values()) - sum(getattr(b, clock).values())
                if phase is None
                else getattr(a, clock)[phase] - getattr(b, clock)[phase]
                for a, b in pairs
            ]
            base = median(with_off, clock, phase)
            listed = " ".join(f"{d:+.2f}" for d in diffs)
            parts.append(
                f"{'wall' if clock == 'seconds' else 'CPU '}: {listed} → {statistics.median(diffs):+.2f} ({statistics.median(diffs) / base:+.1%})"
            )
        print(f"  {phase or 'cycle':<10}{parts[0]}\n  {'':<10}{parts[1]}")
    print("\nInside detection (median wall seconds per A cycle):")
    for name in [name for _, name in OFF] + list(SQL_OFF):
        print(f"  {name:<26}{statistics.median(c.inside.get(name, 0.0) for c in with_on):8.3f}")
    print()
    for line in ratios + seconds + cpu_seconds:
        print(line)


# --- main ------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    parser.add_argument("--pods-per-node", type=int, default=15)
    parser.add_argument("--containers-per-pod", type=int, default=2, choices=(1, 2, 3))
    parser.add_argument("--rounds", type=int, default=5, help="timed cycles each way (at most 24)")
    parser.add_argument("--resize-percent", type=float, default=1.0)
    parser.add_argument("--follow-share", type=float, default=0.5)
    parser.add_argument("--restart-percent", type=float, default=0.2)
    parser.add_argument("--kernel-nodes", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="one more A cycle under pyinstrument")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 24:
        parser.error("--rounds: 1 to 24 (the timed cycles stay within minutes 10–59 of one hour)")

    url = os.environ["DATABASE_URL"]
    if "bench" not in url.rsplit("/", 1)[1]:
        sys.exit(f"bench_changes empties its database: give it one named *bench*, not {url}")
    ensure_database(url)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from apps.clusters.models import Cluster as ClusterModel

    if connection.vendor != "postgresql":
        sys.exit("bench_changes measures PostgreSQL: set DATABASE_URL=postgres://…")
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE clusters_cluster, telemetry_sample, telemetry_serieshead, telemetry_hourlyrollup CASCADE"
        )
    cluster = ClusterModel.objects.create(name=CLUSTER, source="kubernetes")

    # Timed cycles at minutes 10–59 of the last full hour: everything is in the past (ingest refuses the future).
    clock = datetime.now(UTC)
    hour = clock.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    first_timed = SETUP_MINUTES + 2
    epoch = hour + timedelta(minutes=10) - timedelta(minutes=first_timed)
    state = build_cluster(args.nodes, args.pods_per_node, args.containers_per_pod)
    containers = sum(len(p.containers) for p in state.pods.values())
    print(
        f"{args.nodes:,} nodes, {len(state.pods):,} pods, {containers:,} containers, {len(state.workloads):,} workloads; "
        f"{args.rounds} timed cycles each way after {SETUP_MINUTES} setup cycles, from {epoch:%Y-%m-%d %H:%M} UTC",
        flush=True,
    )
    switch = Switch()
    began = time.perf_counter()
    for minute in range(SETUP_MINUTES):
        refresh_now = minute % SETUP_REFRESH_EVERY == SETUP_REFRESH_EVERY - 1
        cycle = run_cycle(
            cluster, state, switch, args, epoch, minute, detection=True, refresh_too=refresh_now, per_node=False
        )
        if minute % SETUP_REFRESH_EVERY == SETUP_REFRESH_EVERY - 1:
            print(f"setup {time.perf_counter() - began:5.0f} s: {describe(cycle)}", flush=True)
    cycles: list[Cycle] = []
    order = [True, False] + [
        on for pair in range(args.rounds) for on in ((True, False) if pair % 2 == 0 else (False, True))
    ]
    for number, detection in enumerate(order):
        minute = SETUP_MINUTES + number
        cycle = run_cycle(cluster, state, switch, args, epoch, minute, detection=detection)
        if number >= 2:
            cycles.append(cycle)
        print(("warm-up " if number < 2 else "") + describe(cycle), flush=True)
        if detection and number >= 2 and not cycle.recorded:
            raise SystemExit("an A cycle recorded no change: it would prove nothing")
    report(cycles, args.nodes)
    if args.profile:
        run_cycle(cluster, state, switch, args, epoch, SETUP_MINUTES + len(order), detection=True, profile=True)


if __name__ == "__main__":
    main()
