"""manage.py lab up|down|status|verify [--scenario FILE] [--if-possible] [--seconds S] [--only NAME ...] [--contention]
manage.py lab set NAMESPACE/POD/CONTAINER [--limit QTY|none] [--request QTY] [--processes N]"""

import json

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.lab import services
from apps.lab.changes import mcpu_text
from apps.lab.runtime import LabError
from apps.telemetry.counters import throttle_ratio
from apps.words import format_number, plural

EXIT_NOT_POSSIBLE = 3


class Command(BaseCommand):
    help = (
        "Start, stop, change or inspect the lab: real cgroups on this machine laid out like a kubelet's, "
        "throttled for real."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["up", "down", "status", "verify", "set"])
        parser.add_argument("target", nargs="?", help="with set: the container, NAMESPACE/POD/CONTAINER")
        parser.add_argument(
            "--limit", help="with set: the new CPU limit (250m, 1, 1.5) or 'none', resized in place like a pod"
        )
        parser.add_argument("--request", help="with set: the new CPU request, resized in place like a pod")
        parser.add_argument(
            "--processes", type=int, help="with set: restart the container with N processes (burner, bursty, lightweb)"
        )
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
        set_options = (options["target"], options["limit"], options["request"], options["processes"])
        if action == "set":
            if options["target"] is None:
                raise CommandError("lab set needs the container: lab set NAMESPACE/POD/CONTAINER [--limit …]")
            self._set(options["target"], options["limit"], options["request"], options["processes"])
            return
        if any(value is not None for value in set_options):
            raise CommandError("a container, --limit, --request and --processes go only with `lab set`")
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

    def _set(self, target: str, limit: str | None, request: str | None, processes: int | None) -> None:
        try:
            change = services.set_container(target, limit=limit, request=request, processes=processes)
        except LabError as exc:
            raise CommandError(str(exc)) from None
        name = f"{change.namespace}/{change.pod}/{change.container}"
        if change.resized:
            moved = [
                f"{what} {mcpu_text(before)} → {mcpu_text(after)}"
                for what, before, after in (
                    ("request", change.request_before, change.request_after),
                    ("limit", change.limit_before, change.limit_after),
                )
                if before != after
            ]
            kept = "" if change.restarted else ", same processes"
            self.stdout.write(
                f"Resized {name} in place ({change.qos_class}{kept}): {', '.join(moved)}. Its cgroup: "
                f"{_quota(change.quota_us, change.period_us)}, {change.shares} shares; its pod's: "
                f"{_quota(change.pod_quota_us, change.period_us)}, {change.pod_shares} shares."
            )
        if change.restarted:
            self.stdout.write(
                f"Restarted {name} with {plural(change.processes_after or 0, 'process', 'processes')} "
                f"(was {change.processes_before}): restart {change.restarts}, new container id "
                f"{change.container_id_after[:12]} (was {change.container_id_before[:12]}), "
                f"leader pid {', '.join(map(str, change.pids_after)) or 'none'}."
            )

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
            restarts = f", {plural(c.restarts, 'restart')}" if c.restarts else ""
            self.stdout.write(
                f"  {c.namespace}/{c.pod}/{c.container}: {'running' if c.leader_alive else 'STOPPED'}, "
                f"{c.tasks} of {plural(c.expected_tasks, 'task')}, throttled {ratio} of periods since start; "
                f"request {mcpu_text(c.request_mcpu)}, limit {mcpu_text(c.limit_mcpu)}, {c.qos_class}{restarts}"
            )


def _quota(quota_us: int | None, period_us: int) -> str:
    return "no quota (-1)" if quota_us is None else f"quota {quota_us} µs per {period_us} µs"
