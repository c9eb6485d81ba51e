"""`make bench`: run every benchmark script, print one table, append it to RESULTS.md, write results.json.

Each script prints its figures as JSON lines `{"name", "value", "unit", "target", "baseline"}`; this runner adds the
machine and the date. A script that fails is reported and the others still run. Pass script names to run a subset:

    python benchmarks/run_all.py bench_parser bench_advisor
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from common import BENCH_SECRET_KEY  # noqa: E402 - next to this script

# bench_pages builds 7 days of samples for 1,000 containers (minutes): bench_api reuses them, then drops them.
# The two long runs are not in `make bench`; `make bench-scale` and `make bench-storage` run them through this runner,
# sized by SCALE_NODES and STORAGE_NODES, so their figures land in RESULTS.md and results.json like the others.
SCRIPT_ARGS = {
    "bench_pages": ["--keep"],
    "bench_api": ["--reuse", "--drop"],
    "bench_scale": ["--nodes", os.environ.get("SCALE_NODES", "100,1000")],
    "bench_storage": ["--nodes", os.environ.get("STORAGE_NODES", "100")],
}
SCRIPTS = [
    "bench_parser",
    "bench_input_scale",
    "bench_advisor",
    "bench_ingest",
    "bench_cycle",
    "bench_changes",
    "bench_pages",
    "bench_api",
]


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {os.cpu_count()} cores, {mem_gb:.0f} GiB, Linux {platform.release()}, Python {platform.python_version()}"


def run(script: str, env: dict[str, str]) -> tuple[list[dict], str]:
    path = HERE / f"{script}.py"
    if not path.exists():
        return [], "missing"
    started = time.monotonic()
    argv = [sys.executable, str(path), *SCRIPT_ARGS.get(script, [])]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    took = time.monotonic() - started
    sys.stdout.write(proc.stdout)
    results = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith('{"name"'):
            results.append(json.loads(line))
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        return results, f"failed (exit {proc.returncode}) after {took:.0f} s"
    return results, f"ok in {took:.0f} s"


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "—" if value is None else str(value)


RESULT_KEYS = ("name", "value", "unit", "target", "baseline", "machine", "date")


def write_results(path: Path, rows: list[dict]) -> None:
    """Merge this run's figures into results.json: each figure measured now replaces its older value, and every
    figure this run did not measure (`make bench-scale`'s and `make bench-storage`'s after `make bench`, a script that
    failed) keeps its latest one."""
    fresh = [{k: r.get(k) for k in RESULT_KEYS} for r in rows]
    names = {r["name"] for r in fresh}
    kept = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([r for r in kept if r["name"] not in names] + fresh, indent=2) + "\n")


def main(argv: list[str]) -> int:
    chosen = argv or SCRIPTS
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cputune_bench")
    env.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    where = machine()
    rows: list[dict] = []
    statuses: dict[str, str] = {}
    for script in chosen:
        print(f"\n### {script}", flush=True)
        results, status = run(script, env)
        statuses[script] = status
        for r in results:
            rows.append({**r, "machine": where, "date": when, "script": script})
    header = ["benchmark", "value", "unit", "target", "baseline"]
    lines = [
        f"## {when}",
        "",
        f"Machine: {where}. Load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for r in rows:
        base = r.get("baseline")
        baseline = f"{base['name']}: {fmt(base['value'])}" if base else "—"
        lines.append(f"| {r['name']} | {fmt(r['value'])} | {r['unit']} | {fmt(r.get('target'))} | {baseline} |")
    lines.append("")
    lines.extend(f"- {script}: {status}" for script, status in statuses.items())
    table = "\n".join(lines)
    print("\n" + table)
    results_md = HERE / "RESULTS.md"
    if not results_md.exists():
        results_md.write_text("# Benchmark results\n\nAppended by `make bench` (benchmarks/run_all.py).\n\n")
    with results_md.open("a") as f:
        f.write("\n" + table + "\n")
    write_results(HERE / "results.json", rows)
    return 0 if all(s.startswith("ok") for s in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
