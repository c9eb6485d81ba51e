"""Every API answer is JSON, also for a path no route matches: on aec48c8 a cluster or namespace name with a '/'
(or any unknown API path) got the site's HTML 404 page, which a bot cannot parse."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nope/",
        "/api/v1/clusters/a/b/c/d/e/f/",
        "/api/v1/clusters/x%2Fy/namespaces/",  # a '/' in a name: no route has that many segments
        "/api/v1/clusters/demo/namespaces/%2Bcmd%7C%27%20%2FC%20calc%27%21A0/containers/",
    ],
)
def test_an_unknown_api_path_is_a_json_404(reader, path):
    response = reader.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]


def test_an_unknown_page_is_still_the_sites_404_page(admin_client):
    response = admin_client.get("/c/x/y/z/w/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html") and b"<html" in response.content
