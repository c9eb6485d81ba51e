"""Drill: the broker (Redis, without persistence) restarts mid-cycle, while a node task is being worked on.

The task in progress finishes and closes the run; the next cycle is complete; the stored samples equal a run without
the fault. With celery 5.7.0 / kombu 5.7.0 the worker process itself does not survive this: when the broker drops
while a late-acknowledged task runs, the consumer's reconnect closes the old channel twice, the second close tries
to hand the unacknowledged message back through a transport already torn down, and the worker stops with
"Unrecoverable error: AttributeError: 'NoneType' object has no attribute 'hostname'" (after its running tasks end).
An install runs the worker under a supervisor that starts it again (docker-compose `restart: unless-stopped`, a
Kubernetes Deployment), which the first drill does too; the second drill pins the upstream behaviour down (strict
xfail), so the day an upgrade fixes it the test says so.
"""

from __future__ import annotations

import pytest

from tests.drill.harness import head_problems, nodes_at, series_problems, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]
WORKER_DIED = "Unrecoverable error"


class WorkerStopped(AssertionError):
    """The worker process stopped instead of reconnecting."""


def restart_redis_under_a_running_task(install, redis) -> int:
    """Hold the last node (tasks are sent in name order) mid-scrape until every other node is done, so the restart
    catches a cycle in progress with nothing queued that an emptied Redis would lose; returns the run's id."""
    last = install.nodes[-1]
    install.proxy.hold_next_scrape(last)
    run = install.start_cycle(2)
    wait_until(lambda: install.proxy.in_flight(last), 30, f"{last}'s scrape in flight")
    install.wait_outcomes(run.id, len(install.nodes) - 1)
    redis.restart(down_s=2.0)
    install.proxy.release(last)
    return run.id


def test_a_redis_restart_mid_cycle_loses_no_sample_and_the_next_cycle_is_complete(
    install_factory, baseline, drill_services
):
    install = install_factory()
    assert install.run_cycle(1).status == "ok"
    run_id = restart_redis_under_a_running_task(install, drill_services.redis)

    run = install.wait_closed(run_id)
    assert (run.status, run.nodes_ok) == ("ok", len(install.nodes)), install.logs()
    assert "Connection to broker lost" in install.worker.log.read_text(), "the worker saw Redis go away"
    worker = install.worker
    if WORKER_DIED in worker.log.read_text():  # see the module docstring: the supervisor's turn
        wait_until(lambda: worker.proc is not None and worker.proc.poll() is not None, 30, "the worker exiting")
        install.worker = install.start_worker("worker-restarted")

    assert install.run_cycle(3, timeout_s=90).status == "ok"
    assert install.run_cycle(4).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(4)) == set(install.nodes)
    assert dump.rows() == baseline.dump.up_to_instant(install.instant(4)).rows()
    assert series_problems(dump) == []
    assert head_problems(dump) == []


@pytest.mark.xfail(
    strict=True,
    raises=WorkerStopped,
    reason="celery 5.7.0 / kombu 5.7.0: the worker stops on a broker loss while a late-acked task runs",
)
def test_the_worker_process_itself_survives_a_redis_restart_under_a_running_task(install_factory, drill_services):
    install = install_factory()
    assert install.run_cycle(1).status == "ok"
    install.wait_closed(restart_redis_under_a_running_task(install, drill_services.redis))
    log = install.worker.log.read_text()
    if WORKER_DIED in log:
        raise WorkerStopped(log[log.find(WORKER_DIED) : log.find(WORKER_DIED) + 200])
    assert install.run_cycle(3, timeout_s=60).status == "ok"
