"""Server time of the dashboard's pages with a big namespace: 1,000 containers with 7 days of one-minute samples.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cputune_bench python benchmarks/bench_pages.py \
        [--containers 1000] [--days 7] [--requests 30] [--reuse] [--keep]

Builds the data directly (write_samples in day-sized COPY batches, hourly rollups computed from the same synthetic
pattern instead of re-reading 10 million samples, then the real refresh_findings), logs in with the Django test
client and times each page over --requests requests after a warm-up: namespace report (1,000 containers, page 1 of
10, default order and a sorted + filtered variant), pod pages on the 1h / 24h / 7d windows, a node page and the
namespace CSV. The baseline is the same page for a 100-container namespace of the same cluster.
Prints a table and JSON lines {"name", "value", "unit", "target", "baseline"} for `make bench`. Target: p95 ≤ 300 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from common import ensure_database, time_get  # noqa: E402 - next to this script

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "1")  # static files without collectstatic; timing runs with settings.DEBUG off
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench")

CLUSTER = "bench-pages"
BIG, SMALL = "big", "small"
NODES = 10
TARGET_MS = 300.0


def limit_of(i: int) -> int:
    return 500 + 100 * (i % 5)


def usage_of(i: int, hour: int) -> float:
    """mcpu: 30–95 % of the limit by container, ±20 % over the day; never above the limit (the quota caps it)."""
    limit = limit_of(i)
    base = limit * (0.30 + 0.65 * ((i * 37) % 100) / 100)
    return min(limit, base * (1.0 + 0.2 * math.sin(2 * math.pi * (hour % 24) / 24)))


def throttle_of(i: int, usage_mcpu: float) -> float:
    """0–1: none below 60 % of the limit, rising to 0.8 at the limit."""
    return max(0.0, (usage_mcpu / limit_of(i) - 0.6) / 0.4) * 0.8


def build(containers: int, days: int, end: datetime) -> None:
    from django.db import transaction

    from apps.advisor.services import refresh_findings
    from apps.clusters.models import Cluster, Container
    from apps.telemetry.ingest import ingest, write_samples
    from apps.telemetry.models import HourlyRollup
    from apps.telemetry.partitions import ensure_partitions
    from apps.telemetry.readings import Batch, ContainerInfo, NodeInfo, PodInfo

    cluster = Cluster.objects.create(name=CLUSTER, source="kubernetes")
    nodes = [NodeInfo(name=f"bench-node-{n}", capacity_mcpu=64_000, allocatable_mcpu=63_000,
                      kernel_version="5.4.0-1018-gke", cpu_manager_policy="none") for n in range(NODES)]  # fmt: skip
    plan = [(BIG, i) for i in range(containers)] + [(SMALL, i) for i in range(100)]
    pods = [
        PodInfo(
            namespace=ns,
            name=f"{ns}-{i}",
            uid=f"{ns}-{i}",
            node=nodes[i % NODES].name,
            qos_class="Burstable",
            workload_kind="Deployment",
            workload_name=f"{ns}-app-{i % 20}",
            containers=(ContainerInfo(name="app", request_mcpu=limit_of(i) // 2, limit_mcpu=limit_of(i)),),
        )
        for ns, i in plan
    ]
    ingest(cluster, Batch(nodes=nodes, pods=pods), now=end)
    ids = {
        (pod_ns, int(pod_name.rsplit("-", 1)[1])): cid
        for cid, pod_ns, pod_name in Container.objects.filter(pod__cluster=cluster).values_list(
            "pk", "pod__namespace", "pod__name"
        )
    }
    minutes = days * 24 * 60
    start = end - timedelta(minutes=minutes - 1)
    ensure_partitions({(start + timedelta(days=d)).date() for d in range(days + 1)} | {end.date()})
    t0 = time.perf_counter()
    written = 0
    # Cumulative counters per container, carried from one batch to the next.
    totals = {key: [0, 0, 0.0, 0.0] for key in plan}
    for batch_start in range(0, minutes, 6 * 60):  # six hours of samples per COPY
        rows: list[tuple] = []
        for key in plan:
            i = key[1]
            cid = ids[key]
            periods, throttled, throttled_s, usage_s = totals[key]
            for m in range(batch_start, min(minutes, batch_start + 6 * 60)):
                ts = start + timedelta(minutes=m)
                if m == 0:
                    rows.append(
                        (
                            cid,
                            ts,
                            0,
                            0,
                            0.0,
                            0.0,
                            None,
                            None,
                            4 + i % 60,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            None,
                            False,
                        )
                    )
                    continue
                usage = usage_of(i, ts.hour)
                d_throttled = round(600 * throttle_of(i, usage))
                d_throttled_s = d_throttled * 0.02
                d_usage_s = usage * 60 / 1000
                periods += 600
                throttled += d_throttled
                throttled_s += d_throttled_s
                usage_s += d_usage_s
                rows.append((cid, ts, periods, throttled, throttled_s, usage_s, None, None, 4 + i % 60, 60.0, 600,
                             d_throttled, d_throttled_s, d_usage_s, None, None, False))  # fmt: skip
            totals[key] = [periods, throttled, throttled_s, usage_s]
        with transaction.atomic():
            written += write_samples(rows)
        print(f"  samples: {written:,} written ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    rollups = []
    first_hour = start.replace(minute=0, second=0, microsecond=0)
    for key in plan:
        i = key[1]
        hour = first_hour
        while hour <= end:
            lo, hi = max(hour, start + timedelta(minutes=1)), min(hour + timedelta(hours=1) - timedelta(minutes=1), end)
            n = int((hi - lo).total_seconds() // 60) + 1 if hi >= lo else 0
            if n > 0:
                usage = usage_of(i, hour.hour)
                d_throttled = round(600 * throttle_of(i, usage))
                rollups.append(HourlyRollup(container_id=ids[key], hour=hour, samples=n, covered_seconds=60.0 * n,
                                            periods=600 * n, throttled_periods=d_throttled * n,
                                            throttled_seconds=d_throttled * 0.02 * n, usage_seconds=usage * 60 / 1000 * n,
                                            usage_p95_mcpu=usage, usage_max_mcpu=usage, threads_max=4 + i % 60))  # fmt: skip
            hour += timedelta(hours=1)
    HourlyRollup.objects.bulk_create(rollups, batch_size=5000, ignore_conflicts=True)
    print(f"  rollups: {len(rollups):,}; computing findings…", file=sys.stderr)
    refresh_findings(cluster, now=end)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--containers", type=int, default=1000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--reuse", action="store_true", help="keep using the data of an earlier run if present")
    parser.add_argument("--keep", action="store_true", help="leave the data for a later --reuse")
    args = parser.parse_args()

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client, override_settings

    from apps.clusters.models import Cluster, Container
    from apps.telemetry.models import HourlyRollup, Sample

    call_command("migrate", verbosity=0)
    existing = Cluster.objects.filter(name=CLUSTER).first()
    expected = args.containers + 100
    if existing and not (args.reuse and Container.objects.filter(pod__cluster=existing).count() == expected):
        ids = list(Container.objects.filter(pod__cluster=existing).values_list("pk", flat=True))
        Sample.objects.filter(container_id__in=ids).delete()
        HourlyRollup.objects.filter(container_id__in=ids).delete()
        existing.delete()
        existing = None
    if existing is None:
        end = datetime.now(UTC).replace(second=0, microsecond=0)
        print(f"building {args.containers:,} + 100 containers × {args.days} days of 1-minute samples "
              f"on {connection.vendor}…", file=sys.stderr)  # fmt: skip
        t0 = time.perf_counter()
        build(args.containers, args.days, end)
        print(f"built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    user, _ = get_user_model().objects.get_or_create(username="bench-pages")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    pod_big, pod_small = f"{BIG}-7", f"{SMALL}-7"
    base = f"/c/{CLUSTER}"
    pages = [
        ("namespace_report", f"{base}/ns/{BIG}/", f"{base}/ns/{SMALL}/"),
        ("namespace_report_sorted_filtered", f"{base}/ns/{BIG}/?sort=-usage_p95_mcpu&min_throttle_ratio=0.1",
         f"{base}/ns/{SMALL}/?sort=-usage_p95_mcpu&min_throttle_ratio=0.1"),
        ("pod_page_1h", f"{base}/ns/{BIG}/pod/{pod_big}/", f"{base}/ns/{SMALL}/pod/{pod_small}/"),
        ("pod_page_24h", f"{base}/ns/{BIG}/pod/{pod_big}/?window=24h", f"{base}/ns/{SMALL}/pod/{pod_small}/?window=24h"),
        ("pod_page_7d", f"{base}/ns/{BIG}/pod/{pod_big}/?window=7d", f"{base}/ns/{SMALL}/pod/{pod_small}/?window=7d"),
        ("node_page", f"{base}/node/bench-node-3/", None),
        ("namespace_csv", f"{base}/ns/{BIG}/recommendations.csv", f"{base}/ns/{SMALL}/recommendations.csv"),
    ]  # fmt: skip
    results = []
    # DEBUG off while timing, as in production (no query log); static files keep the storage chosen at start-up.
    with override_settings(DEBUG=False):
        for name, url, baseline_url in pages:
            p50, p95, size = time_get(client, url, args.requests, warmup=3)
            b50, b95, _ = time_get(client, baseline_url, args.requests, warmup=3) if baseline_url else (None, None, 0)
            results.append((name, p50, p95, size, b50, b95))

    print(f"\nPage server time, {args.containers:,} containers in one namespace, {args.days} days of 1-minute samples, "
          f"{connection.vendor}, {args.requests} requests each (baseline: the 100-container namespace)")  # fmt: skip
    print(f"{'page':<36}{'p50 ms':>9}{'p95 ms':>9}{'bytes':>10}{'base p50':>10}{'base p95':>10}")
    for name, p50, p95, size, b50, b95 in results:
        base50 = f"{b50:>10.1f}" if b50 is not None else f"{'—':>10}"
        base95 = f"{b95:>10.1f}" if b95 is not None else f"{'—':>10}"
        print(f"{name:<36}{p50:>9.1f}{p95:>9.1f}{size:>10,}{base50}{base95}")
    for name, p50, p95, _size, b50, b95 in results:
        for stat, value, base_value, target in (("p95", p95, b95, TARGET_MS), ("p50", p50, b50, None)):
            if name == "namespace_csv":
                target = None  # every row of the namespace, streamed: reported, not held to the page target
            print(
                json.dumps(
                    {
                        "name": f"{name}_{stat}_ms",
                        "value": round(value, 1),
                        "unit": "ms",
                        "target": target,
                        "baseline": {"name": f"{name}_100_containers_{stat}_ms", "value": round(base_value, 1)}
                        if base_value is not None
                        else None,
                    }
                )
            )
    if not args.keep:
        existing = Cluster.objects.get(name=CLUSTER)
        ids = list(Container.objects.filter(pod__cluster=existing).values_list("pk", flat=True))
        Sample.objects.filter(container_id__in=ids).delete()
        HourlyRollup.objects.filter(container_id__in=ids).delete()
        existing.delete()


if __name__ == "__main__":
    main()
