"""Storage at scale: days of one-minute samples for a cluster in PostgreSQL — bytes per sample, the hourly rollups
that keep long windows fast, retention dropping a day's partition, and the pages on top of it all.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cputune_storage python benchmarks/bench_storage.py \
        [--nodes 100] [--days 7] [--requests 20]

Builds --nodes × 30 pods × 2 containers (the simulator's shape) and, for each day, one sample per container per
minute written by PostgreSQL itself (INSERT … SELECT over generate_series: the build is not what is measured, and
a day of 100 nodes is 8.6 million rows). Counters advance with per-container rates and a per-minute wobble, so the
rows are as wide as collected ones (no NULLs but the first sample's deltas). Then, timed:

- the real rollup service over every hour of the days, a day per statement (the statement the beat and the
  findings refresh run),
- the real findings refresh (1 h from raw samples, 24 h and 7 d from rollups),
- the namespace report, the pod page on 1 h / 24 h / 7 d and the pod series API (Django test client, DEBUG off),
- the real retention service dropping the oldest day's partition, against the baseline of deleting one day's rows
  of the next partition with DELETE (what retention would cost without partitions), in the same run.

Prints bytes per sample (partitions with their indexes), per rollup row and per finding, and the linear
extrapolation to 1,000 and 5,000 nodes. JSON lines for `make bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from common import BENCH_SECRET_KEY, ensure_database, time_get  # noqa: E402 - next to this script

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "1")  # static files without collectstatic; timing runs with settings.DEBUG off
os.environ.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_storage")
os.environ.setdefault("CPUTUNE_RETENTION_RAW_DAYS", "7")

CLUSTER = "bench-storage"
PODS_PER_NODE, CONTAINERS_PER_POD, NAMESPACES = 30, 2, 20
TARGET_MS = 300.0

# One day of samples for every container, computed by PostgreSQL. Minute m of container c: periods advance 600 per
# minute, throttled periods and usage at per-container rates with a wobble; the first minute of the first day has
# no deltas (no earlier sample).
_FILL_DAY = """
INSERT INTO telemetry_sample (container_id, ts, periods_total, throttled_periods_total, throttled_seconds_total,
    usage_seconds_total, threads, interval_s, periods_delta, throttled_periods_delta, throttled_seconds_delta,
    usage_seconds_delta, reset)
SELECT c.id, g.ts,
    600 * g.m,
    (600 * g.m * r.ratio)::bigint,
    600 * g.m * r.ratio * 0.004,
    g.m * r.cpus * 60,
    r.threads,
    CASE WHEN g.m = 0 THEN NULL ELSE 60.0 END,
    CASE WHEN g.m = 0 THEN NULL ELSE 600 END,
    CASE WHEN g.m = 0 THEN NULL ELSE (600 * r.ratio * (0.8 + 0.4 * ((c.id * 7919 + g.m) %% 100) / 100.0))::bigint END,
    CASE WHEN g.m = 0 THEN NULL ELSE 600 * r.ratio * 0.004 END,
    CASE WHEN g.m = 0 THEN NULL ELSE r.cpus * 60 * (0.7 + 0.6 * ((c.id * 104729 + g.m) %% 100) / 100.0) END,
    false
FROM clusters_container c
JOIN clusters_pod p ON p.id = c.pod_id AND p.cluster_id = %(cluster)s
CROSS JOIN LATERAL (SELECT (c.id %% 7) / 20.0 AS ratio, 0.05 + (c.id %% 13) / 10.0 AS cpus,
                           4 + (c.id %% 60) AS threads) r
