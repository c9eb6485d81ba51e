"""Chart labels built from names show as text (issue 14, item 8): plotly.js renders a subset of HTML in axis, bar and
hover text — `<a href="https:…">` becomes a live link (it lets http:, https:, mailto: and relative links through),
`<b>`, `<br>` and `<span style>` take effect — and decodes entities. So labels must reach it with `&`, `<` and `>`
escaped: no tag left for it to find, and its entity decoding gives back the name as written."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from apps.clusters.models import Pod
from apps.dashboard.charts import figure_json, shares_figure

HOSTILE = ['<a href="https:evil.example">pwn', "<b>bold</b><br>x", "&lt;already&gt; & more", 'x<span style="x">']

# plotly.js's src/lib/svg_text_utils.js: what it takes for a tag, and the entities it decodes.
PLOTLY_TAG = re.compile(r"<[^<>]*>")
PLOTLY_ENTITY = re.compile(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);")
PLOTLY_NAMED = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×", "plusmn": "±", "deg": "°"}


def plotly_shows(text: str) -> str:
    """The text plotly.js draws for a label with no tags: its entities decoded once, as it does."""

    def decode(match: re.Match[str]) -> str:
        code = match.group(1)
        if code.startswith("#"):
            return chr(int(code[2:], 16) if code[1] == "x" else int(code[1:]))
        return PLOTLY_NAMED.get(code, match.group(0))

    return PLOTLY_ENTITY.sub(decode, text)


def assert_drawn_as_text(labels: list[str], names: list[str]) -> None:
    assert [PLOTLY_TAG.findall(label) for label in labels] == [[] for _ in labels], "plotly.js would render a tag"
    assert [plotly_shows(label) for label in labels] == names


def test_share_labels_reach_plotly_as_text():
    names = [f"shop/{name}" for name in HOSTILE]
    figure = json.loads(figure_json(shares_figure(names, [100] * len(names), [0.25] * len(names))))
    assert_drawn_as_text(figure["data"][0]["y"], names)


def test_the_node_page_chart_shows_a_linking_pod_name_as_text(client, api_user, demo):
    Pod.objects.filter(cluster=demo, name="api-0").update(name=HOSTILE[0])
    node = Pod.objects.get(cluster=demo, name=HOSTILE[0]).node
    assert node is not None
    client.force_login(api_user)
    page = client.get(f"/c/demo/node/{quote(node.name)}/").content.decode()
    chart = re.search(r'<script type="application/json" id="shares-chart">(.*?)</script>', page, re.S)
    assert chart is not None
    labels = json.loads(chart.group(1))["data"][0]["y"]
    shown = [plotly_shows(label) for label in labels]
    assert f"shop/{HOSTILE[0]}" in shown
    assert_drawn_as_text(labels, shown)
