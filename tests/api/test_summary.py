"""GET clusters/<cluster>/namespaces/<ns>/summary/: the chat message a bot posts as is, in four formats.

The builder's demo cluster holds 30 minutes of readings, so its last-hour figures cover 30 of 60 minutes."""

from __future__ import annotations

from datetime import UTC, timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone
from markdown_it import MarkdownIt

from apps.advisor.models import Finding, Window
from apps.advisor.selectors import window_coverage
from apps.clusters.models import Pod
from tests.builders import build_cluster

pytestmark = pytest.mark.django_db

URL = "/api/v1/clusters/demo/namespaces/{ns}/summary/"


def test_text_lists_the_worst_containers_with_ratio_and_advice_and_links_the_report(reader, demo):
    response = reader.get(URL.format(ns="shop"))
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    lines = response.content.decode().splitlines()
    assert lines[0] == "cputune: demo/shop"
    assert lines[1] == (
        "4 of 8 containers in demo/shop are throttled above the 10% target over the last hour "
        "(figures cover 30 of 60 min)."
    )
    assert lines[2] == "- api-0/main: 60% throttled"
    assert lines[3].startswith("  - critical: Raise the CPU limit from 500m to 1,200m")
    # The claim in words: the raise should leave it throttled in at most the 10% target.
    assert lines[3].endswith("(expected: throttled in at most 10% of periods after the change)")
    worker = lines.index("- worker-0/main: 40% throttled")
    assert lines[worker + 1].startswith("  - warning: Cut threads")
    # The default limit of 5 lists the four over the target, then one of cache-* (lower_request), and counts the other.
    below = lines.index("Not over the target, with recommendations:")
    assert lines[below + 1] == "- cache-0/main: no throttle ratio (no CPU limit)"
    assert lines[below + 2].startswith("  - info: Lower the CPU request from 2,000m (2 CPUs) to 50m")
    assert lines[-2] == "…and 1 more not over the target with recommendations: see the report."
    assert lines[-1] == "Report: http://testserver/c/demo/ns/shop/?window=1h"


def test_limit_caps_the_list_and_says_how_many_more(reader, demo):
    lines = reader.get(URL.format(ns="shop"), {"limit": 1}).content.decode().splitlines()
    assert [line for line in lines if line.startswith("- ")] == [lines[2]] and "api-0/main" in lines[2]
    assert "…and 3 more over the target and 2 more not over the target with recommendations: see the report." in lines


def test_markdown_has_a_bullet_per_container_and_a_link(reader, demo):
    response = reader.get(URL.format(ns="shop"), {"format": "markdown"})
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    text = response.content.decode()
    assert text.startswith("**cputune: `demo/shop`**\n")
    assert "- `api-0/main` **60%** throttled\n  - **critical**: Raise the CPU limit" in text
    assert text.rstrip().endswith("[Open the report](http://testserver/c/demo/ns/shop/?window=1h)")


def test_slack_is_block_kit_with_header_section_and_context(reader, demo):
    response = reader.get(URL.format(ns="shop"), {"format": "slack"})
    assert response["Content-Type"] == "application/json"
    message = response.json()
    assert set(message) == {"text", "blocks"}
    header, headline, *sections, context = message["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": "cputune: demo/shop"}}
    assert headline["type"] == "section" and headline["text"]["text"].startswith("4 of 8 containers")
    for section in sections:
        assert section["type"] == "section" and section["text"]["type"] == "mrkdwn"
        assert len(section["text"]["text"]) <= 3000
    assert sections[0]["text"]["text"].startswith(
        "• `api-0/main` *60%* throttled\n    ◦ *critical*: Raise the CPU limit"
    )
    assert context["type"] == "context"
    [element] = context["elements"]
    assert element["type"] == "mrkdwn"
    assert "<http://testserver/c/demo/ns/shop/?window=1h|Open the report>" in element["text"]
    assert "4 of 8 containers" in message["text"]


