"""Drill: PostgreSQL crashes and restarts mid-cycle, under two node tasks that have read their kubelet and are about
to store it. The tasks retry once the database answers again; the run closes; nothing is half-written (every series
head is its container's latest sample); the next cycle is complete; the stored samples equal a run without the
fault."""

from __future__ import annotations

import time
from unittest import mock

import pytest
from celery.exceptions import Retry
from django.db import OperationalError

from apps.collector import tasks
from tests.drill.harness import head_problems, nodes_at, series_problems, wait_until


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.root
def test_a_postgres_crash_mid_cycle_is_retried_through_and_leaves_nothing_half_written(
    install_factory, baseline, drill_services
):
    install = install_factory()
    assert install.run_cycle(1).status == "ok"

    # Both pool processes are caught between their scrape and their writes; the other nodes are done.
    held = install.nodes[-2:]
    for node in held:
        install.proxy.hold_next_scrape(node)
    run = install.start_cycle(2)
    wait_until(lambda: all(install.proxy.in_flight(node) for node in held), 30, "both held scrapes in flight")
    install.wait_outcomes(run.id, len(install.nodes) - 2)
    drill_services.postgres.stop("immediate")  # a crash: connections cut, recovery on the next start
    for node in held:
        install.proxy.release(node)
    time.sleep(4.0)  # the tasks meet the outage
    drill_services.postgres.start()

    run = install.wait_closed(run.id, timeout_s=60)
    log = install.worker.log.read_text()
    assert "OperationalError" in log and "Retry in" in log, "the tasks met the outage and retried"
    assert (run.status, run.nodes_ok, run.nodes_failed) == ("ok", len(install.nodes), 0), install.logs()

    dump = install.db.dump()
    assert head_problems(dump) == [], "a sample was stored without its series head, or the reverse"
    assert install.run_cycle(3).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(3)) == set(install.nodes)
    assert dump.rows() == baseline.dump.up_to_instant(install.instant(3)).rows()
    assert series_problems(dump) == []
    assert head_problems(dump) == []


def test_a_node_task_that_loses_the_database_is_retried_with_a_growing_delay():
    """The unit behind the drill: an OperationalError schedules a retry (3 s, then 6 s…), it does not fail the node."""
    lost = OperationalError("consuming input failed: server closed the connection unexpectedly")
    with (
        mock.patch.object(tasks.services, "collect_node", side_effect=lost),
        mock.patch.object(tasks, "close_old_connections") as reconnect,
        mock.patch.object(tasks.collect_node, "retry", side_effect=Retry("retry")) as retry,
        pytest.raises(Retry),
    ):
        tasks.collect_node.run(1, "node-a")
    reconnect.assert_called_once()
    assert retry.call_args.kwargs["countdown"] == tasks.DATABASE_RETRY_S
    assert retry.call_args.kwargs["exc"] is lost