CROSS JOIN LATERAL (
    SELECT %(day_start)s::timestamptz + make_interval(mins => i) AS ts, %(first_minute)s + i AS m
    FROM generate_series(0, 1439) i
) g
"""


def relation_bytes(cursor, names: list[str]) -> int:
    cursor.execute("SELECT coalesce(sum(pg_total_relation_size(n::regclass)), 0) FROM unnest(%s::text[]) n", [names])
    return int(cursor.fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client, override_settings

    from apps.advisor.services import refresh_findings
    from apps.clusters.models import Cluster
    from apps.telemetry.ingest import ingest
    from apps.telemetry.partitions import ensure_partitions, list_partitions, partition_name
    from apps.telemetry.readings import Batch, ContainerInfo, NodeInfo, PodInfo
    from apps.telemetry.retention import apply_retention
    from apps.telemetry.rollups import rollup_hours

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:  # a clean slate: this database is the benchmark's own
        cursor.execute("TRUNCATE telemetry_sample, telemetry_serieshead, telemetry_hourlyrollup, advisor_finding")
        for name, _ in list_partitions():
            cursor.execute(f'DROP TABLE "{name}"')
    Cluster.objects.filter(name=CLUSTER).delete()

    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(minutes=30)
    first_day = (end - timedelta(days=args.days)).replace(hour=0, minute=0)
    days = [(first_day + timedelta(days=d)) for d in range(args.days + 1)]
    containers = args.nodes * PODS_PER_NODE * CONTAINERS_PER_POD
    cluster = Cluster.objects.create(name=CLUSTER, source="kubernetes")
    nodes = [NodeInfo(name=f"node-{n}", capacity_mcpu=16_000, allocatable_mcpu=15_800,
                      kernel_version="5.15.0-1034-aws", cpu_manager_policy="none") for n in range(args.nodes)]  # fmt: skip
    pods = [
        PodInfo(namespace=f"ns-{p % NAMESPACES}", name=f"pod-{p}", uid=f"uid-{p}", node=f"node-{p % args.nodes}",
                qos_class="Burstable", workload_kind="Deployment", workload_name=f"app-{p % 400}",
                containers=tuple(ContainerInfo(name=f"c{c}", request_mcpu=250, limit_mcpu=500 + 500 * (p % 3))
                                 for c in range(CONTAINERS_PER_POD)))
        for p in range(args.nodes * PODS_PER_NODE)
    ]  # fmt: skip
    ingest(cluster, Batch(nodes=nodes, pods=pods), now=end)
    print(f"bench_storage: {args.nodes} nodes, {containers:,} containers, {args.days} days of 1-minute samples "
          f"(until {end:%Y-%m-%d %H:%M} UTC), {os.cpu_count()} CPUs", flush=True)  # fmt: skip

    ensure_partitions({d.date() for d in days})
    rows = 0
    started = time.perf_counter()
    for i, day in enumerate(days):
        minutes = 1440 if day + timedelta(days=1) <= end else int((end - day).total_seconds() // 60)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_FILL_DAY.replace("generate_series(0, 1439)", f"generate_series(0, {minutes - 1})"),
                           {"cluster": cluster.pk, "day_start": day, "first_minute": i * 1440})  # fmt: skip
            rows += cursor.rowcount
        print(f"  day {i + 1}/{len(days)}: {rows:,} samples ({time.perf_counter() - started:.0f} s)", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE telemetry_sample")
        names = [name for name, _ in list_partitions()]
        sample_bytes = relation_bytes(cursor, names)
        cursor.execute("SELECT count(*) FROM telemetry_sample")
        rows = int(cursor.fetchone()[0])

    # A day of hours per statement (the beat rolls up the last two hours every five minutes).
    started = time.perf_counter()
    rollups = sum(rollup_hours(now=day + timedelta(hours=23), hours=24) for day in days)
    rollup_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE telemetry_hourlyrollup")
        rollup_bytes = relation_bytes(cursor, ["telemetry_hourlyrollup"])

    started = time.perf_counter()
    findings = refresh_findings(cluster, now=end)
    refresh_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE advisor_finding")
        finding_bytes = relation_bytes(cursor, ["advisor_finding"])

    user, _ = get_user_model().objects.get_or_create(username="bench-storage")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    base = f"/c/{CLUSTER}/ns/ns-7"
    pages = {
        "namespace_report": f"{base}/",
        "pod_page_1h": f"{base}/pod/pod-7/",
        "pod_page_24h": f"{base}/pod/pod-7/?window=24h",
        "pod_page_7d": f"{base}/pod/pod-7/?window=7d",
        "namespace_report_7d": f"{base}/?window=7d",
    }
    latencies = {}
    with override_settings(DEBUG=False):
        for name, url in pages.items():
            latencies[name] = time_get(client, url, args.requests)[:2]

    # Retention: the oldest day is past CPUTUNE_RETENTION_RAW_DAYS one day after `end`. Baseline first: deleting
    # one day's rows from the next partition (what retention costs without partitions), then the real service.
    oldest, second = days[0], days[1]
    with transaction.atomic(), connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(f'DELETE FROM "{partition_name(second.date())}"')  # noqa: S608 - a partition's name
        deleted = cursor.rowcount
        delete_s = time.perf_counter() - started
    started = time.perf_counter()
    result = apply_retention(now=oldest + timedelta(days=int(os.environ["CPUTUNE_RETENTION_RAW_DAYS"]) + 1, hours=1))
    drop_s = time.perf_counter() - started

    per_sample = sample_bytes / rows
    per_rollup = rollup_bytes / rollups
    per_finding = finding_bytes / findings
    print(f"\nsamples: {rows:,} rows, {sample_bytes / 2**30:.2f} GiB with indexes — {per_sample:.0f} bytes/sample")
    print(f"rollups: {rollups:,} rows in {rollup_s:.1f} s ({rows / rollup_s:,.0f} samples/s), "
          f"{rollup_bytes / 2**20:.0f} MiB — {per_rollup:.0f} bytes/rollup")  # fmt: skip
    print(f"findings refresh: {findings:,} rows in {refresh_s:.1f} s, {finding_bytes / 2**20:.1f} MiB — "
          f"{per_finding:.0f} bytes/finding")  # fmt: skip
    print(f"retention: dropped {result.partitions_dropped} in {drop_s * 1000:.0f} ms; baseline DELETE of "
          f"{deleted:,} rows of one day: {delete_s:.1f} s ({delete_s / drop_s:,.0f}x)")  # fmt: skip
    print("pages (namespace ns-7: "
          f"{containers // NAMESPACES:,} containers; {args.requests} requests each, DEBUG off):")  # fmt: skip
    for name, (p50, p95) in latencies.items():
        print(f"  {name:<22} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms")
    per_day_1000 = 1000 * PODS_PER_NODE * CONTAINERS_PER_POD * 1440
    print("extrapolated at one sample per container per minute (linear in containers × samples kept):")
    for size in (1000, 5000):
        day_bytes = per_day_1000 * size / 1000 * per_sample
        print(f"  {size:,} nodes: {day_bytes / 2**30:.0f} GiB of samples a day, {8 * day_bytes / 2**30:,.0f} GiB "
              f"for the default 8 days; rollups {size * 60 * 24 * 90 * per_rollup / 2**30:.0f} GiB for 90 days")  # fmt: skip

    def line(name: str, value: float, unit: str, target: float | None = None, baseline=None) -> None:
        print(
            json.dumps({"name": name, "value": round(value, 1), "unit": unit, "target": target, "baseline": baseline})
        )

    line("storage_bytes_per_sample", per_sample, "bytes")
    line("storage_bytes_per_rollup", per_rollup, "bytes")
    line("storage_bytes_per_finding", per_finding, "bytes")
    line("storage_rollup_samples_per_second", rows / rollup_s, "samples/s")
    line(f"storage_refresh_{containers}_containers", refresh_s, "s")
    line("storage_retention_drop_day_ms", drop_s * 1000, "ms", None,
         {"name": "delete_one_day_rows_ms", "value": round(delete_s * 1000, 1)})  # fmt: skip
    for name, (p50, p95) in latencies.items():
        line(f"storage_{args.days}d_{name}_p95_ms", p95, "ms", TARGET_MS)
        line(f"storage_{args.days}d_{name}_p50_ms", p50, "ms")


if __name__ == "__main__":
    main()