def test_slack_by_accept_header(reader, demo):
    response = reader.get(URL.format(ns="shop"), HTTP_ACCEPT="application/json")
    assert "blocks" in response.json()


def test_slack_escapes_control_characters_in_advice(reader, demo):
    finding = Finding.objects.get(cluster=demo, window="1h", container__pod__name="api-0")
    finding.recommendations[0]["summary"] = "Use <b> & keep limit > request"
    finding.save()
    text = reader.get(URL.format(ns="shop"), {"format": "slack"}).json()["blocks"][2]["text"]["text"]
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
    assert slack["blocks"][1]["text"]["text"].startswith("No container in `demo/shop`")


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
            {"format": ["format must be one of text, markdown, slack, json, not 'html'."]},
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


# --- what the figures rest on: never an all-clear from missing data -------------------------------------------------

FORMATS = ("text", "markdown", "slack", "json")


def everything(reader, ns: str, cluster: str = "demo", **params) -> dict[str, str]:
    """The message in every format, as the text a reader sees (Slack: the fallback and every block's text; Markdown and
    Slack without the backticks of their code spans, which hold the names)."""
    out = {}
    for fmt in FORMATS:
        url = f"/api/v1/clusters/{cluster}/namespaces/{ns}/summary/"
        response = reader.get(url, {"format": fmt, **params})
        assert response.status_code == 200, response.content
        if fmt == "slack":
            message = response.json()
            texts = [message["text"]]
            for block in message["blocks"]:
                texts += [block["text"]["text"]] if "text" in block else [e["text"] for e in block["elements"]]
            out[fmt] = "\n".join(texts).replace("`", "")
        elif fmt == "json":
            out[fmt] = response.json()["headline"]
        else:
            out[fmt] = response.content.decode().replace("`", "") if fmt == "markdown" else response.content.decode()
    return out


@pytest.fixture()
def young(db):
    """A cluster whose first collection just ran: one reading per container, so no window has a figure yet."""
    return build_cluster("young", minutes=0)


def test_findings_not_computed_yet_say_so_and_when_the_next_refresh_is(reader, young):
    for window in ("1h", "24h"):
        due = window_coverage(young, window, namespace="shop").next_refresh_at
        assert due is not None and due > timezone.now()
        expected = f"not computed yet — next refresh at {due.astimezone(UTC):%H:%M} UTC."
        for fmt, text in everything(reader, "shop", cluster="young", window=window).items():
            assert expected in text, fmt
            assert "No container" not in text and "throttled above" not in text, fmt  # no all-clear
    body = reader.get("/api/v1/clusters/young/namespaces/shop/summary/", {"format": "json", "window": "24h"}).json()
    assert body["coverage"]["computed"] is False and body["containers_over_target"] == 0


def test_a_refresh_that_is_overdue_is_not_announced_as_coming(reader, db):
    stale = build_cluster("stale", minutes=0, now=timezone.now() - timedelta(hours=2))
    due = window_coverage(stale, "24h", namespace="shop").next_refresh_at
    assert due is not None
    text = reader.get("/api/v1/clusters/stale/namespaces/shop/summary/", {"window": "24h"}).content.decode()
    assert f"not computed yet — next refresh was due at {due.astimezone(UTC):%H:%M} UTC." in text


def test_a_partly_covered_window_says_what_its_figures_cover(reader, db):
    build_cluster("week", minutes=7)
    over = "4 of 8 containers in week/shop are throttled above the 10% target over the"
    for window, covered in (("1h", "7 of 60 min"), ("24h", "7 of 1440 min"), ("7d", "7 of 10080 min")):
        response = reader.get("/api/v1/clusters/week/namespaces/shop/summary/", {"window": window})
        assert f"{over} {Window(window).label} (figures cover {covered})." in response.content.decode()


