"""Drill: the clock jumps. The served sample timestamps step back five minutes, then forward an hour, then back to
the right time (an NTP correction). Readings at or before a series' head are late and skipped, so no interval and
no delta is ever negative, a head never moves back, and what is stored before the jumps equals a run without them.

The simulated time runs two hours behind the real one, so the hour forward here still lands in the server's past:
it is stored, and the corrected readings are late until time passes the jumped head — a series stores nothing new
for as long as the jump. A jump beyond the server's own clock is refused instead (CPUTUNE_CLOCK_SKEW), which the
second drill shows; a head left beyond it (the server's clock was ahead too) restarts its series at the next
reading (tests/telemetry/test_clock_skew.py: the drill cannot move the worker's clock).
"""

from __future__ import annotations

import itertools
import time

import pytest

from tests.drill.harness import SERIES, head_problems, nodes_at, series_problems

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]


def test_clock_jumps_never_store_a_negative_interval_or_move_a_head_back(install_factory, baseline):
    install = install_factory()
    heads_seen = []

    def cycle(at_s: float, number: int) -> int:
        run = install.run_cycle(number, at_s=at_s)
        assert (run.status, run.nodes_ok) == ("ok", len(install.nodes)), install.logs()
        heads_seen.append(install.db.dump().heads)
        return run.samples_written

    assert cycle(install.instant(1), 1) == SERIES
    assert cycle(install.instant(1) - 300, 2) == 0, "five minutes back: every reading is late"
    assert cycle(install.instant(2), 3) == SERIES
    assert cycle(install.instant(2) + 3600, 4) == SERIES, "an hour forward: stored, with an hour-long interval"
    assert cycle(install.instant(3), 5) == 0, "corrected back: late again until real time passes the jumped heads"

    for before, after in itertools.pairwise(heads_seen):
        assert before.keys() <= after.keys()
        assert all(after[key][0] >= head_ts for key, (head_ts, _) in before.items()), "a series head moved back"

    dump = install.db.dump()
    assert [s for s in dump.samples if s.interval_s is not None and s.interval_s <= 0] == []
    assert [s for s in dump.samples if any(d is not None and d < 0 for d in s.deltas)] == []
    assert not any(s.reset for s in dump.samples), "no container restarted: nothing may look like a counter reset"
    jumped = [s for s in dump.samples if s.ts.timestamp() > install.instant(2) + 60]
    assert len(jumped) == SERIES and {s.interval_s for s in jumped} == {3600.0}
    assert nodes_at(dump, install.instant(2) + 3600) == set(install.nodes)
    before_jump = [s for s in dump.samples if s.ts.timestamp() <= install.instant(2)]
    assert set(before_jump) == baseline.dump.up_to_instant(install.instant(2)).rows()
    assert series_problems(dump) == []
    assert head_problems(dump) == []


def test_readings_stamped_ahead_of_the_server_clock_are_refused_and_the_series_goes_on_at_the_correction(
    install_factory, baseline
):
    """The nodes' clocks jump three hours ahead of real time for one cycle, then are corrected: that cycle's
    readings are refused with a problem per node, the next one is stored with its deltas since the last stored
    sample, and everything stored equals the run without the jump: nothing lost, nothing counted twice."""
    install = install_factory()
    assert install.run_cycle(1).status == "ok"
    assert install.run_cycle(2).samples_written == SERIES

    jumped = install.run_cycle(3, at_s=time.time() + 3 * 3600)
    assert jumped.samples_written == 0, "readings three hours ahead of the server's clock were stored"
    problems = install.db.problems(jumped.id)
    refused = {node for node, message in problems if "ahead of this server's clock" in message}
    assert refused == set(install.nodes), problems

    started = time.monotonic()
    corrected = install.run_cycle(4, at_s=install.instant(3))
    assert corrected.samples_written == SERIES, "the corrected readings are not stored at once"
    recovery_s = time.monotonic() - started
    assert install.run_cycle(5, at_s=install.instant(4)).samples_written == SERIES

    dump = install.db.dump()
    assert dump.rows() == baseline.dump.up_to_instant(install.instant(4)).rows(), "lost or duplicated readings"
    assert series_problems(dump) == []
    assert head_problems(dump) == []
    print(f"clock jump: {len(problems)} problem lines, recovered in one cycle ({recovery_s:.1f} s)")
