"""GET clusters/<c>/namespaces/<ns>/changes/: each change with its effect, paginated, in the documented shape."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.advisor.changes import CHANGE_FIELDS
from tests.advisor.test_change_effect import raised

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
