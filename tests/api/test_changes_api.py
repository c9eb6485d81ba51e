"""GET clusters/<c>/namespaces/<ns>/changes/: each change with its effect, paginated, in the documented shape."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.advisor.changes import CHANGE_FIELDS
from tests import factories as f
from tests.advisor.test_change_effect import raised, rolled_out

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/c/namespaces/shop/changes/"


def test_a_raise_and_its_effect_come_back_in_the_contracts_fields(reader):
    raised(ratio_after=0.03, minutes_after=70)
    response = reader.get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 1
    [row] = body["results"]
    assert list(row) == list(CHANGE_FIELDS)
    assert (row["cluster"], row["pod"], row["kind"], row["before"], row["after"]) == (
        "c",
        "api-0",
        "limit",
        "200",
        "400",
    )
    assert row["verdict"] == "improved" and row["before_throttle_ratio"] > 0.7 > 0.1 > row["after_throttle_ratio"]


def test_since_narrows_and_bounds_the_list(reader):
    raised(ratio_after=0.03, minutes_after=70)
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert reader.get(URL, {"since": later}).json()["count"] == 0
    too_old = (timezone.now() - timedelta(days=40)).isoformat()
    response = reader.get(URL, {"since": too_old})
    assert response.status_code == 400 and "at most 31 days ago" in response.content.decode()
    assert reader.get("/api/v1/clusters/c/namespaces/nowhere/changes/").status_code == 404


def test_the_schema_describes_every_field_of_a_change_row_in_order():
    from apps.api.serializers import ChangeRowSerializer

    assert list(ChangeRowSerializer().fields) == list(CHANGE_FIELDS)


SUMMARY = "/api/v1/clusters/c/namespaces/shop/summary/"


def test_the_chat_summaries_carry_a_line_per_recent_change(reader):
    raised(ratio_after=0.03, minutes_after=70)
    text = reader.get(SUMMARY, {"format": "text"}).content.decode()
    assert "Recent changes (24 h) and their effect:" in text
    [line] = [line for line in text.splitlines() if line.startswith("- api-0/app: limit")]
    assert re.fullmatch(r"- api-0/app: limit 200m → 400m on \d\d-\d\d: throttled 80% → 3\.\d% of periods, "
                        r"p95 usage 250m \(improved\)", line), line  # fmt: skip
    markdown = reader.get(SUMMARY, {"format": "markdown"}).content.decode()
    assert "- `api-0/app` limit 200m → 400m" in markdown
    slack = reader.get(SUMMARY, {"format": "slack"}).json()
    assert any("limit 200m → 400m" in block.get("text", {}).get("text", "") for block in slack["blocks"])
    [change] = reader.get(SUMMARY, {"format": "json"}).json()["changes"]
    assert change["verdict"] == "improved" and change["kind"] == "limit"


def test_an_image_name_in_a_change_line_cannot_mention_a_channel(reader):
    from apps.clusters.models import Container

    raised(ratio_after=0.03, minutes_after=70)
    f.change(Container.objects.get(name="app"), "image", "app:1", "evil:@here\nnew line", timezone.now())
    text = reader.get(SUMMARY, {"format": "text"}).content.decode()
    [line] = [line for line in text.splitlines() if "image app:1" in line]
    assert "@here" not in line and "\\n" in line  # the word joiner breaks the mention; the newline is escaped


def test_the_changes_stream_as_csv_with_the_same_columns(reader):
    import csv
    import io

    raised(ratio_after=0.03, minutes_after=70)
    response = reader.get(URL, {"format": "csv"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="cputune-c-shop-changes.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert list(rows[0]) == list(CHANGE_FIELDS)
    assert (rows[0]["kind"], rows[0]["before"], rows[0]["after"], rows[0]["verdict"]) == (
        "limit",
        "200",
        "400",
        "improved",
    )


def test_the_schema_names_each_operation():
    from django.test import Client

    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    changes = schema["paths"]["/api/v1/clusters/{cluster}/namespaces/{namespace}/changes/"]["get"]
    series = schema["paths"]["/api/v1/clusters/{cluster}/namespaces/{namespace}/pods/{pod}/series/"]["get"]
    assert changes["summary"].startswith("Changes seen") and series["summary"].startswith("A pod's time series")
    assert set(changes["responses"]["200"]["content"]) == {"application/json", "text/csv"}


def test_a_rollout_is_one_row_and_one_chat_line_for_the_workload(reader):
    rolled_out()
    [row] = reader.get(URL).json()["results"]
    assert (row["pods"], row["also_changed"], row["seen_until"]) == (
        2,
        [{"kind": "request", "before": "200", "after": "400"}],
        row["seen_at"],
    )
    assert isinstance(row["change_id"], int)
    text = reader.get(SUMMARY, {"format": "text"}).content.decode()
    [line] = [line for line in text.splitlines() if "limit 200m" in line]
    assert re.fullmatch(r"- Deployment web/app: limit 200m → 400m, request 200m → 400m on \d\d-\d\d \(2 pods\): "
                        r"throttled 80% → 15% of periods, p95 usage 300m \(improved\)", line), line  # fmt: skip
    csv_text = b"".join(reader.get(URL, {"format": "csv"}).streaming_content).decode()
    assert '"[{""kind"":""request"",""before"":""200"",""after"":""400""}]"' in csv_text
