"""Benchmark: scale of bad input. The node page's share holders at growing pod counts against the quadratic
algorithm they replaced, and a saved scrape's parse at growing sizes, streamed against the whole-file read.

Run from the repository root: `.venv/bin/python benchmarks/bench_input_scale.py`. Both baselines run in the same
process. The share-holder figures time the arithmetic the page does per pod (no database); the scrape figures are
the parse's time and traced peak memory on copies of the real k8s-1.33 scrape. Prints a table, then JSON lines.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from apps.advisor.cfs import pod_shares_floor, shares_floor  # noqa: E402
from apps.clusters.kubelet import shares_from_request_mcpu  # noqa: E402
from apps.collector.cadvisor import parse_cadvisor, parse_cadvisor_stream  # noqa: E402
from tests.security.test_scale_of_input import big_scrape  # noqa: E402

BUDGET = 510_000
TS = datetime(2026, 1, 1, tzinfo=UTC)


def old_floors(requests: list[int | None]) -> list[int]:
    """The node page's floors before: each pod's neighbours listed and converted again (quadratic)."""
    return [
        pod_shares_floor(r, [q for j, q in enumerate(requests) if j != i], BUDGET).floor_mcpu
        for i, r in enumerate(requests)
    ]


def new_floors(requests: list[int | None]) -> list[int]:
    """As apps.dashboard.nodes.share_holders: against the node's summed shares, added up once."""
    shares = [shares_from_request_mcpu(r) for r in requests]
    total = sum(shares)
    return [shares_floor(s, (total - s,) if total - s else (), BUDGET).floor_mcpu for s in shares]


def seconds(job: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        job()
        best = min(best, time.perf_counter() - started)
    return best


def traced(job: Callable[[], object]) -> tuple[float, float]:
    tracemalloc.start()
    started = time.perf_counter()
    job()
    took = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return took, peak


def main() -> None:
    figures = []
    for pods in (1_000, 2_000, 4_000):
        requests = [None if i % 11 == 0 else 1 + i % 300 for i in range(pods)]
        assert old_floors(requests) == new_floors(requests)
        new_ms = seconds(partial(new_floors, requests)) * 1000
        old_ms = seconds(partial(old_floors, requests), runs=1) * 1000
        print(f"share holders {pods:>6,} pods | new {new_ms:8.2f} ms | quadratic {old_ms:10.0f} ms")
        figures.append({"name": f"node_share_holders_{pods}_pods", "value": round(new_ms, 2), "unit": "ms",
                        "target": None, "baseline": f"quadratic: {old_ms:.0f}"})  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for copies in (10, 20, 41):
            path = Path(tmp) / f"scrape-{copies}.txt"
            big_scrape(path, copies)
            mb = path.stat().st_size / 2**20

            def streamed(p: Path = path) -> object:
                with p.open("rb") as stream:
                    return parse_cadvisor_stream(stream, default_ts=TS)

            def whole(p: Path = path) -> object:
                return parse_cadvisor(p.read_bytes(), default_ts=TS)

            stream_s, stream_mb = traced(streamed)
            whole_s, whole_mb = traced(whole)
            print(f"scrape {mb:5.1f} MB | streamed {stream_s:5.2f} s peak {stream_mb:6.1f} MB"
                  f" | whole read {whole_s:5.2f} s peak {whole_mb:6.1f} MB (traced)")  # fmt: skip
            figures.append({"name": f"scrape_parse_peak_{mb:.0f}_mb", "value": round(stream_mb, 1), "unit": "MB",
                            "target": 200, "baseline": f"whole_read: {whole_mb:.1f}"})  # fmt: skip
            figures.append({"name": f"scrape_parse_{mb:.0f}_mb", "value": round(stream_s, 2), "unit": "s",
                            "target": None, "baseline": f"whole_read: {whole_s:.2f}"})  # fmt: skip
    for figure in figures:
        print(json.dumps(figure))


if __name__ == "__main__":
    main()
