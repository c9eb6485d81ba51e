"""What the benchmark scripts share: their PostgreSQL database, and timing a page with the Django test client."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

# Outside DEBUG the settings refuse a key under 50 characters; the scripts run with DEBUG off, as production does.
BENCH_SECRET_KEY = "benchmarks-only-not-secret-" + "b" * 40


def ensure_database(url: str) -> None:
    """Create the benchmark's PostgreSQL database if it is missing (nothing to do for SQLite)."""
    if not url.startswith(("postgres://", "postgresql://")):
        return
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def time_get(client: Any, url: str, requests: int, *, warmup: int = 2) -> tuple[float, float, int]:
    """(p50 ms, p95 ms, response bytes) of `requests` GETs after `warmup` untimed ones; exits on a non-200."""
    times: list[float] = []
    size = 0
    for attempt in range(warmup + requests):
        began = time.perf_counter()
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        took = (time.perf_counter() - began) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}: {body[:300]!r}")
        if attempt >= warmup:
            times.append(took)
        size = len(body)
    return statistics.median(times), nearest_rank(times, 0.95), size
