"""Benchmark: cputune's cAdvisor parser against prometheus-client's text parser, and against a bare line split.

Run from the repository root: `.venv/bin/python benchmarks/bench_parser.py [--runs N]`.

Two bodies: the real 1.3 MB scrape of tests/fixtures/clusters/k8s-1.33-minikube, and a 110-pod node (the Kubernetes
per-node maximum) made by replicating that scrape's pod series under new pod names and cgroup ids. Each figure is the
best of N runs. prometheus-client is given an already decoded str (its decode is not timed) and all its families are
consumed. Before timing, the readings derived from prometheus-client's samples are checked equal to the parser's.
Prints a table, then one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from apps.collector.cadvisor import parse_cadvisor  # noqa: E402
from tests.collector.test_cadvisor import reference_readings  # noqa: E402

REAL_SCRAPE = ROOT / "tests" / "fixtures" / "clusters" / "k8s-1.33-minikube" / "cadvisor.txt"
NODE_PODS = 110
SPEEDUP_TARGET = 25  # at least this many times faster than prometheus-client
SPLIT_CEILING = 10  # at most this many times the bare split
DEFAULT_TS = datetime(2025, 1, 1, tzinfo=UTC)

_POD_LABEL = re.compile(rb'(?<=[{,])pod="([^"]+)"')
_ID_LABEL = re.compile(rb'(?<=[{,])id="([^"]*)"')


def node_with_pods(real: bytes, pods: int) -> bytes:
    """The real scrape with its pod series replicated under new names until the node runs `pods` pods.

    Copies of a line stay next to it, so each family stays one block as cAdvisor writes it. Node-level lines are kept once.
    """
    names = sorted({m.group(1) for m in _POD_LABEL.finditer(real)})
    copies = {name: pods // len(names) + (1 if i < pods % len(names) else 0) for i, name in enumerate(names)}
    out: list[bytes] = []
    for line in real.split(b"\n"):
        pod = _POD_LABEL.search(line)
        if pod is None:
            out.append(line)
            continue
        for copy in range(copies[pod.group(1)]):
            suffix = b"-r%d" % copy
            renamed = _POD_LABEL.sub(rb'pod="\1' + suffix + b'"', line, count=1)
            out.append(_ID_LABEL.sub(rb'id="\1' + suffix + b'"', renamed, count=1))
    return b"\n".join(out)


def best_times_ms(work: dict[str, Callable[[], object]], runs: int, every: dict[str, int]) -> dict[str, float]:
    """Best time of each piece of work over `runs` rounds, interleaved so a busy spell hits them all alike.

    A piece listed in `every` runs only every that many rounds (prometheus-client takes seconds on the big body).
    """
    best = dict.fromkeys(work, math.inf)
    for round_number in range(runs):
        for name, job in work.items():
            if round_number % every.get(name, 1):
                continue
            started = time.perf_counter()
            job()
            best[name] = min(best[name], time.perf_counter() - started)
    return {name: seconds * 1000 for name, seconds in best.items()}


def consume_prometheus_client(text: str) -> int:
    samples = 0
    for family in text_string_to_metric_families(text):
        samples += len(family.samples)
    return samples


def measure(label: str, data: bytes, runs: int) -> list[dict[str, object]]:
    text = data.decode("utf-8")
    scrape = parse_cadvisor(data, default_ts=DEFAULT_TS)
    readings, pod_readings, has_cfs = reference_readings(data, default_ts=DEFAULT_TS)
    if (scrape.readings, scrape.pod_readings, scrape.has_cfs_counters) != (readings, pod_readings, has_cfs):
        raise SystemExit(f"{label}: the parser's readings differ from prometheus-client's; not timing a wrong answer")

    times_ms = best_times_ms(
        {
            "split": lambda: data.split(b"\n"),
            "ours": lambda: parse_cadvisor(data, default_ts=DEFAULT_TS),
            "prometheus_client": lambda: consume_prometheus_client(text),
        },
        runs,
        every={"prometheus_client": 3},
    )
    split_ms, ours_ms, prometheus_ms = times_ms["split"], times_ms["ours"], times_ms["prometheus_client"]
    target_ms = min(prometheus_ms / SPEEDUP_TARGET, split_ms * SPLIT_CEILING)

    print(
        f"{label:<34} {len(data) / 1e6:>7.1f} MB {scrape.lines:>8} lines {len(scrape.readings):>5} readings"
        f" | split {split_ms:>8.2f} ms | parse_cadvisor {ours_ms:>8.2f} ms | prometheus_client {prometheus_ms:>9.1f} ms"
        f" | {prometheus_ms / ours_ms:>6.1f}x faster, {ours_ms / split_ms:>4.1f}x split"
        f" | target ≤ {target_ms:.2f} ms: {'met' if ours_ms <= target_ms else 'NOT met'}"
    )
    baseline = {"name": "prometheus_client", "value": round(prometheus_ms, 3)}
    return [
        {"name": f"parse_cadvisor.{label}", "value": round(ours_ms, 3), "unit": "ms", "target": round(target_ms, 3),
         "baseline": baseline},
        {"name": f"prometheus_client.{label}", "value": round(prometheus_ms, 3), "unit": "ms", "target": None,
         "baseline": None},
        {"name": f"bytes_split.{label}", "value": round(split_ms, 3), "unit": "ms", "target": None, "baseline": None},
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=int,
        default=9,
        help="rounds; the best of each is kept (prometheus-client runs every third round)",
    )
    args = parser.parse_args()

    real = REAL_SCRAPE.read_bytes()
    node = node_with_pods(real, NODE_PODS)
    print(f"target: ≥ {SPEEDUP_TARGET}x faster than prometheus_client and ≤ {SPLIT_CEILING}x a bare split; best of N")
    figures = measure("real_k8s_1_33_scrape", real, args.runs) + measure("node_110_pods", node, args.runs)
    for figure in figures:
        print(json.dumps(figure))


if __name__ == "__main__":
    main()
