"""Drill: the API server answers 500 for the node list, then does not answer the pod list at all. Each run says why
(a problem naming the list and the status or the timeout) and ends within the timeout. Without a node list nothing
is read; without a pod list the nodes (listed first) are still read and the run is partial. The next cycle is
complete and the stored samples equal a run without the cycle that had no node list."""

from __future__ import annotations

import pytest

from tests.drill.harness import NODE_TIMEOUT_S, head_problems, nodes_at, observations_without, series_problems

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]


def test_api_server_errors_and_timeouts_end_their_run_clearly_and_the_next_cycle_is_complete(install_factory, baseline):
    install = install_factory()
    assert install.run_cycle(1).status == "ok"

    install.proxy.faults.list_status["nodes"] = 500
    failed = install.run_cycle(2)
    install.proxy.faults.list_status.clear()
    assert (failed.status, failed.nodes_total, failed.samples_written) == ("failed", 0, 0)
    [(where, message)] = install.db.problems(failed.id)
    assert where == "" and "listing nodes" in message and "HTTP 500" in message, message

    install.proxy.faults.list_hang_s["pods"] = 30.0  # the node list answers, the pod list never does
    timed_out = install.run_cycle(3)
    install.proxy.faults.list_hang_s.clear()
    assert (timed_out.status, timed_out.nodes_ok) == ("partial", len(install.nodes))
    [(where, message)] = install.db.problems(timed_out.id)
    assert "pods not listed" in message and "listing pods" in message, message
    assert f"within {NODE_TIMEOUT_S} s" in message, message
    assert (timed_out.finished_at - timed_out.started_at).total_seconds() < NODE_TIMEOUT_S + 10

    assert install.run_cycle(4).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(4)) == set(install.nodes)
    lost = [(None, install.instant(2))]  # every node of the cycle without a node list
    assert dump.observations() == observations_without(baseline.dump.up_to_instant(install.instant(4)), lost)
    assert series_problems(dump) == []
    assert head_problems(dump) == []
