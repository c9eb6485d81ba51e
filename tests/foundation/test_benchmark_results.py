"""benchmarks/results.json holds every benchmark's latest figures, whichever runs came last."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import run_all


def figure(name: str, value: float, date: str) -> dict:
    return {"name": name, "value": value, "unit": "s", "target": None, "baseline": None, "machine": "m", "date": date}


def test_make_bench_keeps_the_scale_and_storage_figures_and_replaces_its_own(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    run_all.write_results(path, [figure("scale.cycle_1000_nodes", 54.0, "d1"), figure("storage.bytes", 177, "d1")])
    run_all.write_results(path, [figure("parse.scrape", 2.9, "d1")])  # `make bench` after `make bench-scale`
    run_all.write_results(path, [figure("parse.scrape", 3.1, "d2")])
    stored = {r["name"]: (r["value"], r["date"]) for r in json.loads(path.read_text())}
    assert stored == {"scale.cycle_1000_nodes": (54.0, "d1"), "storage.bytes": (177, "d1"), "parse.scrape": (3.1, "d2")}
