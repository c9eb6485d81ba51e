"""The REST API at size: the containers endpoint under 20 concurrent clients (wrk against gunicorn), and the pod
series endpoint for 7 days.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cputune_bench python benchmarks/bench_api.py [--reuse] [--drop]

Uses the data of benchmarks/bench_pages.py (1,000 containers in one namespace, 7 days of 1-minute samples; built
here when absent, or reused with --reuse after `bench_pages.py --keep`). Starts gunicorn (2 workers, as on this
2-core machine) with DEBUG off, creates a read token, then:
- wrk -c 20 -t 2 -d 15s --latency on `containers/?ordering=-throttle_ratio` (page of 100 rows): requests/s and p99;
  baseline: the same endpoint for the 100-container namespace;
- the series endpoint for one pod over 7 days (hourly rollups) and over 24 h (raw samples), p50/p95 of 30 sequential
  requests over HTTP. Target: 7-day series ≤ 200 ms.
Prints JSON lines {"name", "value", "unit", "target", "baseline"} for `make bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench")

import bench_pages  # noqa: E402 - the data builder shared with the pages benchmark
from common import BENCH_SECRET_KEY, ensure_database  # noqa: E402 - next to this script

SERIES_TARGET_MS = 200.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, token: str) -> float:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})  # noqa: S310 - local server
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - local server
        response.read()
        assert response.status == 200, response.status
    return (time.perf_counter() - start) * 1000


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def wrk(url: str, token: str, seconds: int) -> tuple[float, float]:
    """requests/s and p99 latency (ms) of wrk with 20 connections on 2 threads."""
    out = subprocess.run(
        ["wrk", "-c", "20", "-t", "2", "-d", f"{seconds}s", "--latency", "-H", f"Authorization: Token {token}", url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    p99_ms = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise SystemExit(f"wrk saw {errors.group(1)} error responses:\n{out}")
    return rps, p99_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reuse", action="store_true", help="use bench_pages' data if present")
    parser.add_argument("--drop", action="store_true", help="delete the data at the end")
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--containers", type=int, default=1000, help="when building: containers in the big namespace")
    parser.add_argument("--days", type=int, default=7, help="when building: days of samples")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk")

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.api.services import create_token
    from apps.clusters.models import Cluster, Container
    from apps.telemetry.models import HourlyRollup, Sample

    call_command("migrate", verbosity=0)
    existing = Cluster.objects.filter(name=bench_pages.CLUSTER).first()
    if existing is None or not args.reuse:
        if existing is not None:
            ids = list(Container.objects.filter(pod__cluster=existing).values_list("pk", flat=True))
            Sample.objects.filter(container_id__in=ids).delete()
            HourlyRollup.objects.filter(container_id__in=ids).delete()
            existing.delete()
        print(f"building bench_pages' data ({args.containers:,} + 100 containers × {args.days} days)…", file=sys.stderr)
        bench_pages.build(args.containers, args.days, datetime.now(UTC).replace(second=0, microsecond=0))

    user, _ = get_user_model().objects.get_or_create(username="bench-api")
    _, token = create_token(user, "read")
    port = free_port()
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": BENCH_SECRET_KEY,
        "ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONPATH": str(ROOT),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "cputune.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/api/v1/clusters/{bench_pages.CLUSTER}/namespaces"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                get(f"{base}/{bench_pages.SMALL}/containers/", token)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        containers = "containers/?ordering=-throttle_ratio"
        rps, p99 = wrk(f"{base}/{bench_pages.BIG}/{containers}", token, args.seconds)
        base_rps, base_p99 = wrk(f"{base}/{bench_pages.SMALL}/{containers}", token, args.seconds)
        pod = f"{bench_pages.BIG}-7"
        series = {}
        for label, span in (("7d", timedelta(days=7)), ("24h", timedelta(hours=24))):
            since = (datetime.now(UTC) - span).strftime("%Y-%m-%dT%H:%M:%SZ")
            url = f"{base}/{bench_pages.BIG}/pods/{pod}/series/?since={since}"
            get(url, token)  # warm-up
            series[label] = percentiles([get(url, token) for _ in range(30)])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        if args.drop:
            cluster = Cluster.objects.get(name=bench_pages.CLUSTER)
            ids = list(Container.objects.filter(pod__cluster=cluster).values_list("pk", flat=True))
            Sample.objects.filter(container_id__in=ids).delete()
            HourlyRollup.objects.filter(container_id__in=ids).delete()
            cluster.delete()

    print("\nAPI over HTTP (gunicorn, 2 workers, DEBUG off), bench_pages data (big and 100-container namespaces)")
    print(f"containers endpoint, wrk 20 connections: {rps:,.0f} req/s, p99 {p99:.0f} ms "
          f"(100-container namespace: {base_rps:,.0f} req/s, p99 {base_p99:.0f} ms)")  # fmt: skip
    for label, (p50, p95) in series.items():
        print(f"series endpoint, one pod, {label}: p50 {p50:.0f} ms, p95 {p95:.0f} ms (30 sequential requests)")
    lines = [
        {"name": "api_containers_20_clients_rps", "value": round(rps, 1), "unit": "req/s", "target": None,
         "baseline": {"name": "100_containers_rps", "value": round(base_rps, 1)}},
        {"name": "api_containers_20_clients_p99_ms", "value": round(p99, 1), "unit": "ms", "target": None,
         "baseline": {"name": "100_containers_p99_ms", "value": round(base_p99, 1)}},
        {"name": "api_series_7d_p95_ms", "value": round(series["7d"][1], 1), "unit": "ms", "target": SERIES_TARGET_MS,
         "baseline": {"name": "api_series_24h_p95_ms", "value": round(series["24h"][1], 1)}},
    ]  # fmt: skip
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
