"""The README's table of lab pods is the default scenario's: every pod and container, with its request and limit."""

from __future__ import annotations

import re
from pathlib import Path

from apps.lab.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
KINDS = {
    "raise_limit",
    "cut_threads",
    "use_whole_cores",
    "add_threads",
    "lower_request",
    "set_request",
    "upgrade_kernel",
}


def readme_rows() -> list[tuple[str, str, str, str]]:
    """(pod prefix, namespace, container, "request / limit") of each row of the lab table, pods carried down."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| pod (namespace) |") :].split("\n\n")[0].splitlines()[2:]
    rows, pod, namespace = [], "", ""
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0]:
            named = re.fullmatch(r"`([^`]+?)(?:…)?` \(([^)]+)\)", cells[0])
            assert named is not None, cells[0]
            pod, namespace = named.groups()
        described = re.match(r"(\S+): ([^,]+)", cells[1])
        assert described is not None, cells[1]
        container, resources = described.groups()
        assert set(re.findall(r"`([a-z_]+)`", cells[3])) <= KINDS, cells[3]
        rows.append((pod, namespace, container, resources))
    return rows


def mcpu(value: int | None) -> str:
    if value is None:
        return "none"
    return f"{value // 1000}" if value % 1000 == 0 and value >= 2000 else f"{value}m"


def test_the_readme_lists_every_pod_and_container_of_the_default_scenario():
    scenario = load_scenario(ROOT / "apps" / "lab" / "scenarios" / "default.yaml")
    expected = sorted(
        (pod.name, pod.namespace, c.name, f"{mcpu(c.request_mcpu)} / {mcpu(c.limit_mcpu)}")
        for pod in scenario.pods
        for c in pod.containers
    )
    listed = readme_rows()
    matched = sorted(
        (name, ns, container, resources)
        for name, ns, container, resources in expected
        for prefix, ns2, container2, resources2 in listed
        if name.startswith(prefix) and (ns, container, resources) == (ns2, container2, resources2)
    )
    assert matched == expected and len(listed) == len(expected)
