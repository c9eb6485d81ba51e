"""manage.py verify_advice [--seconds S] [--only NAME ...] [--json FILE] (also reached as manage.py lab verify)."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.advisor.services import policy_from_settings
from apps.verify import services


class Command(BaseCommand):
    help = (
        "Apply the advisor's plan for each lab container to real cgroups and measure: before, expected, after. "
        "Needs root and a writable cgroup cpu controller; runs one container at a time."
    )

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=10.0, help="length of each run (default 10)")
        parser.add_argument("--only", nargs="*", default=[], help="containers to verify (pod or container names)")
        parser.add_argument("--scenario", help="scenario YAML (default: the lab's default scenario)")
        parser.add_argument("--json", dest="json_path", help="also write the outcomes to this JSON file")

    def handle(self, *args, seconds: float, only: list[str], scenario: str | None, json_path: str | None, **options):
        if not 1 <= seconds <= 600:
            raise CommandError(f"--seconds {seconds:g} is outside 1–600")
        policy = policy_from_settings()
        try:
            outcomes = services.verify(seconds=seconds, only=only, scenario_path=scenario, policy=policy)
        except (RuntimeError, OSError) as exc:
            raise CommandError(f"lab verify cannot run here: {exc}") from None
        if not outcomes:
            raise CommandError("no lab container with a CPU limit matches " + (" ".join(only) or "the scenario"))
        for line in services.table(outcomes, policy.throttle_target):
            self.stdout.write(line)
        path = Path(json_path) if json_path else Path(settings.DATA_DIR) / "lab-verify.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([o.as_dict() for o in outcomes], indent=2))
        self.stdout.write(f"Outcomes written to {path}")
