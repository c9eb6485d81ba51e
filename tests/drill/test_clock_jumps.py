"""Drill: the clock jumps. The served sample timestamps step back five minutes, then forward an hour, then back to
the right time (an NTP correction). Readings at or before a series' head are late and skipped, so no interval and
no delta is ever negative, a head never moves back, and what is stored before the jumps equals a run without them.

What it costs, shown here on purpose: after a forward jump the corrected readings are all late until real time
passes the jumped head — a series stores nothing new for as long as the jump (an hour here). cputune keeps
heads monotonic rather than trust either clock; a reading far in the future of the collector's own clock could be
refused instead (not done: it needs the collector's clock to be the right one).
"""

from __future__ import annotations

import itertools

import pytest

from tests.drill.harness import CONTAINERS, head_problems, nodes_at, series_problems

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]


def test_clock_jumps_never_store_a_negative_interval_or_move_a_head_back(install_factory, baseline):
    install = install_factory()
    heads_seen = []

    def cycle(at_s: float, number: int) -> int:
        run = install.run_cycle(number, at_s=at_s)
        assert (run.status, run.nodes_ok) == ("ok", len(install.nodes)), install.logs()
        heads_seen.append(install.db.dump().heads)
        return run.samples_written

    assert cycle(install.instant(1), 1) == CONTAINERS
    assert cycle(install.instant(1) - 300, 2) == 0, "five minutes back: every reading is late"
    assert cycle(install.instant(2), 3) == CONTAINERS
    assert cycle(install.instant(2) + 3600, 4) == CONTAINERS, "an hour forward: stored, with an hour-long interval"
    assert cycle(install.instant(3), 5) == 0, "corrected back: late again until real time passes the jumped heads"

    for before, after in itertools.pairwise(heads_seen):
        assert before.keys() <= after.keys()
        assert all(after[key][0] >= head_ts for key, (head_ts, _) in before.items()), "a series head moved back"

    dump = install.db.dump()
    assert [s for s in dump.samples if s.interval_s is not None and s.interval_s <= 0] == []
    assert [s for s in dump.samples if any(d is not None and d < 0 for d in s.deltas)] == []
    assert not any(s.reset for s in dump.samples), "no container restarted: nothing may look like a counter reset"
    jumped = [s for s in dump.samples if s.ts.timestamp() > install.instant(2) + 60]
    assert len(jumped) == CONTAINERS and {s.interval_s for s in jumped} == {3600.0}
    assert nodes_at(dump, install.instant(2) + 3600) == set(install.nodes)
    before_jump = [s for s in dump.samples if s.ts.timestamp() <= install.instant(2)]
    assert set(before_jump) == baseline.dump.up_to_instant(install.instant(2)).rows()
    assert series_problems(dump) == []
    assert head_problems(dump) == []
