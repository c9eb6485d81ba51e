"""A full collection cycle for a simulated cluster: real Celery workers on Redis, PostgreSQL, scrapes over HTTP.

    python benchmarks/bench_cycle.py [--nodes 1000] [--concurrency 2] [--cycles 2]

The API-server stand-in (standins/apiserver.py) runs in its own process and serves N copies of the
recorded 1.33 minikube node (24 pods, its real 1.3 MB cAdvisor scrape, renamed per copy). A worker with
`--concurrency` processes takes the cycle task and one task per node. Printed per cycle: wall time from enqueue to
the run closing, node tasks/s, readings/s, samples written, and the workers' peak RSS (VmHWM).
Target (collector issue): 1,000 nodes ≤ 60 s with two worker processes, peak worker memory ≤ 300 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from common import BENCH_SECRET_KEY, ensure_database  # noqa: E402 - next to this script

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")
os.environ.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
os.environ.setdefault("CPUTUNE_NODE_TIMEOUT", "30")
FIXTURE = ROOT / "tests/fixtures/clusters/k8s-1.33-minikube"

STANDIN = """
import sys, time
from standins.apiserver import ApiServerStandin
with ApiServerStandin(sys.argv[1], replicas=int(sys.argv[2])) as server:
    server.write_kubeconfig(sys.argv[3])
    print("ready", flush=True)
    while True:
        time.sleep(3600)
"""


def peak_rss_mb(root_pid: int) -> float:
    """Largest VmHWM among the worker's processes (the pool children do the work)."""
    peak = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        pid, ppid = int(fields["Pid"]), int(fields["PPid"])
        if (pid == root_pid or ppid == root_pid) and "VmHWM" in fields:
            peak = max(peak, int(fields["VmHWM"].split()[0]))
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=2)
    args = parser.parse_args()

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from apps.clusters.models import Cluster
    from apps.clusters.services import register_cluster
    from apps.collector.models import CollectionRun
    from apps.collector.tasks import collect_cluster
    from cputune.celery import app

    call_command("migrate", verbosity=0)
    Cluster.objects.filter(name="bench-cycle").delete()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE telemetry_sample, telemetry_serieshead, telemetry_hourlyrollup")
    app.control.purge()

    tmp = Path(tempfile.mkdtemp(prefix="bench-cycle-"))
    kubeconfig = tmp / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CPUTUNE_DISABLE_SCHEDULES": "collect-all-clusters"}
    standin = subprocess.Popen(
        [sys.executable, "-c", STANDIN, str(FIXTURE), str(args.nodes), str(kubeconfig)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    worker = None
    try:
        assert standin.stdout is not None and standin.stdout.readline().strip() == "ready"
        cluster, _ = register_cluster("bench-cycle", "kubernetes", kubeconfig_path=str(kubeconfig))
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cputune", "worker", "-l", "warning", "-c", str(args.concurrency),
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-P", "prefork"],
            cwd=ROOT, env=env, start_new_session=True,
        )  # fmt: skip
        time.sleep(3)
        results = []
        for cycle in range(1, args.cycles + 1):
            started = time.monotonic()
            before = CollectionRun.objects.filter(cluster=cluster).count()
            collect_cluster.delay(cluster.pk)
            run = None
            while time.monotonic() - started < 900:
                run = CollectionRun.objects.filter(cluster=cluster).order_by("-started_at").first()
                if (
                    run is not None
                    and CollectionRun.objects.filter(cluster=cluster).count() > before
                    and run.finished_at
                ):
                    break
                time.sleep(0.25)
            wall = time.monotonic() - started
            assert run is not None and run.finished_at, "the cycle did not finish within 15 minutes"
            readings = sum(run.node_results.values_list("readings", flat=True))
            results.append((cycle, wall, run, readings))
            print(
                f"cycle {cycle}: {args.nodes} nodes in {wall:.1f} s — {run.nodes_ok} ok / {run.nodes_failed} failed, "
                f"{args.nodes / wall:.1f} node tasks/s, {readings / wall:,.0f} readings/s, "
                f"{run.samples_written:,} samples written",
                flush=True,
            )
        rss = peak_rss_mb(worker.pid)
        print(f"peak worker RSS: {rss:.0f} MB (concurrency {args.concurrency})")
        first_wall = results[0][1]
        print(json.dumps({"name": f"cycle_{args.nodes}_nodes_wall", "value": round(first_wall, 1), "unit": "s",
                          "target": 60 if args.nodes == 1000 else None, "baseline": None}))  # fmt: skip
        print(json.dumps({"name": f"cycle_{args.nodes}_nodes_worker_peak_rss", "value": round(rss), "unit": "MB",
                          "target": 300, "baseline": None}))  # fmt: skip
        print(json.dumps({"name": f"cycle_{args.nodes}_nodes_readings_per_second",
                          "value": round(results[0][3] / first_wall), "unit": "readings/s", "target": None,
                          "baseline": None}))  # fmt: skip
    finally:
        for proc in (worker, standin):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # the worker's warm shutdown stops its pool itself
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # anything its children left behind


if __name__ == "__main__":
    main()