def test_an_all_clear_on_part_of_the_window_says_how_much_it_rests_on(reader, demo):
    Finding.objects.filter(cluster=demo, namespace="shop").update(throttle_ratio=0.02)
    for fmt, text in everything(reader, "shop").items():
        assert (
            "No container in demo/shop is throttled above the 10% target over the last hour (figures cover 30 of 60 min;"
            in (text.replace("\\", ""))
        ), fmt


def make_lifetime(demo, **filters) -> None:
    """Lifetime figures, as a container seen once gets them: counters since it started, no window start."""
    Finding.objects.filter(cluster=demo, window="1h", **filters).update(
        lifetime=True, window_start=None, covered_seconds=None
    )


def test_lifetime_figures_are_labelled_as_lifetime_never_as_the_window(reader, demo):
    make_lifetime(demo, namespace="shop")
    for fmt, text in everything(reader, "shop").items():
        assert "over the last hour" not in text, fmt
        assert "throttled above the 10% target since each container started (lifetime counters, one reading each)" in (
            text.replace("\\", "")
        ), fmt
    lines = reader.get(URL.format(ns="shop")).content.decode().splitlines()
    assert "- api-0/main: 60% throttled since the container started" in lines
    body = reader.get(URL.format(ns="shop"), {"format": "json"}).json()
    assert body["coverage"]["lifetime_only"] is True
    assert all(c["lifetime"] and c["window_start"] is None for c in body["containers"])


def test_a_mix_of_lifetime_and_window_figures_labels_each(reader, demo):
    make_lifetime(demo, container__pod__name="api-0")
    lines = reader.get(URL.format(ns="shop")).content.decode().splitlines()
    assert lines[1].endswith(
        "over the last hour (figures cover 30 of 60 min; lifetime figures for 1 container, since it started)."
    )
    assert "- api-0/main: 60% throttled since the container started" in lines
    assert "- api-1/main: 60% throttled" in lines
    Finding.objects.filter(cluster=demo, namespace="shop").exclude(container__pod__name="api-0").update(
        throttle_ratio=0.01
    )
    Finding.objects.filter(cluster=demo, container__pod__name="api-0").update(throttle_ratio=0.05)
    text = reader.get(URL.format(ns="shop")).content.decode()
    assert "highest: api-0/main at 5.0% since the container started" in text


# --- every recommendation, and the containers below the target that have some ----------------------------------------


def stored_advice(demo, namespace: str) -> dict[str, list[str]]:
    return {
        f.container.pod.name: [r["summary"] for r in f.recommendations]
        for f in Finding.objects.filter(cluster=demo, namespace=namespace, window="1h").select_related("container__pod")
        if f.recommendations
    }


def test_every_recommendation_of_every_container_is_listed(reader, demo):
    advice = stored_advice(demo, "shop")
    assert set(advice) == {"api-0", "api-1", "worker-0", "worker-1", "cache-0", "cache-1"}
    texts = everything(reader, "shop", limit=50)
    for fmt in ("text", "markdown", "slack"):
        for pod, summaries in advice.items():
            assert f"{pod}/main" in texts[fmt], (fmt, pod)
            for summary in summaries:
                assert summary in texts[fmt].replace("\\", ""), (fmt, pod, summary)
        assert "more" not in texts[fmt], fmt
    body = reader.get(URL.format(ns="shop"), {"format": "json", "limit": 50}).json()
    listed = {c["pod"]: [r["summary"] for r in c["recommendations"]] for c in body["containers"]}
    assert listed == advice
    assert [c["over_target"] for c in body["containers"]] == [True] * 4 + [False] * 2
    assert body["more_over_target"] == body["more_advised_below_target"] == 0


