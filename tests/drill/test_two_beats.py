"""Drill: two beat schedulers started by mistake, on a short collection interval. Every cycle starts twice; every
run closes; no sample is stored twice and no two stored samples count the same seconds (the second run of a pair
finds the first one's readings and skips them as duplicates).

Should cputune also refuse the double start (a short per-cluster lock in `collect_cluster`)? Not for the data: with
the series heads locked during ingest (apps/telemetry/ingest.py), overlapping runs store each reading once and
never overlapping intervals — which test_concurrent_ingest.py pins down where this drill can only hope to hit it.
A double start still doubles the scrape load on every kubelet and the runs in the history, so an install must run
exactly one beat (docker-compose and deploy/ run one); a guard would be a convenience, not a correctness fix.
"""

from __future__ import annotations

import itertools

import pytest

from tests.drill.harness import SERIES, Run, head_problems, series_problems, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]
INTERVAL_S = 8  # CPUTUNE_COLLECT_INTERVAL: node tasks expire after 7.2 s, stale runs close after 30 s


def test_two_beats_start_cycles_twice_but_store_every_reading_once_and_close_every_run(install_factory):
    install = install_factory(CPUTUNE_COLLECT_INTERVAL=str(INTERVAL_S))
    install.clock.now_s = install.instant(1)
    install.clock.run()  # beat starts the cycles: the simulated time runs with the wall clock
    install.start_beats("beat-a", "beat-b")
    wait_until(lambda: len(install.db.runs()) >= 6, 3 * INTERVAL_S + 15, f"six runs started\n{install.logs()}")
    for beat in install.beats:
        beat.stop()

    def all_closed() -> list[Run] | None:
        runs = install.db.runs()
        return runs if all(run.finished_at for run in runs) else None

    runs = wait_until(all_closed, 40, f"every run closed\n{install.logs()}")

    starts = sorted(run.started_at.timestamp() for run in runs)
    doubled = sum(1 for a, b in itertools.pairwise(starts) if b - a < INTERVAL_S / 2)
    assert doubled >= 2, f"the two beats did not both start cycles: runs started at {starts}"
    assert {run.status for run in runs} == {"ok"}, [(run.id, run.status, run.nodes_failed) for run in runs]
    assert all(run.nodes_ok == len(install.nodes) for run in runs)

    dump = install.db.dump()
    assert len({(s.key, s.ts) for s in dump.samples}) == len(dump.samples)
    assert sum(run.samples_written for run in runs) == len(dump.samples), "each stored sample counted by one run"
    # The second run of a pair scraped seconds after the first: most of its readings were the same instants.
    assert len(dump.samples) < 0.8 * len(runs) * SERIES, (len(dump.samples), len(runs))
    assert series_problems(dump) == []
    assert head_problems(dump) == []
