"""OPTIONS on every API endpoint answers without a server error (issue 14, item 9: the ingest endpoint answered 500)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.api import urls

PATH_VALUES = {"cluster": "demo", "namespace": "shop", "pod": "api-0"}


@pytest.mark.parametrize("pattern", urls.urlpatterns, ids=lambda pattern: pattern.name)
def test_options_never_fails_on_the_server(pattern, client_for, read_key, ingest_key, demo):
    url = reverse(f"api:{pattern.name}", kwargs={name: PATH_VALUES[name] for name in pattern.pattern.converters})
    for key in (None, read_key, ingest_key):
        response = client_for(key).options(url)
        assert response.status_code < 500, (url, key, response.content[:200])


def test_options_on_ingest_describes_the_body_an_agent_posts(client_for, ingest_key):
    response = client_for(ingest_key).options("/api/v1/ingest/")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "Ingest"
    fields = body["actions"]["POST"]
    assert {"node", "containers"} <= set(fields)
    assert fields["node"]["type"] == "nested object" and "name" in fields["node"]["children"]
