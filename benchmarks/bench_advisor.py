"""Benchmark: window aggregation + advice for every container of a 150,000-pod cluster, on one core.

Run from the repository root: `.venv/bin/python benchmarks/bench_advisor.py [--containers N] [--rows 60] [--seed 1]`.

Each container gets `--rows` samples 15 s apart (deterministic, seeded): most are healthy, some are throttled at their
limit, some show the slice-expiry symptom on an 88-CPU node with an affected kernel, some have no limit, no request or
an oversized request, with the odd collection gap. Rows are built in chunks of 2,000 containers; the timed part is what
the advisor does per container: summarize_window, the shares floor, ContainerFacts, advise. Building the SampleRow
objects from plain tuples (what the caller pays before calling) is timed in the same run as the baseline, and a
naive aggregation (per-row dicts, statistics.quantiles) and summarize_window alone are timed back to back on the
first containers, their results checked equal, for scale.
Target (issue): <= 10 s for 150,000 containers x 60 rows. Ends with one JSON line for `make bench`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apps.advisor.cfs import shares_floor  # noqa: E402
from apps.advisor.kernel import KernelVerdict  # noqa: E402
from apps.advisor.rules import ContainerFacts, Policy, advise  # noqa: E402
from apps.advisor.windows import SampleRow, WindowSummary, summarize_window  # noqa: E402
from apps.clusters.kubelet import shares_from_request_mcpu  # noqa: E402

INTERVAL_S = 15.0
PERIODS_PER_INTERVAL = 150  # 15 s of 100 ms periods, when runnable throughout
CHUNK = 2000
NAIVE_CONTAINERS = 5000
WINDOW_END = datetime(2025, 1, 1, 13, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Node:
    cpus: int
    allocatable_mcpu: int
    total_shares: int
    cpu_manager_policy: str
    kernel: KernelVerdict


NODES = (
    Node(
        88,
        87_000,
        60_000,
        "none",
        KernelVerdict("4.14.133-113.105.amzn2.x86_64", "affected", "slice_expiry", ("4.14.154",), "high", ()),
    ),
    Node(16, 15_500, 14_000, "static", KernelVerdict("5.15.0-1034-aws", "fixed", None, (), "high", ())),
    Node(4, 3_800, 3_900, "", KernelVerdict("4.4.86+", "unknown", None, (), "low", ())),
)


@dataclass(frozen=True)
class Profile:
    name: str
    weight: int
    request_mcpu: int | None
    limit_mcpu: int | None
    usage_fraction: float  # of the limit (or of the request without a limit)
    throttle_ratio: float
    threads: int


PROFILES = (
    Profile("healthy", 70, 500, 1000, 0.4, 0.01, 8),
    Profile("at-ceiling", 10, 500, 600, 0.95, 0.4, 8),
    Profile("slice-bug", 8, 600, 600, 0.5, 0.85, 120),
    Profile("no-limit", 5, 250, None, 0.8, 0.0, 4),
    Profile("oversized-request", 4, 3000, None, 0.05, 0.0, 2),
    Profile("besteffort", 3, None, None, 0.0, 0.0, 1),
)


RowValues = tuple[datetime, float, int | None, int | None, float | None, float, int, int | None, int | None, float]


def timestamps(rows: int) -> list[datetime]:
    """Sample instants ending at WINDOW_END, shared by every container (only the window's ends are compared)."""
    return [WINDOW_END - timedelta(seconds=INTERVAL_S * (rows - i)) for i in range(1, rows + 1)]


def container_values(rng: random.Random, profile: Profile, instants: list[datetime]) -> list[RowValues]:
    """One container's samples as plain tuples, deltas as ingest would have stored them (uniform noise: fast)."""
    base_mcpu = (profile.limit_mcpu or profile.request_mcpu or 100) * profile.usage_fraction
    limit = profile.limit_mcpu
    has_cfs = limit is not None
    threads = profile.threads
    random_ = rng.random
    out: list[RowValues] = []
    periods_total = throttled_total = 0
    usage_total = 0.0
    for ts in instants:
        interval = INTERVAL_S * 8 if random_() < 0.01 else INTERVAL_S  # the odd collection gap
        usage_mcpu = base_mcpu * (0.7 + 0.6 * random_())
        if limit is not None and usage_mcpu > limit:
            usage_mcpu = limit
        periods: int | None = None
        throttled: int | None = None
        throttled_s: float | None = None
        if has_cfs:
            periods = int(interval * 10 * (0.9 + 0.1 * random_()))
            ratio = min(1.0, max(0.0, profile.throttle_ratio + 0.1 * (random_() - 0.5)))
            throttled = int(periods * ratio)
            throttled_s = throttled * 0.06 * threads
            periods_total += periods
            throttled_total += throttled
        usage_total += usage_mcpu / 1000 * interval
        out.append(
            (
                ts,
                interval,
                periods,
                throttled,
                throttled_s,
                usage_mcpu / 1000 * interval,
                threads,
                periods_total if has_cfs else None,
                throttled_total if has_cfs else None,
                usage_total,
            )
        )
    return out


def advise_container(
    rows: list[SampleRow], profile: Profile, node: Node, policy: Policy, window_start: datetime
) -> int:
    summary = summarize_window(rows, window_start, WINDOW_END, INTERVAL_S)
    own_shares = shares_from_request_mcpu(profile.request_mcpu)
    floor = shares_floor(own_shares, (node.total_shares - own_shares,), node.allocatable_mcpu)
    facts = ContainerFacts(
        window=summary,
        request_mcpu=profile.request_mcpu,
        limit_mcpu=profile.limit_mcpu,
        node_cpus=node.cpus,
        node_allocatable_mcpu=node.allocatable_mcpu,
        cpu_manager_policy=node.cpu_manager_policy,
        qos_class="Burstable",
        kernel=node.kernel,
        shares_floor_mcpu=floor.floor_mcpu,
        node_total_shares=floor.total_shares,
    )
    return len(advise(facts, policy))


def naive_summary(rows: list[SampleRow], window_start: datetime) -> dict[str, float | None]:
    """The obvious implementation: a dict per row, a filter per figure, statistics.quantiles for percentiles."""
    dicts = [
        {
            "ts": r.ts,
            "interval": r.interval_s,
            "periods": r.periods_delta,
            "throttled": r.throttled_periods_delta,
            "usage": r.usage_seconds_delta,
        }
        for r in rows
    ]
    used = [
        d
        for d in dicts
        if window_start < d["ts"] <= WINDOW_END and d["interval"] is not None and 0 < d["interval"] <= 3 * INTERVAL_S  # type: ignore[operator]
    ]
    with_periods = [d for d in used if d["periods"] is not None and d["throttled"] is not None]
    periods = sum(d["periods"] for d in with_periods)  # type: ignore[misc]
    throttled = sum(d["throttled"] for d in with_periods)  # type: ignore[misc]
    rates = [d["usage"] / d["interval"] * 1000 for d in used if d["usage"] is not None]  # type: ignore[operator]
    cuts = statistics.quantiles(rates, n=100, method="inclusive") if len(rates) > 1 else rates * 99
    return {
        "throttle_ratio": min(1.0, throttled / periods) if with_periods and periods else None,
        "usage_p95_mcpu": cuts[94] if rates else None,
        "usage_max_mcpu": max(rates) if rates else None,
    }


def same(summary: WindowSummary, naive: dict[str, float | None]) -> bool:
    for key in ("throttle_ratio", "usage_p95_mcpu", "usage_max_mcpu"):
        a, b = getattr(summary, key), naive[key]
        if (a is None) != (b is None) or (a is not None and b is not None and abs(a - b) > 1e-6 * max(1.0, abs(b))):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--containers", type=int, default=150_000)
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    policy = Policy()
    window_start = WINDOW_END - timedelta(seconds=INTERVAL_S * args.rows + 1)
    weights = [p.weight for p in PROFILES]
    instants = timestamps(args.rows)

    build_s = advise_s = advise_cpu_s = naive_s = fast_s = 0.0
    naive_done = 0
    recommendations = 0
    done = 0
    while done < args.containers:
        count = min(CHUNK, args.containers - done)
        profiles = rng.choices(PROFILES, weights=weights, k=count)
        nodes = [NODES[rng.randrange(len(NODES))] for _ in range(count)]

        values = [container_values(rng, profile, instants) for profile in profiles]

        started = time.perf_counter()
        chunk = [[SampleRow._make(row) for row in container] for container in values]
        build_s += time.perf_counter() - started
        del values

        started, started_cpu = time.perf_counter(), time.process_time()
        for rows, profile, node in zip(chunk, profiles, nodes, strict=True):
            recommendations += advise_container(rows, profile, node, policy, window_start)
        advise_s += time.perf_counter() - started
        advise_cpu_s += time.process_time() - started_cpu

        if naive_done < NAIVE_CONTAINERS:
            sample = chunk[: NAIVE_CONTAINERS - naive_done]
            started = time.perf_counter()
            naive = [naive_summary(rows, window_start) for rows in sample]
            naive_s += time.perf_counter() - started
            started = time.perf_counter()
            fast = [summarize_window(rows, window_start, WINDOW_END, INTERVAL_S) for rows in sample]
            fast_s += time.perf_counter() - started
            for summary, expected in zip(fast, naive, strict=True):
                if not same(summary, expected):
                    sys.exit("naive and fast aggregation disagree: the benchmark compares different work")
            naive_done += len(sample)
        done += count

    per_container_us = advise_s / args.containers * 1e6
    print(f"containers: {args.containers:,} x {args.rows} rows, seed {args.seed}, one core")
    print(
        f"aggregate + advise: {advise_s:8.2f} s  {per_container_us:8.1f} us/container  "
        f"(CPU time {advise_cpu_s:.2f} s; {recommendations:,} recommendations)"
    )
    print(
        f"baseline, build the SampleRow objects: {build_s:8.2f} s  {build_s / args.containers * 1e6:8.1f} us/container"
    )
    print(f"ratio aggregate+advise / build rows: {advise_s / build_s:.2f}")
    if naive_done:
        naive_us = naive_s / naive_done * 1e6
        fast_us = fast_s / naive_done * 1e6
        print(
            f"aggregation only, first {naive_done:,} containers, back to back: summarize_window {fast_us:.1f} "
            f"us/container, naive (dicts + statistics.quantiles) {naive_us:.1f} us/container ({naive_us / fast_us:.1f}x)"
        )
    print(
        json.dumps(
            {
                "name": "advisor_150k_containers"
                if args.containers == 150_000
                else f"advisor_{args.containers}_containers",
                "value": round(advise_s, 3),
                "unit": "s",
                "target": 10,
                "baseline": {"name": "build_sample_rows", "value": round(build_s, 3)},
            }
        )
    )


if __name__ == "__main__":
    main()
