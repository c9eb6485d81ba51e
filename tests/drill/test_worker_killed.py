"""Drill: a worker's pool process is killed with SIGKILL while it reads a node. The task was acknowledged late and
is rejected back to the queue when its process is lost, so another process reads the node again: the run closes
with every node ok, and the stored samples equal a run without the fault — none lost, none twice."""

from __future__ import annotations

import os
import signal

import pytest

from tests.drill.harness import head_problems, nodes_at, pid_owning_client_port, series_problems, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]


def test_a_pool_process_killed_mid_scrape_has_its_node_task_redelivered_and_nothing_is_lost_or_doubled(
    install_factory, baseline
):
    install = install_factory()
    victim_node = install.nodes[3]
    assert install.run_cycle(1).status == "ok"

    install.proxy.hold_next_scrape(victim_node)  # the node task is caught mid-scrape, where the test can find it
    run = install.start_cycle(2)
    ports = wait_until(lambda: install.proxy.in_flight(victim_node), 30, f"{victim_node}'s scrape in flight")
    pool = install.worker.pool_pids()
    victim = wait_until(lambda: pid_owning_client_port(min(ports), pool), 10, "the pool process reading the node")
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in install.worker.pool_pids(), 10, "the killed pool process gone")
    install.proxy.release(victim_node)  # the dead process's scrape is answered into a closed socket

    run = install.wait_closed(run.id)
    assert (run.status, run.nodes_ok, run.nodes_failed) == ("ok", len(install.nodes), 0), install.logs()
    assert install.proxy.scrapes[victim_node] == 3, "cycle 1, the killed read, and the redelivered one"
    assert "WorkerLostError" in install.worker.log.read_text(), "the worker saw its process die"

    assert install.run_cycle(3).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(3)) == set(install.nodes)
    # Not just the same counters: the same deltas and intervals too, sample for sample.
    assert dump.rows() == baseline.dump.up_to_instant(install.instant(3)).rows()
    assert series_problems(dump) == []
    assert head_problems(dump) == []
