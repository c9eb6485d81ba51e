"""Ingest throughput into PostgreSQL: batches of 10,000 container readings, bulk_create vs COPY, side by side.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cputune_bench python benchmarks/bench_ingest.py [--batches 5]

Measures the whole `ingest_readings` path (container lookup, series heads, deltas, sample write, head upsert) per
method on fresh containers: deltas in Python written with Django's bulk_create (the baseline) or with COPY, and the
chosen PostgreSQL path, COPY into a temporary table with the deltas computed by one SQL statement. Also the sample
write alone (bulk_create vs COPY). Prints readings/s and JSON lines for `make bench`.
Target (issue): >= 100,000 readings/s on a 2-core machine.
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
from common import BENCH_SECRET_KEY, ensure_database  # noqa: E402 - next to this script

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "0")  # no query log: it would be part of what is measured
os.environ.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=10_000)
    args = parser.parse_args()

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from apps.clusters.inventory import upsert_pods
    from apps.clusters.models import Cluster
    from apps.telemetry.ingest import ingest_readings, write_samples
    from apps.telemetry.models import Sample
    from apps.telemetry.readings import ContainerInfo, CounterReading, PodInfo

    if connection.vendor != "postgresql":
        sys.exit("bench_ingest measures PostgreSQL: set DATABASE_URL=postgres://…")
    call_command("migrate", verbosity=0)
    Cluster.objects.filter(name__startswith="bench-ingest").delete()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE telemetry_sample, telemetry_serieshead")

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    n = args.batch_size
    results: dict[str, float] = {}
    write_only: dict[str, float] = {}
    for method in ("bulk_create", "copy", "sql"):
        cluster = Cluster.objects.create(name=f"bench-ingest-{method.replace('_', '-')}")
        pods = [
            PodInfo(
                namespace="bench", name=f"pod-{i}", node="", containers=(ContainerInfo(name="app", limit_mcpu=500),)
            )
            for i in range(n)
        ]
        upsert_pods(cluster, pods, t0, {})
        total_readings = 0
        elapsed = 0.0
        for b in range(args.batches + 1):
            ts = t0 + timedelta(minutes=b)
            batch = [
                CounterReading(
                    namespace="bench",
                    pod=f"pod-{i}",
                    container="app",
                    ts=ts,
                    periods_total=600 * (b + 1),
                    throttled_periods_total=60 * b + i % 7,
                    throttled_seconds_total=1.5 * b,
                    usage_seconds_total=30.0 * b + i * 0.001,
                    threads=8,
                    period_us=100_000,
                )
                for i in range(n)
            ]
            start = time.perf_counter()
            result = ingest_readings(cluster, batch, method=method)
            took = time.perf_counter() - start
            assert result.samples_written == n, result
            if b > 0:  # the first batch also creates the series heads; steady state is what a cycle sees
                elapsed += took
                total_readings += n
        results[method] = total_readings / elapsed

        if method == "sql":
            continue
        # The write alone, for rows already computed (as if deltas were free).
        ts = t0 + timedelta(days=2)
        ids = list(
            Sample.objects.filter(container__pod__cluster=cluster).values_list("container_id", flat=True).distinct()
        )
        rows = [(cid, ts, 1, 0, 0.0, 1.0, None, None, 1, 60.0, 1, 0, 0.0, 1.0, None, None, False) for cid in ids]
        from apps.telemetry.partitions import ensure_partitions

        ensure_partitions([ts.date()])
        start = time.perf_counter()
        write_samples(rows, method=method)
        write_only[method] = len(rows) / (time.perf_counter() - start)

    print(f"\nIngest into PostgreSQL, batches of {n:,} readings, {args.batches} batches per method (steady state)")
    print(f"{'method':<34}{'ingest readings/s':>20}{'write-only rows/s':>20}")
    labels = {
        "bulk_create": "deltas in Python + bulk_create",
        "copy": "deltas in Python + COPY",
        "sql": "COPY + deltas in SQL (chosen)",
    }
    for method, label in labels.items():
        write = f"{write_only[method]:>20,.0f}" if method in write_only else f"{'—':>20}"
        print(f"{label:<34}{results[method]:>20,.0f}{write}")
    print(
        f"chosen / bulk_create: {results['sql'] / results['bulk_create']:.1f}x; "
        f"COPY / bulk_create write-only: {write_only['copy'] / write_only['bulk_create']:.1f}x"
    )
    print(
        json.dumps(
            {
                "name": "ingest_readings_per_second",
                "value": round(results["sql"]),
                "unit": "readings/s",
                "target": 100_000,
                "baseline": {"name": "bulk_create", "value": round(results["bulk_create"])},
            }
        )
    )
    print(
        json.dumps(
            {
                "name": "sample_write_rows_per_second",
                "value": round(write_only["copy"]),
                "unit": "rows/s",
                "target": None,
                "baseline": {"name": "bulk_create", "value": round(write_only["bulk_create"])},
            }
        )
    )
    Cluster.objects.filter(name__startswith="bench-ingest").delete()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE telemetry_sample, telemetry_serieshead")


if __name__ == "__main__":
    main()