def test_the_report_link_keeps_the_window(reader, demo):
    for window in ("1h", "24h", "7d"):
        link = f"http://testserver/c/demo/ns/shop/?window={window}"
        responses = {fmt: reader.get(URL.format(ns="shop"), {"format": fmt, "window": window}) for fmt in FORMATS}
        assert responses["text"].content.decode().splitlines()[-1] == f"Report: {link}"
        assert responses["markdown"].content.decode().rstrip().endswith(f"[Open the report]({link})")
        assert f"<{link}|Open the report>" in responses["slack"].json()["blocks"][-1]["elements"][0]["text"]
        assert responses["json"].json()["report_url"] == link


def test_json_has_the_same_facts_structured(reader, demo):
    response = reader.get(URL.format(ns="shop"), {"format": "json"})
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert list(body) == [
        "cluster", "namespace", "window", "throttle_target", "headline", "coverage", "containers_checked",
        "containers_over_target", "containers_advised_below_target", "containers", "more_over_target",
        "more_advised_below_target", "report_url", "changes",  # changes: added at the end (2026-12)
    ]  # fmt: skip
    assert body["changes"] == []  # none seen in the demo cluster
    text = reader.get(URL.format(ns="shop")).content.decode().splitlines()
    assert body["headline"] == text[1]
    assert (body["cluster"], body["namespace"], body["window"], body["throttle_target"]) == ("demo", "shop", "1h", 0.1)
    coverage = body["coverage"]
    assert (coverage["computed"], coverage["partial"], coverage["lifetime_only"]) == (True, True, False)
    assert (coverage["covered_minutes"], coverage["window_minutes"], coverage["containers"]) == (30, 60, 8)
    assert coverage["computed_at"] and coverage["next_refresh_at"]
    assert (body["containers_checked"], body["containers_over_target"], body["containers_advised_below_target"]) == (
        8, 4, 2,
    )  # fmt: skip
    api = body["containers"][0]
    assert (api["pod"], api["container"], api["over_target"], api["throttle_ratio"]) == ("api-0", "main", True, 0.6)
    assert [r["kind"] for r in api["recommendations"]] == ["raise_limit", "cut_threads"]
    assert api["recommendations"][0]["suggested_limit_mcpu"] == 1200
    assert [c["pod"] for c in body["containers"]] == ["api-0", "api-1", "worker-0", "worker-1", "cache-0"]
    assert (body["more_over_target"], body["more_advised_below_target"]) == (0, 1)
    # Accept: application/json still gets the Slack message it always got.
    assert set(reader.get(URL.format(ns="shop"), HTTP_ACCEPT="application/json").json()) == {"text", "blocks"}


