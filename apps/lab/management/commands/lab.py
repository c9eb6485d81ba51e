"""manage.py lab up|down|status|verify [--scenario FILE] [--if-possible] [--seconds S] [--only NAME ...] [--contention]"""

import json

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.lab import services
from apps.lab.runtime import LabError
from apps.telemetry.counters import throttle_ratio
from apps.words import format_number, plural

EXIT_NOT_POSSIBLE = 3


class Command(BaseCommand):
    help = "Start, stop or inspect the lab: real cgroups on this machine laid out like a kubelet's, throttled for real."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["up", "down", "status", "verify"])
        parser.add_argument("--scenario", help="scenario YAML (default: apps/lab/scenarios/default.yaml)")
        parser.add_argument(
            "--if-possible",
            action="store_true",
            help="with up: when this machine cannot run the lab, say why and exit with status 3 instead of failing",
        )
        parser.add_argument("--json", action="store_true", help="with status or verify: print JSON")
        parser.add_argument("--seconds", type=float, default=10.0, help="with verify: length of each run")
        parser.add_argument("--only", nargs="*", default=[], help="with verify: containers to verify")
        parser.add_argument(
            "--contention",
            action="store_true",
            help="with verify: every container busy at once against its shares floor, instead of the advice runs",
        )

    def handle(self, *args, action: str, scenario: str | None, if_possible: bool, json: bool, **options):
        if action == "verify":
            # Sent by name: the lab sits below the advisor, and verifying runs the advisor's rules on the lab.
            call_command("verify_advice", seconds=options["seconds"], only=options["only"], scenario=scenario,
                         contention=options["contention"], print_json=json, stdout=self.stdout, stderr=self.stderr)  # fmt: skip
            return
        if action == "up":
            self._up(scenario, if_possible)
        elif action == "down":
            report = services.down()
            if not report.was_running and not report.removed_cgroups:
                self.stdout.write("The lab was not running; nothing to stop.")
            else:
                self.stdout.write(
                    f"Lab stopped: {len(report.stopped_pids)} process(es) stopped, "
                    f"{len(report.removed_cgroups)} cgroup(s) removed under {report.root}."
                )
            if report.leftover:
                raise CommandError("could not remove: " + "; ".join(report.leftover))
        else:
            self._status(json)

    def _up(self, scenario: str | None, if_possible: bool) -> None:
        ok, reason = services.can_run()
        if not ok:
            message = (
                f"The lab cannot run here: {reason}. It needs root and a writable cgroup cpu controller "
                "(cgroup v1 /sys/fs/cgroup/cpu, or v2 with the cpu controller). Without it, point cputune at a "
                "cluster: manage.py add_cluster NAME --kubeconfig PATH, or import a dump with manage.py import_dump."
            )
            if if_possible:
                self.stderr.write(message)
                raise SystemExit(EXIT_NOT_POSSIBLE)
            raise CommandError(message)
        try:
            state = services.up(scenario)
        except LabError as exc:
            raise CommandError(str(exc)) from None
        inventory = state.inventory
        self.stdout.write(
            f"Lab up under {state.root}: {len(inventory.containers)} containers in "
            f"{len({(c.namespace, c.pod) for c in inventory.containers})} pods on node {inventory.node.name} "
            f"({(inventory.node.capacity_mcpu or 0) // 1000} CPUs, kernel {inventory.node.kernel_version}). "
            f"Registered as cluster '{services.LAB_CLUSTER}'; collections read it every cycle. Stop it with: manage.py lab down"
        )
        demand = inventory.demand()
        self.stdout.write(
            f"  Its workloads use about {format_number(demand.average_cores)} of this machine's CPUs on average, "
            f"{format_number(demand.peak_cores)} at most."
        )
        for note in state.cleanup.notes:
            self.stdout.write(f"  cleaned up first: {note}")

    def _status(self, as_json: bool) -> None:
        status = services.status()
        if as_json:
            self.stdout.write(json.dumps(status.as_dict(), indent=2, default=str))
            return
        if not status.running:
            self.stdout.write("The lab is not running. Start it with: manage.py lab up")
            for problem in status.problems:
                self.stdout.write(f"  {problem}")
            return
        self.stdout.write(f"Lab running under {status.root} since {status.started_at:%Y-%m-%d %H:%M:%S} UTC")
        for c in status.containers:
            known = throttle_ratio(c.nr_throttled, c.nr_periods)
            ratio = "—" if known is None else f"{known:.0%}"
            self.stdout.write(
                f"  {c.namespace}/{c.pod}/{c.container}: {'running' if c.leader_alive else 'STOPPED'}, "
                f"{c.tasks} of {plural(c.expected_tasks, 'task')}, throttled {ratio} of periods since start"
            )
