"""The lab cluster's verify page: the last `lab verify` and contention run as the command wrote them, judged by the
same goals `make bench-advice` holds; other clusters have no such page."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from django.test import Client

from apps.clusters.models import Cluster, SourceKind
from apps.verify import results
from apps.verify.contention import Contention, ContentionRow
from apps.verify.services import Outcome

pytestmark = pytest.mark.django_db

RAISED = Outcome(
    container="shop/checkout-0/app", limit_before_mcpu=200, processes_before=1, ratio_before=0.99,
    usage_before_mcpu=200.0, latency_p95_before_ms=80.0, kind="raise_limit", plan=("raise_limit",),
    limit_after_mcpu=1150, processes_after=1, expected_ratio_max=0.1, expected_basis="periods: 0 of 120",
    ratio_after=0.0, usage_after_mcpu=990.0, latency_p95_after_ms=0.6, lower_limit_mcpu=767,
    ratio_at_lower_limit=0.98, applied=True,
)  # fmt: skip
# Padded: two thirds of the suggestion still under the target.
PADDED = replace(RAISED, container="shop/api-0/web", ratio_at_lower_limit=0.0)
ROWS = (
    ContentionRow("shop/web-0/app", 512, 900, None, 950.0, 900.0, 930.0),
    ContentionRow("batch/job-0/job", 2, 0, None, 40.0, 0.9, 1.3),  # a part too small to judge
    ContentionRow("shop/worker-0/worker", 256, 450, None, 300.0, 450.0, 600.0),  # starved: both missed
)


@pytest.fixture
def lab(settings, tmp_path) -> Cluster:
    settings.DATA_DIR = tmp_path
    return Cluster.objects.create(name="lab", source=SourceKind.LAB)


def test_the_page_shows_the_last_run_and_its_goals(ops: Client, lab: Cluster) -> None:
    results.save_outcomes([RAISED, PADDED], 0.1)
    results.save_contention(Contention(ROWS, 2, 2000, 2, 5.0, 1985.0, 1990.0))
    html = ops.get("/c/lab/lab-verify/").content.decode()
    rows = re.findall(r"<tr>\s*<td>([^<]+)</td>", html)
    assert rows[:2] == ["shop/checkout-0/app", "shop/api-0/web"]
    assert "200m → 1,150m" in html and "≤ 10%" in html and "767m: 98%" in html
    goals = {text.strip(): verdict for verdict, text in re.findall(r"<strong>(met|missed)</strong>\s*([^:]+):", html)}
    assert goals["two thirds of a suggested raise misses the target (not padded)"] == "missed"  # 1 of 2 < 80 %
    assert goals["applied limit advice leaves the ratio under the target"] == "met"
    assert "50% of 2" in html
    assert goals["under full contention every container gets ≥ 85 % of its shares floor"] == "missed"
    assert "missed: floor, proportional" in html and "(part too small to judge)" in html
    assert ops.get("/c/lab/").content.decode().count('href="/c/lab/lab-verify/"') == 1


def test_before_any_run_and_with_a_broken_file_the_page_says_so(ops: Client, lab: Cluster, tmp_path) -> None:
    assert "No lab verify has run on this machine yet" in ops.get("/c/lab/lab-verify/").content.decode()
    (tmp_path / results.VERIFY_FILE).write_text('{"outcomes": [{"container": 1, "bogus": true}]}')
    response = ops.get("/c/lab/lab-verify/")
    assert response.status_code == 200
    assert "cannot be read (TypeError): run lab verify again" in response.content.decode()


def test_only_the_lab_has_a_verify_page(ops: Client, lab: Cluster) -> None:
    Cluster.objects.create(name="prod", source=SourceKind.KUBERNETES)
    assert ops.get("/c/prod/lab-verify/").status_code == 404
    assert "lab-verify" not in ops.get("/c/prod/").content.decode()
    assert ops.get("/c/nowhere/lab-verify/").status_code == 404
