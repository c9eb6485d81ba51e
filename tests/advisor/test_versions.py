"""The releases behaviours start at live in apps/advisor/versions.py: read the same way everywhere, and no other
module of the product compares a version with a literal of its own."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from apps.advisor import versions
from apps.advisor.pressure import NOT_EXPORTED
from apps.advisor.snippets import in_place_resize

APPS = Path(__file__).resolve().parents[2] / "apps"
# The slice-expiry bug's history is the kernel verdict's own table (vendor builds and all).
KERNEL_VERDICT = APPS / "advisor" / "kernel"
_COMPARED_WITH_A_LITERAL = re.compile(r"[<>]=?\s*\(\d+, \d+")


@pytest.mark.parametrize(
    ("text", "gate", "expected"),
    [
        ("v1.33.0", versions.IN_PLACE_RESIZE, True),
        ("v1.32.9-eks-1234", versions.IN_PLACE_RESIZE, False),
        ("v1.100.0", versions.IN_PLACE_RESIZE, True),
        ("", versions.IN_PLACE_RESIZE, False),
        ("garbage", versions.IN_PLACE_RESIZE, False),
    ],
)
def test_kubelet_versions_are_read_one_way(text, gate, expected):
    assert versions.kubelet_at_least(text, gate) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("6.18.44-fc-v1252", True), ("6.6.96-0-virt", False), ("5.15.0-1034-aws", False), ("10.0.17763.1577", False)],
)
def test_kernel_versions_are_read_one_way(text, expected):
    assert versions.kernel_at_least(text, versions.TASK_BASED_THROTTLE) is expected


def test_no_module_outside_the_gates_compares_a_version_with_a_literal():
    offenders = [
        f"{path.relative_to(APPS)}:{number}"
        for path in APPS.rglob("*.py")
        if "migrations" not in path.parts and path.name != "versions.py" and KERNEL_VERDICT not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _COMPARED_WITH_A_LITERAL.search(line)
    ]
    assert offenders == []


def test_the_text_users_read_takes_its_releases_from_the_gates(monkeypatch):
    assert f"Kubernetes {versions.dotted(versions.KUBELET_PSI)} with the KubeletPSI" in NOT_EXPORTED
    monkeypatch.setattr("apps.advisor.snippets.IN_PLACE_RESIZE", (1, 40))
    refused = in_place_resize(
        namespace="shop", pod="web-1", container="web", request_mcpu=None, limit_mcpu=500,
        kubelet_version="v1.35.0", qos_class="Burstable", containers=[("web", 250, 400)],
    )  # fmt: skip
    assert refused is not None and refused.kubectl is None
    assert "needs Kubernetes 1.40 or later" in (refused.why_not or "")


def running_kernel() -> str:
    return os.uname().release


@pytest.mark.skipif(
    not versions.kernel_at_least(running_kernel(), versions.TASK_BASED_THROTTLE)
    or not os.access("/proc/kallsyms", os.R_OK),
    reason="needs a Linux 6.18 or later kernel with a readable /proc/kallsyms",
)
def test_a_kernel_past_the_task_based_throttle_gate_has_the_series_task_work():
    # The gate is where the advice says throttled time changed meaning: this machine's kernel must bear it out.
    symbols = Path("/proc/kallsyms").read_text()
    assert " throttle_cfs_rq_work\n" in symbols, f"Linux {running_kernel()} lacks the task-based throttle model"
