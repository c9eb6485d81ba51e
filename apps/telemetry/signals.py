"""What telemetry announces, so the layers above react without the collector knowing them (data flows one way).

`series_stored` is sent once new readings of a cluster are stored — a collection cycle closed, `collect --once`
finished, a dump was imported — with `cluster` (a Cluster), `at` (the instant the readings are as of) and `wait`:
False when the sender is a worker that only announces (a receiver enqueues its work after the commit), True when a
command waits to print what came of the readings (a receiver does its work now). Receivers return lines of text for
such a command to print, or nothing. The advisor's receiver refreshes the findings (apps/advisor/receivers.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.dispatch import Signal

series_stored = Signal()


def announce_series_stored(cluster: Any, *, at: datetime, wait: bool) -> list[str]:
    """Send series_stored; returns the lines the receivers gave back, in receiver order."""
    lines: list[str] = []
    for _, answer in series_stored.send(sender=type(cluster), cluster=cluster, at=at, wait=wait):
        lines.extend(answer or [])
    return lines
