"""Drill: a kubelet that hangs. Its node fails within the node timeout, the others are stored, the next cycle is
complete, and what was stored equals a run without the fault less that node's one lost scrape."""

from __future__ import annotations

import pytest

from tests.drill.harness import NODE_TIMEOUT_S, head_problems, nodes_at, observations_without, series_problems

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]


def test_a_hanging_kubelet_fails_its_node_within_the_timeout_and_the_next_cycle_reads_it_again(
    install_factory, baseline
):
    install = install_factory()
    hung = install.nodes[2]
    assert install.run_cycle(1).status == "ok"

    install.proxy.faults.scrape_hang_s[hung] = 30.0  # ten node timeouts: only the timeout can end it
    run = install.run_cycle(2)
    install.proxy.faults.scrape_hang_s.clear()

    assert (run.status, run.nodes_ok, run.nodes_failed) == ("partial", len(install.nodes) - 1, 1)
    outcome = install.db.node_outcomes(run.id)[hung]
    assert not outcome.ok and f"no complete answer within {NODE_TIMEOUT_S} s" in outcome.error
    # The node task gave up after one node timeout (plus the worker's own latency), not after the hang.
    assert outcome.seconds_after_start < NODE_TIMEOUT_S + 10, outcome
    assert install.proxy.scrapes[hung] == 2, "a read timeout is not retried: the next cycle is the retry"

    assert install.run_cycle(3).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(3)) == set(install.nodes), "the next cycle read every node"
    expected = observations_without(baseline.dump.up_to_instant(install.instant(3)), [(hung, install.instant(2))])
    assert dump.observations() == expected
    assert series_problems(dump) == []
    assert head_problems(dump) == []
