"""Chat summaries carry names as inert text (issue 14, item 4): Slack's `text` carried `<!channel> @here` unescaped,
pod and container names went raw into mrkdwn and Markdown, and a backtick closed the code span — so a name could
notify a channel, post a `<https:evil.example|Click here>` link or an image, or start a heading with a newline.
Names are now in code spans wherever they appear (no chat turns a code span into a link, an autolinked
`www.evil.example` pod included), escaped for each format, and their control characters and line separators escaped.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from markdown_it import MarkdownIt

from apps.advisor.models import Finding
from apps.clusters.models import Pod

POD = "x<!channel> @here <https:evil.example|Click here> ![i](https://evil.example/i.png) [a](https://evil.example)``"
POD_CONTAINER = f"{POD}/main"
NAMESPACE = "www.evil.example\u2028<!here>\n# Heading\r\n- item`*_~&amp;"
TOP = "www.evil.example"


@pytest.fixture()
def hostile(demo):
    Pod.objects.filter(cluster=demo, name="api-0").update(name=POD)
    Pod.objects.filter(cluster=demo, namespace="shop").update(namespace=NAMESPACE)
    Finding.objects.filter(cluster=demo, namespace="shop").update(namespace=NAMESPACE)
    return demo


def summary(reader, fmt: str, namespace: str = NAMESPACE):
    url = f"/api/v1/clusters/demo/namespaces/{quote(namespace, safe='')}/summary/"
    response = reader.get(url, {"format": fmt})
    assert response.status_code == 200, response.content[:300]
    return response


def test_plain_text_has_one_line_per_line_and_no_mention(reader, hostile):
    text = summary(reader, "text").content.decode()
    assert text.splitlines() == text.split("\n")[:-1], "a name broke a line (LF, CR, U+2028 …)"
    assert "@here" not in text and "@channel" not in text


def test_slack_mrkdwn_has_no_mention_link_or_formatting_from_a_name(reader, hostile):
    message = summary(reader, "slack").json()
    header, *blocks = message["blocks"]
    assert header["text"]["type"] == "plain_text"
    texts = [message["text"]] + [
        t for b in blocks for t in ([b["text"]["text"]] if "text" in b else [e["text"] for e in b["elements"]])
    ]
    for text in texts:
        # The only <…> left are the message's own links to the report.
        assert [link for link in re.findall(r"<([^>]*)>", text) if not link.startswith("http://testserver/")] == []
        assert "@here" not in text and "@channel" not in text and "\n# " not in text
        # Outside code spans (`…`) and the report links no part of a name is left: Slack formats and autolinks there.
        outside = re.sub(r"`[^`]*`|<http://testserver/[^>]*>", "", text)
        for part in ("evil", "Heading", "Click", "&amp;amp;"):
            assert part not in outside, (part, text)


def test_markdown_names_stay_in_their_code_spans(reader, hostile):
    text = summary(reader, "markdown").content.decode()
    tokens = MarkdownIt("commonmark").parse(text)
    assert {t.type for t in tokens} <= {"paragraph_open", "paragraph_close", "inline", "bullet_list_open",
                                        "bullet_list_close", "list_item_open", "list_item_close"}  # fmt: skip
    inline = [child for t in tokens if t.type == "inline" for child in t.children or []]
    links = [c.attrs["href"] for c in inline if c.type == "link_open"]
    assert links and all(str(href).startswith("http://testserver/c/demo/ns/") for href in links)
    assert not [c for c in inline if c.type in ("image", "html_inline", "heading_open")]
    outside = "".join(c.content for c in inline if c.type == "text")
    for part in ("www.evil", "evil.example", "Heading", "Click"):
        assert part not in outside, (part, outside)
    codes = [c.content for c in inline if c.type == "code_inline"]
    assert any(POD_CONTAINER.replace("@", "@\u2060") in code for code in codes)


def test_the_all_clear_names_the_highest_container_in_a_code_span(reader, demo):
    Pod.objects.filter(cluster=demo, name="api-0").update(name=TOP)
    Finding.objects.filter(cluster=demo, namespace="shop").update(throttle_ratio=0.02)
    Finding.objects.filter(cluster=demo, container__pod__name=TOP, container__name="main").update(throttle_ratio=0.05)
    markdown = summary(reader, "markdown", "shop").content.decode()
    assert f"highest: `{TOP}/main` at 5.0%" in markdown
    slack = summary(reader, "slack", "shop").json()
    assert f"highest: `{TOP}/main` at 5.0%" in slack["blocks"][1]["text"]["text"]
    assert f"highest: {TOP}/main at 5.0%" in summary(reader, "text", "shop").content.decode()
