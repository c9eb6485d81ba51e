"""End-to-end scale run: the simulated cluster (standins/simulator.py) collected by real Celery workers on Redis into
PostgreSQL, then the pages and the API at that size.

    python benchmarks/bench_scale.py [--nodes 100,1000] [--cycles 2] [--concurrency 4] [--seed 1] [--requests 10]
                                     [--sim-processes 1] [--py-spy-nodes 1000] [--keep]

Defaults finish in about 10 minutes on a 2-core machine (100 and 1,000 nodes × 30 pods × 2 containers, two cycles
each); add 5000 to --nodes for the Kubernetes limit (150,000 pods; ~30 minutes more). For each size: the simulator
starts in its own process (its default faults: 1 % slow nodes, 0.5 % answering 500, 0.2 % hanging), the benchmark
database's telemetry and findings are emptied, a prefork worker with --concurrency processes (4, as docker-compose.yml
runs it) starts, and each cycle enqueues `collector.collect_cluster`, waits for the run to close and for
`advisor.refresh` to write every window.
Printed per cycle: wall time (enqueue → run closed → findings written), node tasks/s, readings/s, peak RSS of the
pool processes (VmHWM, reset before each cycle), rows and bytes added in PostgreSQL (samples partitions, series
heads, rollups, findings), CPU seconds spent by the simulator, the worker processes and PostgreSQL during the cycle,
and the advisor refresh time. Then page and API latencies at that size (Django test client, p50/p95).
`--py-spy-nodes N` records the worker pool with py-spy (`pip install py-spy`) during the last (steady) cycle of size N and
prints the hottest functions.

Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cputune_bench, created if missing — its
telemetry tables are emptied), REDIS_URL (default redis://127.0.0.1:6379/9, purged). Prints JSON lines
{"name", "value", "unit", "target", "baseline"} for benchmarks/run_all.py; the baseline of an N-node figure is the
100-node figure scaled linearly (× N / 100). Target: a 1,000-node cycle ≤ 60 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from common import BENCH_SECRET_KEY, ensure_database, time_get  # noqa: E402 - next to this script

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")
os.environ.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
os.environ.setdefault("DEBUG", "1")  # static files without collectstatic; timing runs with settings.DEBUG off
# A node that hangs holds a worker for this long (the real default is 20 s).
os.environ.setdefault("CPUTUNE_NODE_TIMEOUT", "10")
# Node tasks expire after 0.9 × the interval: a cycle longer than the interval would lose its tail.
os.environ.setdefault("CPUTUNE_COLLECT_INTERVAL", "3600")
# Every cycle refreshes all three windows (the worst case; by default 24 h and 7 d follow every 10 minutes).
os.environ.setdefault("CPUTUNE_LONG_WINDOW_REFRESH", "0")

CLUSTER = "bench-scale"
TARGET_1000_S = 60.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------------------------- processes


def _proc_status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def children_of(root_pid: int) -> list[int]:
    """Every descendant of root_pid (the worker's pool processes, the simulator's forks)."""
    parents: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        fields = _proc_status(int(status.parent.name))
        if "PPid" in fields:
            parents[int(status.parent.name)] = int(fields["PPid"])
    found, frontier = [], [root_pid]
    while frontier:
        pid = frontier.pop()
        kids = [child for child, parent in parents.items() if parent == pid]
        found.extend(kids)
        frontier.extend(kids)
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (their own, not their children's)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def postgres_pids() -> list[int]:
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if comm.read_text().strip() in ("postgres", "postmaster"):
                pids.append(int(comm.parent.name))
    return pids


def postgres_cpu_seconds() -> float:
    """CPU seconds of PostgreSQL so far: its live processes, plus what the postmaster's exited children (backends
    of closed connections, autovacuum workers) used — the kernel adds theirs to the postmaster's cutime/cstime
    when it reaps them. Sampled before and after a cycle, the difference counts every backend that ran in between,
    including ones that started or exited during it."""
    pids = postgres_pids()
    total = cpu_seconds(pids)
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) not in pids:  # the postmaster: its parent is not a postgres process
                total += (int(fields[13]) + int(fields[14])) / CLOCK_TICKS  # cutime, cstime
    return total


def reset_peak_rss(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset VmHWM to the current RSS


def peak_rss_mb(pids: list[int]) -> float:
    peaks = [int(_proc_status(pid).get("VmHWM", "0 kB").split()[0]) for pid in pids]
    return max(peaks, default=0) / 1024


def stop(proc: subprocess.Popen[Any] | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the worker's warm shutdown stops its pool; the simulator stops its forks
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything its children left behind


# -------------------------------------------------------------------------------------------------- database


TABLES = {
    "samples": None,  # the partitions of telemetry_sample, summed
    "heads": "telemetry_serieshead",
    "rollups": "telemetry_hourlyrollup",
    "findings": "advisor_finding",
}


def table_figures() -> dict[str, tuple[int, int]]:
    """(rows, bytes) per table group; bytes by pg_total_relation_size (data, indexes, TOAST)."""
    from django.db import connection

    out: dict[str, tuple[int, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i "
            "WHERE i.inhparent = 'telemetry_sample'::regclass"
        )
        sample_bytes = int(cursor.fetchone()[0])
        cursor.execute("SELECT count(*) FROM telemetry_sample")
        out["samples"] = (int(cursor.fetchone()[0]), sample_bytes)
        for key, table in TABLES.items():
            if table is None:
                continue
            cursor.execute(f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}")  # noqa: S608 - constant names
            rows, size = cursor.fetchone()
            out[key] = (int(rows), int(size))
    return out


def empty_telemetry() -> None:
    from django.db import connection

    from apps.clusters.models import Cluster

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE telemetry_sample, telemetry_serieshead, telemetry_hourlyrollup, advisor_finding")
    Cluster.objects.filter(name=CLUSTER).delete()
    # Autovacuum may be off (it is on the machines this was measured on): without this, each run left its 300,000
    # deleted containers and pods as dead index entries for the next one to wade through — a run after a few others
    # measured twice the PostgreSQL CPU per node. A whole-database VACUUM also clears the system catalogs.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


# ------------------------------------------------------------------------------------------------- the cycle


@dataclass
class Cycle:
    nodes: int
    cycle: int
    collect_s: float
    total_s: float
    refresh_s: float
    ok: int
    failed: int
    readings: int
    samples: int
    rss_mb: float
    added: dict[str, tuple[int, int]]
    cpu: dict[str, float]
    errors: Counter[str] = field(default_factory=Counter)


def run_cycle(cluster: Any, nodes: int, number: int, worker_pid: int, sim_pid: int, spy: str | None) -> Cycle:
    from apps.advisor.models import Finding, Window
    from apps.collector.models import CollectionRun
    from apps.collector.tasks import collect_cluster

    pool = children_of(worker_pid)
    reset_peak_rss(pool)
    before = table_figures()
    watched = {
        "simulator": [sim_pid, *children_of(sim_pid)],
        "workers": [worker_pid, *pool],
    }
    cpu_before = {name: cpu_seconds(pids) for name, pids in watched.items()}
    cpu_before["postgres"] = postgres_cpu_seconds()
    runs_before = CollectionRun.objects.filter(cluster=cluster).count()
    spy_proc = None
    if spy:
        spy_proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw", "--rate", "50",
             "--output", spy, "--nonblocking", "--pid", str(pool[0])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    started = time.monotonic()
    collect_cluster.delay(cluster.pk)
    run = None
    closed_at = None
    while time.monotonic() - started < 3600:
        if CollectionRun.objects.filter(cluster=cluster).count() > runs_before:
            run = CollectionRun.objects.filter(cluster=cluster).order_by("-started_at").first()
            if run is not None and run.finished_at is not None:
                closed_at = time.monotonic()
                break
        time.sleep(0.2)
    if run is None or closed_at is None:
        raise SystemExit(f"the {nodes}-node cycle {number} did not close within an hour")
    # The refresh writes a chunk of containers at a time, every window of a chunk before the next chunk: it is
    # done when every container of a pod seen in the last hour (all of them here) has a fresh finding per window.
    from apps.clusters.models import Container

    expected = (
        len(Window.values)
        * Container.objects.filter(
            pod__cluster=cluster, pod__last_seen__gte=run.started_at - timedelta(hours=1)
        ).count()
    )
    refresh_started = refreshed_at = None
    while time.monotonic() - closed_at < 1800:
        fresh = Finding.objects.filter(cluster=cluster, computed_at__gte=run.finished_at)
        if fresh.count() >= expected:
            refreshed_at = time.monotonic()
            refresh_started = fresh.order_by("computed_at").values_list("computed_at", flat=True).first()
            break
        time.sleep(0.5)
    if refreshed_at is None or refresh_started is None:
        raise SystemExit(f"the advisor refresh after the {nodes}-node cycle {number} did not finish in 30 minutes")
    if spy_proc is not None:
        spy_proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy_proc.wait(timeout=30)
    refresh_s = time.time() - refresh_started.timestamp() - (time.monotonic() - refreshed_at)
    cpu_after = {name: cpu_seconds(pids) for name, pids in watched.items()}
    cpu_after["postgres"] = postgres_cpu_seconds()
    after = table_figures()
    results = list(run.node_results.values_list("ok", "readings", "error"))
    errors: Counter[str] = Counter()
    for ok, _, error in results:
        if not ok:
            errors[re.sub(r"ip-\S+", "<node>", error or "")[:90]] += 1
    return Cycle(
        nodes=nodes,
        cycle=number,
        collect_s=closed_at - started,
        total_s=refreshed_at - started,
        refresh_s=refresh_s,
        ok=run.nodes_ok,
        failed=run.nodes_failed,
        readings=sum(readings or 0 for _, readings, _ in results),
        samples=run.samples_written,
        rss_mb=peak_rss_mb(pool),
        added={key: (after[key][0] - before[key][0], after[key][1] - before[key][1]) for key in after},
        cpu={name: cpu_after[name] - cpu_before[name] for name in cpu_before},
        errors=errors,
    )


# ---------------------------------------------------------------------------------------------- pages and API


def page_latencies(cluster: Any, requests: int) -> dict[str, tuple[float, float, int]]:
    """(p50 ms, p95 ms, bytes) for the namespace report, the containers API and the pod series API."""
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings

    from apps.clusters.models import Container, Pod

    namespace = Counter(
        Container.objects.filter(pod__cluster=cluster).values_list("pod__namespace", flat=True)
    ).most_common(1)[0][0]
    pod = Pod.objects.filter(cluster=cluster, namespace=namespace).order_by("name").values_list("name", flat=True)[0]
    user, _ = get_user_model().objects.get_or_create(username="bench-scale")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    urls = {
        "namespace_report": f"/c/{cluster.name}/ns/{namespace}/",
        "containers_api": f"/api/v1/clusters/{cluster.name}/namespaces/{namespace}/containers/",
        "pod_series_api": f"/api/v1/clusters/{cluster.name}/namespaces/{namespace}/pods/{pod}/series/",
    }
    out: dict[str, tuple[float, float, int]] = {}
    with override_settings(DEBUG=False):
        for name, url in urls.items():
            out[name] = time_get(client, url, requests)
    print(f"  pages at this size (namespace {namespace!r}: "
          f"{Container.objects.filter(pod__cluster=cluster, pod__namespace=namespace).count():,} containers; "
          f"{requests} requests each, DEBUG off)")  # fmt: skip
    for name, (p50, p95, size) in out.items():
        print(f"    {name:<18} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms   {size:>10,} bytes")
    return out


def simulator_rate(url: str, token: str, names: list[str], threads: int = 2, seconds: float = 8.0) -> float:
    """Scrapes/s the simulator serves to `threads` clients for a few seconds (healthy nodes only)."""
    done = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(offset: int) -> None:
        i = offset
        while time.monotonic() < deadline:
            request = urllib.request.Request(  # noqa: S310 - the simulator's own http URL
                f"{url}/api/v1/nodes/{names[i % len(names)]}/proxy/metrics/cadvisor"
            )
            request.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - as above
                answer.read()
            with lock:
                done[0] += 1
            i += threads

    began = time.monotonic()
    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return done[0] / (time.monotonic() - began)


# ------------------------------------------------------------------------------------------------------ main


def mb(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"


def py_spy_top(path: str, limit: int = 15) -> list[tuple[str, float]]:
    """Self-time share per function (the leaf frame of each stack) from a py-spy raw recording."""
    leafs: Counter[str] = Counter()
    total = 0
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            leaf = stack.split(";")[-1]
            leafs[re.sub(r"\s+\(/.*?/(site-packages|lib/python3\.\d+|main)/", " (", leaf)] += int(count)
            total += int(count)
    return [(name, 100 * n / total) for name, n in leafs.most_common(limit)] if total else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="100,1000", help="comma-separated sizes, e.g. 100,1000,5000")
    parser.add_argument("--cycles", type=int, default=2)
    # 4 processes, as docker-compose.yml and the README's sizing run the worker: node reads mostly wait.
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--requests", type=int, default=10, help="timed requests per page")
    parser.add_argument("--sim-processes", type=int, default=1)
    parser.add_argument("--py-spy-nodes", type=int, default=0, help="record the worker with py-spy at this size")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",") if n.strip()]

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    from apps.clusters.services import register_cluster
    from cputune.celery import app

    call_command("migrate", verbosity=0)
    load = os.getloadavg()
    print(f"bench_scale: sizes {sizes}, {args.cycles} cycles, worker concurrency {args.concurrency}, seed {args.seed}, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CPUTUNE_DISABLE_SCHEDULES": "collect-all-clusters"}
    cycles: list[Cycle] = []
    pages: dict[int, dict[str, tuple[float, float, int]]] = {}
    sim_rates: dict[int, float] = {}
    for nodes in sizes:
        empty_telemetry()
        app.control.purge()
        kubeconfig = tmp / f"kubeconfig-{nodes}"
        sim = worker = None
        try:
            sim = subprocess.Popen(
                [sys.executable, "-m", "standins.simulator", "--nodes", str(nodes), "--seed", str(args.seed),
                 "--kubeconfig", str(kubeconfig), "--processes", str(args.sim_processes)],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
            )  # fmt: skip
            assert sim.stdout is not None
            banner = [sim.stdout.readline().strip() for _ in range(3)]
            url = banner[-1]
            print(f"\n== {nodes} nodes: {banner[0]}", flush=True)
            from standins.simulator import DEFAULT_TOKEN, SimulatedCluster, SimulatorConfig

            simulated = SimulatedCluster(SimulatorConfig(nodes=nodes, seed=args.seed))
            healthy = [simulated.node_name(i) for i in range(nodes) if simulated.node_fault(i) == "ok"][:50]
            sim_rates[nodes] = simulator_rate(url, DEFAULT_TOKEN, healthy)
            print(f"  simulator alone: {sim_rates[nodes]:.1f} scrapes/s to 2 clients", flush=True)
            cluster, _ = register_cluster(CLUSTER, "kubernetes", kubeconfig_path=str(kubeconfig))
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "cputune", "worker", "-l", "warning", "-c", str(args.concurrency),
                 "--without-gossip", "--without-mingle", "--without-heartbeat", "-P", "prefork"],
                cwd=ROOT, env=env, start_new_session=True,
            )  # fmt: skip
            time.sleep(4)
            for number in range(1, args.cycles + 1):
                spy = str(tmp / f"py-spy-{nodes}.txt") if nodes == args.py_spy_nodes and number == args.cycles else None
                cycle = run_cycle(cluster, nodes, number, worker.pid, sim.pid, spy)
                cycles.append(cycle)
                added = ", ".join(f"{key} +{rows:,} rows / +{mb(size)}" for key, (rows, size) in cycle.added.items())
                cpu = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in cycle.cpu.items())
                print(
                    f"  cycle {number}: collect {cycle.collect_s:.1f} s, with advisor refresh {cycle.total_s:.1f} s "
                    f"(refresh {cycle.refresh_s:.1f} s) — {cycle.ok} ok / {cycle.failed} failed, "
                    f"{nodes / cycle.collect_s:.1f} node tasks/s, {cycle.readings / cycle.collect_s:,.0f} readings/s, "
                    f"{cycle.samples:,} samples; peak worker RSS {cycle.rss_mb:.0f} MB\n"
                    f"    PostgreSQL: {added}\n    CPU during the cycle: {cpu}; load average "
                    f"{os.getloadavg()[0]:.2f}",
                    flush=True,
                )
                for error, count in cycle.errors.most_common(3):
                    print(f"    {count} × {error}")
                if spy:
                    print("  py-spy, worker pool process, self time by function (top 15):")
                    for name, share in py_spy_top(spy):
                        print(f"    {share:5.1f} %  {name}")
            pages[nodes] = page_latencies(cluster, args.requests)
        finally:
            stop(worker)
            stop(sim)
        if os.environ.get("BENCH_SCALE_KEEP") != "1":
            empty_telemetry()

    print_json(cycles, pages, sim_rates)


def print_json(
    cycles: list[Cycle], pages: dict[int, dict[str, tuple[float, float, int]]], rates: dict[int, float]
) -> None:
    def line(name: str, value: float, unit: str, target: float | None, baseline: tuple[str, float] | None) -> None:
        base = {"name": baseline[0], "value": round(baseline[1], 1)} if baseline else None
        print(json.dumps({"name": name, "value": round(value, 1), "unit": unit, "target": target, "baseline": base}))

    first = {c.nodes: c for c in cycles if c.cycle == 1}
    # The second cycle is the steady state (heads exist, deltas computed); fall back to the first.
    steady = {c.nodes: c for c in cycles if c.cycle == 2} or first
    steady = {nodes: steady.get(nodes, first[nodes]) for nodes in first}
    small = steady.get(100)
    print()
    for nodes, cycle in steady.items():

        def scaled(figure: float, name: str, nodes: int = nodes) -> tuple[str, float] | None:
            return (f"{name} × {nodes}/100", figure * nodes / 100) if small is not None and nodes != 100 else None

        line(f"scale_cycle_{nodes}_nodes_wall", cycle.total_s, "s", TARGET_1000_S if nodes == 1000 else None,
             scaled(small.total_s, "scale_cycle_100_nodes_wall") if small else None)  # fmt: skip
        line(f"scale_collect_{nodes}_nodes_wall", cycle.collect_s, "s", None,
             scaled(small.collect_s, "scale_collect_100_nodes_wall") if small else None)  # fmt: skip
        line(f"scale_advisor_refresh_{nodes}_nodes", cycle.refresh_s, "s", None,
             scaled(small.refresh_s, "scale_advisor_refresh_100_nodes") if small else None)  # fmt: skip
        line(f"scale_{nodes}_nodes_node_tasks_per_second", nodes / cycle.collect_s, "tasks/s", None, None)
        line(f"scale_{nodes}_nodes_readings_per_second", cycle.readings / cycle.collect_s, "readings/s", None, None)
        line(f"scale_{nodes}_nodes_worker_peak_rss", cycle.rss_mb, "MB", 300, None)
        line(f"scale_{nodes}_nodes_pg_bytes_per_cycle", sum(size for _, size in cycle.added.values()) / 2**20, "MB",
             None, None)  # fmt: skip
        line(f"scale_{nodes}_nodes_first_cycle_wall", first[nodes].total_s, "s", None, None)
        # What sizing needs: CPU per node per cycle, collection and advisor refresh together.
        for who in ("workers", "postgres", "simulator"):
            line(f"scale_{nodes}_nodes_{who}_cpu_per_node", cycle.cpu.get(who, 0.0) / nodes * 1000, "ms", None, None)
        added_samples = cycle.added.get("samples")
        if added_samples and added_samples[0]:
            line(f"scale_{nodes}_nodes_sample_bytes", added_samples[1] / added_samples[0], "bytes/sample", None, None)
        line(f"scale_{nodes}_nodes_simulator_scrapes_per_second", rates[nodes], "scrapes/s", None, None)
        for page, (p50, p95, _size) in pages.get(nodes, {}).items():
            line(f"scale_{nodes}_nodes_{page}_p95_ms", p95, "ms", 300, None)
            line(f"scale_{nodes}_nodes_{page}_p50_ms", p50, "ms", None, None)


if __name__ == "__main__":
    main()
