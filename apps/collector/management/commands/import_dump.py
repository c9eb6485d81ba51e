from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.collector.dump import DumpError, format_summary, import_dump
from apps.words import printable


class Command(BaseCommand):
    help = (
        "Import offline dumps of a cluster: `kubectl get nodes -o json|yaml`, `kubectl get pods -A -o json|yaml` and "
        "saved /metrics/cadvisor scrapes, one per node. One import gives lifetime counters; importing later scrapes "
        "of the same nodes gives window deltas."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name (created with source 'dump' if missing)")
        parser.add_argument("--nodes", required=True, metavar="PATH", help="kubectl get nodes -o json|yaml output")
        parser.add_argument("--pods", required=True, metavar="PATH", help="kubectl get pods -A -o json|yaml output")
        parser.add_argument(
            "--metrics",
            required=True,
            action="append",
            metavar="NODE=PATH",
            help="a node's saved /metrics/cadvisor text (repeat once per node)",
        )
        parser.add_argument(
            "--at",
            metavar="ISO8601",
            help="the instant of this batch, e.g. 2026-11-30T10:00:00Z (no zone: UTC); "
            "default: the scrapes' own sample timestamps, else now",
        )

    def handle(
        self, *args: Any, cluster: str, nodes: str, pods: str, metrics: list[str], at: str | None, **options: Any
    ) -> None:
        try:
            result = import_dump(cluster, nodes, pods, _metrics(metrics), _instant(at) if at else None)
        except DumpError as exc:
            raise CommandError(printable(str(exc))) from None
        # Lines quote names and problems from the files: escaped, they cannot move the cursor or retitle the terminal.
        for line in format_summary(result):
            self.stdout.write(printable(line))


def _metrics(pairs: list[str]) -> dict[str, str]:
    """`NODE=PATH` arguments → {node: path}; a missing `=`, an empty side or a node given twice is an error."""
    out: dict[str, str] = {}
    for pair in pairs:
        node, sep, path = pair.partition("=")
        if not sep or not node.strip() or not path.strip():
            raise CommandError(f"--metrics {pair!r}: expected NODE=PATH, e.g. --metrics node-1=node-1-cadvisor.txt")
        node = node.strip()
        if node in out:
            raise CommandError(f"--metrics: node {node!r} is given twice ({out[node]} and {path})")
        out[node] = path.strip()
    return out


def _instant(text: str) -> datetime:
    """An ISO 8601 instant; without a zone it is UTC."""
    try:
        instant = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(f"--at {text!r} is not an ISO 8601 instant (e.g. 2026-11-30T10:00:00Z)") from None
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
