"""Chat messages about one namespace, ready for a bot to post as is: plain text, Markdown, or Slack Block Kit.

Pure functions of a NamespaceSummary and the report's absolute URL. Each message says how many containers are
throttled above the target, lists the worst ones with their ratio and first (most severe) recommendation, and links
to the namespace page; when nothing is throttled it says so, with the highest ratio seen.
"""

from __future__ import annotations

from typing import Any

from apps.advisor.models import Window
from apps.advisor.rules import format_ratio

from .selectors import NamespaceSummary

# Slack Block Kit limits: header text 150 characters, section and context text 3,000.
SLACK_HEADER_MAX = 150
SLACK_TEXT_MAX = 3000


def _window_label(window: str) -> str:
    return str(Window(window).label)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _advice(row: dict[str, Any]) -> str:
    recommendations = row.get("recommendations") or []
    return recommendations[0]["summary"] if recommendations else "no recommendation"


def _ratio(row: dict[str, Any]) -> str:
    ratio = row.get("throttle_ratio")
    return "unknown" if ratio is None else format_ratio(ratio)


def _headline(summary: NamespaceSummary) -> str:
    target = format_ratio(summary.throttle_target)
    where = f"{summary.cluster}/{summary.namespace}"
    if summary.containers == 0:
        return f"No findings for {where} over the {_window_label(summary.window)} yet: no container there has been measured."
    if summary.over_target == 0:
        top = summary.top
        highest = (
            f"highest: {top['pod']}/{top['container']} at {_ratio(top)}"
            if top is not None
            else "no throttling counters reported"
        )
        return (
            f"No container in {where} is throttled above the {target} target over the {_window_label(summary.window)} "
            f"({_plural(summary.containers, 'container')} checked; {highest})."
        )
    return (
        f"{summary.over_target} of {_plural(summary.containers, 'container')} in {where} "
        f"{'is' if summary.over_target == 1 else 'are'} throttled above the {target} target over the "
        f"{_window_label(summary.window)}."
    )


def _footer_lines(summary: NamespaceSummary) -> list[str]:
    lines = []
    hidden = summary.over_target - len(summary.worst)
    if hidden > 0:
        lines.append(f"…and {hidden} more over the target.")
    if summary.advised_below_target:
        lines.append(
            f"{_plural(summary.advised_below_target, 'container')} not over the target "
            f"{'has' if summary.advised_below_target == 1 else 'have'} recommendations too."
        )
    return lines


def as_text(summary: NamespaceSummary, report_url: str) -> str:
    """Plain text, one fact per line, ending with the report's URL."""
    lines = [f"cputune: {summary.cluster}/{summary.namespace}", _headline(summary)]
    lines += [f"- {row['pod']}/{row['container']}: {_ratio(row)} throttled. {_advice(row)}" for row in summary.worst]
    lines += _footer_lines(summary)
    lines.append(f"Report: {report_url}")
    return "\n".join(lines) + "\n"


_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#|"})


def _md(text: str) -> str:
    return text.translate(_MARKDOWN_SPECIAL)


def as_markdown(summary: NamespaceSummary, report_url: str) -> str:
    """CommonMark: a bold title, the headline, a bullet per container (names in code spans), a link to the report."""
    lines = [f"**cputune: {_md(summary.cluster)}/{_md(summary.namespace)}**", "", _md(_headline(summary))]
    if summary.worst:
        lines.append("")
        lines += [
            f"- `{row['pod']}/{row['container']}` **{_ratio(row)}** throttled: {_md(_advice(row))}"
            for row in summary.worst
        ]
    footer = _footer_lines(summary)
    if footer:
        lines += ["", *(_md(line) for line in footer)]
    lines += ["", f"[Open the report]({report_url})"]
    return "\n".join(lines) + "\n"


def _slack(text: str) -> str:
    # Slack's mrkdwn treats &, < and > as control characters (links, mentions); they must be escaped.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_slack(summary: NamespaceSummary, report_url: str) -> dict[str, Any]:
    """Block Kit: a header, a mrkdwn section (headline and the worst containers), a context line with the window,
    the target and the report link; `text` is the notification fallback Slack asks for."""
    body = [_slack(_headline(summary))]
    body += [
        f"• `{row['pod']}/{row['container']}` *{_ratio(row)}* throttled: {_slack(_advice(row))}"
        for row in summary.worst
    ]
    body += [_slack(line) for line in _footer_lines(summary)]
    context = (
        f"{_slack(_window_label(summary.window)).capitalize()} · target {format_ratio(summary.throttle_target)} · "
        f"<{report_url}|Open the report>"
    )
    return {
        "text": _cut(_headline(summary), SLACK_TEXT_MAX),
        "blocks": [
            {
                "type": "header",
                "text": {
                    "type": "plain_text",
                    "text": _cut(f"cputune: {summary.cluster}/{summary.namespace}", SLACK_HEADER_MAX),
                },
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": _cut("\n".join(body), SLACK_TEXT_MAX)}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
        ],
    }
