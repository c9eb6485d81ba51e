"""Benchmark: does the advice work? `make bench-advice` runs `lab verify` over the lab's default scenario and checks
the goals (docs/domain.md#lab-verify): applied raises bring the container under the target and inside the stated
bound, no applied plan makes the request loop's p95 latency worse, and a limit one third below a suggested raise
misses the target (suggestions are not padded). Then `lab verify --contention` (docs/domain.md#lab-contention): under
full contention no lab container gets less than 85 % of its computed shares floor (or of its limit, when that is
lower); with the quotas lifted every container's measured CPU is within ±15 % of its shares-proportional part.
Needs root and a writable cgroup v1 cpu controller.

Run from the repository root: `.venv/bin/python benchmarks/bench_advice.py [--seconds 10] [--contention-seconds 5]
[--contention-only]`. Prints the tables, one JSON line per goal for benchmarks/run_all.py, and exits 1 when a goal
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cputune.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from apps.advisor.facts import Policy  # noqa: E402
from apps.verify import contention, results, services  # noqa: E402


def advice_goals(seconds: float) -> list[results.Goal]:
    policy = Policy()
    outcomes = services.verify(seconds=seconds, policy=policy)
    for line in services.table(outcomes, policy.throttle_target):
        print(line)
    results.save_outcomes(outcomes, policy.throttle_target)  # the lab cluster's verify page shows the last run
    return results.advice_goals(outcomes, policy.throttle_target)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each advice run")
    parser.add_argument("--contention-seconds", type=float, default=5.0, help="length of each contention run")
    parser.add_argument("--contention-only", action="store_true", help="skip the advice runs (minutes)")
    args = parser.parse_args()
    goals = [] if args.contention_only else advice_goals(args.seconds)
    result = contention.run_contention(seconds=args.contention_seconds)
    print()
    for line in contention.table(result):
        print(line)
    print(
        "goals: under full contention no lab container gets less than 85 % of its computed shares floor; with the "
        "quotas lifted every container's measured CPU is within ±15 % of its shares-proportional part"
    )
    results.save_contention(result)
    goals += results.contention_goals(result.rows)
    missed = []
    for goal in goals:
        print(json.dumps(goal.as_dict()))
        if not goal.met:
            missed.append(goal.name)
    if missed:
        print("missed: " + ", ".join(missed), file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