def test_the_schema_documents_the_json_format_beside_slack(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/clusters/{cluster}/namespaces/{namespace}/summary/"]["get"]
    formats = next(p for p in operation["parameters"] if p["name"] == "format")["schema"]["enum"]
    assert set(formats) == {"text", "markdown", "slack", "json"}
    shapes = operation["responses"]["200"]["content"]["application/json"]["schema"]
    message = schema["components"]["schemas"][shapes["$ref"].rsplit("/", 1)[-1]]
    refs = {ref["$ref"].rsplit("/", 1)[-1] for ref in message["oneOf"]}
    assert refs == {"SlackMessage", "NamespaceSummary"}
    summary = schema["components"]["schemas"]["NamespaceSummary"]["properties"]
    assert {"headline", "coverage", "containers", "report_url"} <= set(summary)


# --- Slack's limits ----------------------------------------------------------------------------------------------------


def test_slack_stays_within_block_kit_limits_and_says_how_many_more(reader, db):
    build_cluster("big", per_pattern=24, minutes=5)  # 48 containers over the target (api-*, worker-*)
    message = reader.get("/api/v1/clusters/big/namespaces/shop/summary/", {"format": "slack", "limit": 50}).json()
    blocks = message["blocks"]
    assert len(blocks) <= 50
    assert len(blocks[0]["text"]["text"]) <= 150
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    assert len(message["text"]) <= 3000
    listed = [b for b in blocks if b["type"] == "section" and "• `" in b["text"]["text"]]
    assert len(listed) == 46
    more = blocks[-2]["text"]["text"]
    assert more == "…and 2 more over the target: <http://testserver/c/big/ns/shop/?window=1h|see the report>."
    lines = reader.get("/api/v1/clusters/big/namespaces/shop/summary/", {"limit": 50}).content.decode().splitlines()
    assert len([line for line in lines if line.startswith("- ")]) == 48 and not any("more" in line for line in lines)


def test_a_very_long_recommendation_is_cut_to_fit_a_slack_section(reader, demo):
    finding = Finding.objects.get(cluster=demo, window="1h", container__pod__name="api-0")
    finding.recommendations[0]["summary"] = "x" * 5000
    finding.save()
    section = reader.get(URL.format(ns="shop"), {"format": "slack"}).json()["blocks"][2]["text"]["text"]
    assert len(section) == 3000 and section.endswith("…")


# --- hostile names -----------------------------------------------------------------------------------------------------

HOSTILE_POD = "a`b``c<!channel>@here\n# heading"
HOSTILE_NAMESPACE = "ops<!here>@channel&*_x_*"


@pytest.fixture()
def hostile(demo):
    Pod.objects.filter(cluster=demo, name="api-0").update(name=HOSTILE_POD)
    Pod.objects.filter(cluster=demo, namespace="shop").update(namespace=HOSTILE_NAMESPACE)
    Finding.objects.filter(cluster=demo, namespace="shop").update(namespace=HOSTILE_NAMESPACE)
    return demo


def hostile_get(reader, **params):
    response = reader.get(URL.format(ns=quote(HOSTILE_NAMESPACE, safe="")), params)
    assert response.status_code == 200, response.content
    return response


def test_hostile_names_cannot_mention_anyone_or_break_plain_text(reader, hostile):
    lines = hostile_get(reader).content.decode().splitlines()
    assert not any(line.startswith("# heading") for line in lines)
    assert any(line.startswith("- a`b``c<!channel>@\u2060here\\n# heading/main:") for line in lines)
    assert all("@here" not in line and "@channel" not in line for line in lines)


def test_hostile_names_stay_inside_their_markdown_code_span(reader, hostile):
    text = hostile_get(reader, format="markdown").content.decode()
    tokens = MarkdownIt("commonmark").parse(text)
    assert not any(t.type == "heading_open" for t in tokens), "a name started a heading"
    inline = [child for t in tokens if t.type == "inline" for child in t.children or []]
    codes = [c.content for c in inline if c.type == "code_inline"]
    assert "a`b``c<!channel>@\u2060here\\n# heading/main" in codes
    # The title is bold text and the namespace a code span in it: no emphasis, HTML or entity.
    title = [c for c in tokens[1].children or [] if c.type != "text" or c.content]
    assert [c.type for c in title] == ["strong_open", "text", "code_inline", "strong_close"]
    assert title[2].content == "demo/ops<!here>@\u2060channel&*_x_*"


def test_hostile_names_cannot_notify_a_slack_channel(reader, hostile):
    message = hostile_get(reader, format="slack").json()
    header, *blocks = message["blocks"]
    # A plain_text header is shown as written: Slack parses no mentions there, so only @here needs breaking.
    assert header["text"]["type"] == "plain_text" and "@here" not in header["text"]["text"]
    texts = [message["text"]] + [
        t for b in blocks for t in ([b["text"]["text"]] if "text" in b else [e["text"] for e in b["elements"]])
    ]
    for text in texts:
        assert "<!" not in text and "@here" not in text and "@channel" not in text
    assert "ops&lt;!here&gt;@\u2060channel&amp;" in message["text"]  # the notification fallback is escaped too
    container = next(t for t in texts if t.startswith("• `a"))
    span = container.split("\n")[0]
    assert span.count("`") == 2, "a backtick in the name closed the code span"
