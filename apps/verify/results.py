"""The last lab verify and contention run, as `lab verify` writes them (DATA_DIR/lab-verify.json,
DATA_DIR/lab-contention.json) and as the lab cluster's verify page and `make bench-advice` read them, with the goals
they are held to (docs/domain.md#lab-verify, #lab-contention). No cgroup access here: reading is safe anywhere."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from apps.advisor.facts import Policy
from apps.verify.contention import Contention, ContentionRow
from apps.verify.services import Outcome

VERIFY_FILE = "lab-verify.json"
CONTENTION_FILE = "lab-contention.json"
# The kinds whose claim is a throttle ratio: the goals on the ratio count these rows.
LIMIT_KINDS = ("raise_limit", "use_whole_cores", "cut_threads")


@dataclass(frozen=True, slots=True)
class Goal:
    """A share of cases that must reach `target`; None when no case could be judged."""

    name: str
    text: str
    value: float | None
    cases: int
    target: float

    @property
    def met(self) -> bool:
        return self.value is not None and self.value >= self.target

    def as_dict(self) -> dict[str, object]:
        unit = f"share of {self.cases} cases"
        return {"name": self.name, "value": self.value, "unit": unit, "target": self.target, "baseline": None}


def _share(name: str, text: str, flags: list[bool | None], target: float) -> Goal:
    known = [f for f in flags if f is not None]
    return Goal(name, text, sum(known) / len(known) if known else None, len(known), target)


def advice_goals(outcomes: list[Outcome], target: float) -> list[Goal]:
    applied = [o for o in outcomes if o.applied and o.kind in LIMIT_KINDS]
    return [
        _share("advice_applied_under_target", "applied limit advice leaves the ratio under the target",
               [o.under_target(target) for o in applied], 0.9),
        _share("advice_within_expected_bound", "the measured ratio is within the stated expected bound",
               [o.within_bound() for o in applied], 0.9),
        _share("advice_two_thirds_limit_misses_target", "two thirds of a suggested raise misses the target (not padded)",
               [o.lower_limit_missed(target) for o in applied], 0.8),
        _share("advice_latency_not_worse", "no applied plan makes the request loop's p95 latency worse",
               [None if o.latency_worse() is None else not o.latency_worse() for o in outcomes if o.applied], 1.0),
    ]  # fmt: skip


def contention_goals(rows: tuple[ContentionRow, ...] | list[ContentionRow]) -> list[Goal]:
    return [
        _share("contention_floor_held", "under full contention every container gets ≥ 85 % of its shares floor",
               [r.floor_held for r in rows], 1.0),
        _share("contention_proportional_within_15pct", "quotas lifted, every container is within ±15 % of its part",
               [r.proportional_held for r in rows], 1.0),
    ]  # fmt: skip


def verify_path() -> Path:
    return Path(settings.DATA_DIR) / VERIFY_FILE


def contention_path() -> Path:
    return Path(settings.DATA_DIR) / CONTENTION_FILE


@dataclass(frozen=True, slots=True)
class LastVerify:
    """What the last run wrote, when, and what a page needs to judge it."""

    written_at: datetime
    target: float
    outcomes: list[Outcome]
    contention: Contention | None


def save_outcomes(outcomes: list[Outcome], target: float, path: Path | None = None) -> Path:
    data = {"target": target, "outcomes": [o.as_dict() for o in outcomes]}
    return _write(path or verify_path(), data)


def save_contention(result: Contention, path: Path | None = None) -> Path:
    return _write(path or contention_path(), {"contention": result.as_dict()})


def _write(path: Path, data: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def _only_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}


def load(verify: Path | None = None, contention: Path | None = None) -> tuple[LastVerify | None, str]:
    """The last outcomes (None when no run has written them) and, when a file cannot be read, why."""
    verify, contention = verify or verify_path(), contention or contention_path()
    try:
        data = json.loads(verify.read_text()) if verify.is_file() else None
        rows = json.loads(contention.read_text())["contention"] if contention.is_file() else None
        if data is None and rows is None:
            return None, ""
        outcomes = [Outcome(**_only_fields(Outcome, o)) for o in (data or {}).get("outcomes", [])]
        result = None
        if rows is not None:
            parts = [ContentionRow(**_only_fields(ContentionRow, r)) for r in rows["rows"]]
            result = Contention(**{**_only_fields(Contention, rows), "rows": tuple(parts)})
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return None, f"the last run's results cannot be read ({type(exc).__name__}): run lab verify again"
    stamps = [p.stat().st_mtime for p in (verify, contention) if p.is_file()]
    written = datetime.fromtimestamp(max(stamps), tz=UTC)
    target = float((data or {}).get("target", Policy().throttle_target))
    return LastVerify(written, target, outcomes, result), ""
