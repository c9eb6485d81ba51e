"""`manage.py agent`: run the node agent from a Django install (the DaemonSet image runs agent/cputune_agent.py alone)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent import cputune_agent


class Command(BaseCommand):
    help = "Read this node's kubelet CPU cgroups and push them to cputune's ingest API every --interval seconds."

    def add_arguments(self, parser: CommandParser) -> None:
        cputune_agent.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = cputune_agent.run(cputune_agent.AgentOptions.from_mapping(options))
        if status != 0:
            raise CommandError(f"agent stopped with status {status} (see the log above)", returncode=status)
