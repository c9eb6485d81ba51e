"""manage.py verify_advice [--seconds S] [--only NAME ...] [--contention] [--json FILE] (also: manage.py lab verify)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.advisor.policy import policy_from_settings
from apps.verify import contention, results, services


class Command(BaseCommand):
    help = (
        "Apply the advisor's plan for each lab container to real cgroups and measure: before, expected, after. "
        "Needs root and a writable cgroup cpu controller; runs one container at a time."
    )

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=10.0, help="length of each run (default 10)")
        parser.add_argument("--only", nargs="*", default=[], help="containers to verify (pod or container names)")
        parser.add_argument("--scenario", help="scenario YAML (default: the lab's default scenario)")
        parser.add_argument("--json", dest="json_path", help="write the outcomes (or rows) to this JSON file")
        parser.add_argument("--print-json", action="store_true", help="print the JSON written instead of the table")
        parser.add_argument(
            "--contention",
            action="store_true",
            help="instead: every container busy at once, measured against its shares floor, with and without quotas",
        )

    def handle(self, *args, seconds: float, only: list[str], scenario: str | None, json_path: str | None, **options):
        if not 1 <= seconds <= 600:
            raise CommandError(f"--seconds {seconds:g} is outside 1–600")
        if options.get("contention"):
            self._contention(seconds, scenario, json_path, options.get("print_json", False))
            return
        policy = policy_from_settings()
        try:
            outcomes = services.verify(seconds=seconds, only=only, scenario_path=scenario, policy=policy)
        except (RuntimeError, OSError) as exc:
            raise CommandError(f"lab verify cannot run here: {exc}") from None
        if not outcomes:
            raise CommandError("no lab container with a CPU limit matches " + (" ".join(only) or "the scenario"))
        path = results.save_outcomes(outcomes, policy.throttle_target, Path(json_path) if json_path else None)
        self._say(services.table(outcomes, policy.throttle_target), path, "Outcomes", options.get("print_json", False))

    def _contention(self, seconds: float, scenario: str | None, json_path: str | None, print_json: bool) -> None:
        try:
            result = contention.run_contention(seconds=seconds, scenario_path=scenario)
        except (RuntimeError, OSError) as exc:
            raise CommandError(f"lab verify --contention cannot run here: {exc}") from None
        path = results.save_contention(result, Path(json_path) if json_path else None)
        self._say(contention.table(result), path, "Rows", print_json)

    def _say(self, lines: list[str], path: Path, what: str, print_json: bool) -> None:
        if print_json:
            self.stdout.write(path.read_text())
            return
        for line in lines:
            self.stdout.write(line)
        self.stdout.write(f"{what} written to {path}")
