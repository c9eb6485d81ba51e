"""Drill: the broker (Redis, with its append-only file as in docker-compose.yml) restarts mid-cycle.

The task in progress finishes and closes the run; the next cycle is complete; the stored samples equal a run without
the fault. With celery 5.7.0 / kombu 5.7.0 (the newest releases) the worker process itself does not survive this:
when the broker drops while a late-acknowledged task runs, the consumer's reconnect closes the old channel twice,
the second close tries to hand the unacknowledged message back through a transport already torn down, and the
worker stops with "Unrecoverable error: AttributeError: 'NoneType' object has no attribute 'hostname'" (after its
running tasks end). No Celery setting avoids it, so a supervisor starts it again: cputune.supervise under `make
run` and here, docker-compose `restart: unless-stopped`, a Kubernetes Deployment. The drills hold that to account:
whatever the worker does, a worker serves the next cycles.
"""

from __future__ import annotations

import time

import pytest

from tests.drill.harness import head_problems, nodes_at, series_problems, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.root]
WORKER_DIED = "Unrecoverable error"
RESTARTED = "[supervise] "


def restart_redis_under_a_running_task(install, redis) -> int:
    """Hold the last node (tasks are sent in name order) mid-scrape until every other node is done, so the restart
    catches a cycle in progress with nothing queued; returns the run's id."""
    last = install.nodes[-1]
    install.proxy.hold_next_scrape(last)
    run = install.start_cycle(2)
    wait_until(lambda: install.proxy.in_flight(last), 30, f"{last}'s scrape in flight")
    install.wait_outcomes(run.id, len(install.nodes) - 1)
    redis.restart(down_s=2.0)
    install.proxy.release(last)
    return run.id


def wait_serving(install) -> None:
    """If the worker stopped (see the module docstring), wait for the supervisor to have started it again."""
    log = install.worker.log
    started = time.monotonic()
    if WORKER_DIED in log.read_text():
        wait_until(lambda: RESTARTED in log.read_text() and log.read_text().count(" ready.") >= 2, 60,
                   f"the supervisor starting the worker again\n{install.logs()}")  # fmt: skip
    assert install.worker.proc is not None and install.worker.proc.poll() is None, "the supervisor itself exited"
    print(f"worker died: {WORKER_DIED in log.read_text()}, serving again after {time.monotonic() - started:.1f} s")


def test_a_redis_restart_mid_cycle_loses_no_sample_and_the_next_cycle_is_complete(
    install_factory, baseline, drill_services
):
    install = install_factory(supervised=True)
    assert install.run_cycle(1).status == "ok"
    run_id = restart_redis_under_a_running_task(install, drill_services.redis)

    run = install.wait_closed(run_id)
    assert (run.status, run.nodes_ok) == ("ok", len(install.nodes)), install.logs()
    assert "Connection to broker lost" in install.worker.log.read_text(), "the worker saw Redis go away"
    wait_serving(install)

    assert install.run_cycle(3, timeout_s=90).status == "ok"
    assert install.run_cycle(4).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(4)) == set(install.nodes)
    assert dump.rows() == baseline.dump.up_to_instant(install.instant(4)).rows()
    assert series_problems(dump) == []
    assert head_problems(dump) == []


def test_the_worker_keeps_serving_after_a_redis_restart_under_a_running_task(install_factory, drill_services):
    install = install_factory(supervised=True)
    assert install.run_cycle(1).status == "ok"
    install.wait_closed(restart_redis_under_a_running_task(install, drill_services.redis))
    wait_serving(install)
    assert install.run_cycle(3, timeout_s=60).status == "ok"
    assert install.run_cycle(4, timeout_s=60).status == "ok"


def test_tasks_queued_when_redis_restarts_are_still_there_after_it(install_factory, baseline, drill_services):
    """Both pool processes held mid-scrape, the cycle's other node tasks wait in Redis; it restarts; they are all
    done after it, from its append-only file: no node lost, none read twice. (Tasks a worker had reserved come
    back after the visibility timeout, 30 s here.)"""
    install = install_factory(supervised=True, CPUTUNE_VISIBILITY_TIMEOUT="30")
    assert install.run_cycle(1).status == "ok"
    held = install.nodes[:2]
    for node in held:
        install.proxy.hold_next_scrape(node)
    run = install.start_cycle(2)
    wait_until(lambda: all(install.proxy.in_flight(node) for node in held), 30, "both held scrapes in flight")
    queued = int(drill_services.redis.command("LLEN", "celery").split(b"\r\n")[0].lstrip(b":"))
    assert queued >= 1, "no node task waiting in Redis: the drill did not catch a queue"
    print(f"{queued} node tasks queued at the restart")
    drill_services.redis.restart(down_s=2.0)  # (the worker may take some of them as soon as Redis is back)
    for node in held:
        install.proxy.release(node)

    run = install.wait_closed(run.id, timeout_s=100)
    assert (run.status, run.nodes_ok) == ("ok", len(install.nodes)), install.logs()
    wait_serving(install)
    assert install.run_cycle(3, timeout_s=90).status == "ok"
    dump = install.db.dump()
    assert nodes_at(dump, install.instant(3)) == set(install.nodes)
    assert dump.rows() == baseline.dump.up_to_instant(install.instant(3)).rows(), "lost or duplicated readings"
    assert series_problems(dump) == []
    assert head_problems(dump) == []
