"""GET clusters/<cluster>/namespaces/<ns>/summary/: the chat message a bot posts as is, in three formats."""

from __future__ import annotations

import pytest

from apps.advisor.models import Finding

pytestmark = pytest.mark.django_db

URL = "/api/v1/clusters/demo/namespaces/{ns}/summary/"


def test_text_lists_the_worst_containers_with_ratio_and_advice_and_links_the_report(reader, demo):
    response = reader.get(URL.format(ns="shop"))
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    lines = response.content.decode().splitlines()
    assert lines[0] == "cputune: demo/shop"
    assert lines[1] == "4 of 8 containers in demo/shop are throttled above the 10% target over the last hour."
    assert lines[2].startswith("- api-0/main: 60% throttled. Raise the CPU limit from 500m to 600m")
    assert lines[4].startswith("- worker-0/main: 40% throttled. Cut threads")
    assert lines[6] == "2 containers not over the target have recommendations too."  # cache-* (lower_request)
    assert lines[-1] == "Report: http://testserver/c/demo/ns/shop/"


def test_limit_caps_the_list_and_says_how_many_more(reader, demo):
    lines = reader.get(URL.format(ns="shop"), {"limit": 1}).content.decode().splitlines()
    assert [line for line in lines if line.startswith("- ")] == [lines[2]] and "api-0/main" in lines[2]
    assert "…and 3 more over the target." in lines


def test_markdown_has_a_bullet_per_container_and_a_link(reader, demo):
    response = reader.get(URL.format(ns="shop"), {"format": "markdown"})
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    text = response.content.decode()
    assert text.startswith("**cputune: demo/shop**\n")
    assert "- `api-0/main` **60%** throttled: Raise the CPU limit" in text
    assert text.rstrip().endswith("[Open the report](http://testserver/c/demo/ns/shop/)")


def test_slack_is_block_kit_with_header_section_and_context(reader, demo):
    response = reader.get(URL.format(ns="shop"), {"format": "slack"})
    assert response["Content-Type"] == "application/json"
    message = response.json()
    assert set(message) == {"text", "blocks"}
    header, section, context = message["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": "cputune: demo/shop"}}
    assert section["type"] == "section" and section["text"]["type"] == "mrkdwn"
    assert "• `api-0/main` *60%* throttled: Raise the CPU limit" in section["text"]["text"]
    assert len(section["text"]["text"]) <= 3000
    assert context["type"] == "context"
    [element] = context["elements"]
    assert element["type"] == "mrkdwn"
    assert "<http://testserver/c/demo/ns/shop/|Open the report>" in element["text"]
    assert "4 of 8 containers" in message["text"]


def test_slack_by_accept_header(reader, demo):
    response = reader.get(URL.format(ns="shop"), HTTP_ACCEPT="application/json")
    assert "blocks" in response.json()


def test_slack_escapes_control_characters_in_advice(reader, demo):
    finding = Finding.objects.get(cluster=demo, window="1h", container__pod__name="api-0")
    finding.recommendations[0]["summary"] = "Use <b> & keep limit > request"
    finding.save()
    text = reader.get(URL.format(ns="shop"), {"format": "slack"}).json()["blocks"][1]["text"]["text"]
    assert "Use &lt;b&gt; &amp; keep limit &gt; request" in text


def test_a_namespace_with_nothing_throttled_says_so(reader, demo):
    text = reader.get(URL.format(ns="batch")).content.decode()
    assert "No container in demo/batch is throttled above the 10% target over the last hour" in text
    assert "2 containers checked; no throttling counters reported" in text
    Finding.objects.filter(cluster=demo, namespace="shop").update(throttle_ratio=0.02)
    text = reader.get(URL.format(ns="shop")).content.decode()
    assert "No container in demo/shop is throttled above the 10% target" in text
    assert "highest: " in text and "at 2.0%" in text
    slack = reader.get(URL.format(ns="shop"), {"format": "slack"}).json()
    assert slack["blocks"][1]["text"]["text"].startswith("No container in demo/shop")


def test_a_namespace_without_findings_says_nothing_was_measured(reader, demo):
    Finding.objects.filter(cluster=demo, namespace="batch").delete()
    text = reader.get(URL.format(ns="batch")).content.decode()
    assert "No findings for demo/batch over the last hour yet" in text


def test_window_changes_the_period_named(reader, demo):
    assert "over the last 7 days" in reader.get(URL.format(ns="shop"), {"window": "7d"}).content.decode()


@pytest.mark.parametrize(
    ("url", "params", "status", "body"),
    [
        (URL.format(ns="nope"), {}, 404, {"detail": "no namespace 'nope' in cluster 'demo'"}),
        ("/api/v1/clusters/nope/namespaces/shop/summary/", {}, 404, {"detail": "no cluster named 'nope'"}),
        (
            URL.format(ns="shop"),
            {"format": "html"},
            400,
            {"format": ["format must be one of text, markdown, slack, not 'html'."]},
        ),
        (URL.format(ns="shop"), {"window": "2w"}, 400, {"window": ["window must be one of 1h, 24h, 7d, not '2w'."]}),
        (URL.format(ns="shop"), {"limit": "0"}, 400, {"limit": ["limit must be a whole number from 1 to 50."]}),
    ],
)
def test_errors_are_json_even_when_text_was_asked_for(reader, demo, url, params, status, body):
    response = reader.get(url, params)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json() == body
