"""Chat messages about one namespace, ready for a bot to post as is: plain text, Markdown, Slack Block Kit, or JSON.

Pure functions of a NamespaceSummary and the report's absolute URL. Each message first says what the figures rest on,
so missing data never reads as good news: findings not computed yet say so and when the next refresh is due (no
all-clear), a window only partly covered says how much ("figures cover 7 of 60 min"), and lifetime figures (one
reading: counters since the container started) are labelled as such, never as the window's. Then it says how many
containers are throttled above the target, lists the containers (over the target first, then the others with
advice) with every recommendation of each, says how many more were left out, and links to the report for the window.

Names come from the cluster: every format neutralises what its reader would act on (a backtick closing a code span,
`<!channel>` or `@here` notifying a channel, a newline starting a new block). Markdown and Slack put every name in a
code span, the headline's too: chats autolink `www.example.com` or `https://…` in text, never in code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC
from typing import Any

from apps.advisor.changes import change_words
from apps.advisor.facts import format_ratio
from apps.advisor.models import Window
from apps.words import printable

from .selectors import NamespaceSummary

# Slack Block Kit limits: header text 150 characters, section and context text 3,000, 50 blocks per message.
SLACK_HEADER_MAX = 150
SLACK_TEXT_MAX = 3000
SLACK_BLOCKS_MAX = 50
# Blocks that are not a container's: header, headline, "…and N more", context.
_SLACK_FIXED_BLOCKS = 4

_WORD_JOINER = "\u2060"


# --- facts shared by every format ------------------------------------------------------------------------------------


def _name(text: str) -> str:
    """A cluster, namespace, pod or container name made inert for chat: control characters, line separators and
    bidi overrides escaped (`\\n`, `\\u2028`: one would start a new Markdown block or message line) and an invisible
    word joiner after each `@`, so `@here` or `@channel` in a name never matches a chat's mention syntax."""
    return printable(text).replace("@", "@" + _WORD_JOINER)


def _window_label(window: str) -> str:
    return str(Window(window).label)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _where(summary: NamespaceSummary) -> str:
    return f"{_name(summary.cluster)}/{_name(summary.namespace)}"


def _who(row: dict[str, Any]) -> str:
    return f"{_name(row['pod'])}/{_name(row['container'])}"


def _lifetime_only(summary: NamespaceSummary) -> bool:
    """Every figure is a lifetime one: no container has two readings in the window yet."""
    return summary.coverage.lifetime > 0 and not summary.coverage.covered_seconds


def _period(summary: NamespaceSummary) -> str:
    if _lifetime_only(summary):
        return "since each container started"
    return f"over the {_window_label(summary.window)}"


def _coverage_notes(summary: NamespaceSummary) -> list[str]:
    coverage = summary.coverage
    if _lifetime_only(summary):
        return ["lifetime counters, one reading each"]
    notes = []
    if coverage.partial:
        notes.append(f"figures cover {coverage.covered_minutes} of {coverage.window_minutes} min")
    if coverage.lifetime:
        started = "since it started" if coverage.lifetime == 1 else "since they started"
        notes.append(f"lifetime figures for {_plural(coverage.lifetime, 'container')}, {started}")
    return notes


def _utc_minute(summary: NamespaceSummary) -> str:
    when = summary.coverage.next_refresh_at
    return "" if when is None else when.astimezone(UTC).strftime("%H:%M UTC")


def _ratio(row: dict[str, Any]) -> tuple[str | None, str]:
    """The row's throttle ratio as (figure, words): ("60%", "throttled"), with the scope of a lifetime figure, or
    (None, why there is none). Each format styles the figure its own way."""
    ratio = row.get("throttle_ratio")
    if ratio is None:
        return None, "no throttle ratio (no CPU limit)" if row.get("limit_mcpu") is None else "no throttle ratio yet"
    scope = " since the container started" if row.get("window_start") is None else ""
    return format_ratio(ratio), f"throttled{scope}"


def _ratio_text(row: dict[str, Any]) -> str:
    figure, words = _ratio(row)
    return words if figure is None else f"{figure} {words}"


def headline(summary: NamespaceSummary) -> str:
    """One sentence: the state of the namespace, with what the figures cover; never an all-clear from missing data."""
    return _headline_as(summary, str, str)


def _headline_as(summary: NamespaceSummary, escape: Callable[[str], str], code: Callable[[str], str]) -> str:
    """The headline in a format: its words through `escape`, its names through `code` (the format's code span)."""
    template, names = _headline(summary)
    return escape(template).format(**{key: code(name) for key, name in names.items()})


def _headline(summary: NamespaceSummary) -> tuple[str, dict[str, str]]:
    """The headline with `{where}` and `{top}` standing for the names, and the names. Its words hold no braces."""
    target = format_ratio(summary.throttle_target)
    where = "{where}"
    names = {"where": _where(summary)}
    label = _window_label(summary.window)
    if summary.containers == 0:
        return f"No findings for {where} over the {label} yet: no container there has been measured.", names
    if not summary.coverage.computed:
        due = summary.coverage.next_refresh_at
        if due is None:
            return f"Findings for {where} over the {label} are not computed yet.", names
        when = "was due at" if due < summary.as_of else "at"
        return (
            f"Findings for {where} over the {label} are not computed yet — next refresh {when} {_utc_minute(summary)}."
        ), names
    notes = _coverage_notes(summary)
    if summary.over_target == 0:
        top = summary.top
        highest = "no throttling counters reported"
        if top is not None:
            scope = (
                " since the container started" if top["window_start"] is None and not _lifetime_only(summary) else ""
            )
            names["top"] = _who(top)
            highest = f"highest: {{top}} at {format_ratio(top['throttle_ratio'])}{scope}"
        details = "; ".join([*notes, f"{_plural(summary.containers, 'container')} checked", highest])
        return f"No container in {where} is throttled above the {target} target {_period(summary)} ({details}).", names
    qualifier = f" ({'; '.join(notes)})" if notes else ""
    return (
        f"{summary.over_target} of {_plural(summary.containers, 'container')} in {where} "
        f"{'is' if summary.over_target == 1 else 'are'} throttled above the {target} target {_period(summary)}"
        f"{qualifier}."
    ), names


def _more(hidden_over: int, hidden_advised: int) -> str | None:
    """ "…and N more …" for the containers a message leaves out (each format adds the report link), or None."""
    parts = []
    if hidden_over > 0:
        parts.append(f"{hidden_over} more over the target")
    if hidden_advised > 0:
        parts.append(f"{hidden_advised} more not over the target with recommendations")
    return "…and " + " and ".join(parts) if parts else None


_BELOW_HEADING = "Not over the target, with recommendations:"


def _advice(rec: dict[str, Any]) -> str:
    """A recommendation's summary and, where it makes a claim, its expected effect in words."""
    expected = rec.get("expected_throttle_ratio_max")
    if expected is None:
        return str(rec["summary"])
    return f"{rec['summary']} (expected: throttled in at most {format_ratio(expected)} of periods after the change)"


_CHANGES_HEADING = "Recent changes (24 h) and their effect:"


def change_line(row: dict[str, Any]) -> str:
    """One change in words, an image or node name in it made inert like every name (advisor.changes.change_words)."""
    return change_words(row, _name)


def _change_who(row: dict[str, Any]) -> str:
    # A rollout over several pods is the workload's change.
    if row["pods"] > 1 and row["workload_name"]:
        return f"{row['workload_kind']} {row['workload_name']}/{row['container']}"
    return f"{row['pod']}/{row['container']}"


# --- plain text ------------------------------------------------------------------------------------------------------


def as_text(summary: NamespaceSummary, report_url: str) -> str:
    """Plain text, one fact per line: a line per container, an indented line per recommendation, the report's URL."""
    lines = [f"cputune: {_where(summary)}", headline(summary)]
    for group, rows in ((None, summary.worst), (_BELOW_HEADING, summary.advised)):
        if rows and group:
            lines.append(group)
        for row in rows:
            lines.append(f"- {_who(row)}: {_ratio_text(row)}")
            lines += [f"  - {rec['severity']}: {_advice(rec)}" for rec in row["recommendations"]]
    more = _more(summary.hidden_over_target, summary.hidden_advised)
    if more:
        lines.append(f"{more}: see the report.")
    if summary.changes:
        lines.append(_CHANGES_HEADING)
        lines += [f"- {_name(_change_who(row))}: {change_line(row)}" for row in summary.changes]
    lines.append(f"Report: {report_url}")
    return "\n".join(lines) + "\n"


# --- Markdown --------------------------------------------------------------------------------------------------------

_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#|~!&"})


def _md(text: str) -> str:
    return text.translate(_MARKDOWN_SPECIAL)


def _md_code(text: str) -> str:
    """A CommonMark code span around any text: the fence is one backtick longer than the longest run inside, padded
    with spaces when the text starts or ends with a backtick (CommonMark strips one space on each side)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_ratio(row: dict[str, Any]) -> str:
    figure, words = _ratio(row)
    return _md(words) if figure is None else f"**{_md(figure)}** {_md(words)}"


def as_markdown(summary: NamespaceSummary, report_url: str) -> str:
    """CommonMark: a bold title, the headline, a bullet per container with a nested bullet per recommendation, and a
    link to the report; names in code spans."""
    lines = [f"**cputune: {_md_code(_where(summary))}**", "", _headline_as(summary, _md, _md_code)]
    for group, rows in ((None, summary.worst), (_BELOW_HEADING, summary.advised)):
        if not rows:
            continue
        lines += ["", _md(group)] if group else []
        lines.append("")
        for row in rows:
            lines.append(f"- {_md_code(_who(row))} {_md_ratio(row)}")
            lines += [f"  - **{rec['severity']}**: {_md(_advice(rec))}" for rec in row["recommendations"]]
    more = _more(summary.hidden_over_target, summary.hidden_advised)
    if more:
        lines += ["", f"{_md(more)}: [see the report]({report_url})."]
    if summary.changes:
        lines += ["", _md(_CHANGES_HEADING), ""]
        lines += [f"- {_md_code(_change_who(row))} {_md(change_line(row))}" for row in summary.changes]
    lines += ["", f"[Open the report]({report_url})"]
    return "\n".join(lines) + "\n"


# --- Slack -----------------------------------------------------------------------------------------------------------


def _slack(text: str) -> str:
    # Slack's mrkdwn treats &, < and > as control characters (links, mentions such as <!channel>): escape them.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_code(text: str) -> str:
    # Slack code spans cannot escape a backtick: a look-alike keeps the name readable and the span closed.
    return "`" + _slack(text).replace("`", "ˋ") + "`"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, SLACK_TEXT_MAX)}}


def _slack_container(row: dict[str, Any]) -> str:
    figure, words = _ratio(row)
    shown = _slack(words) if figure is None else f"*{figure}* {_slack(words)}"
    lines = [f"• {_slack_code(_who(row))} {shown}"]
    lines += [f"    ◦ *{rec['severity']}*: {_slack(_advice(rec))}" for rec in row["recommendations"]]
    return "\n".join(lines)


def as_slack(summary: NamespaceSummary, report_url: str) -> dict[str, Any]:
    """Block Kit: a header, a section with the headline, a section per container (its recommendations below it),
    "…and N more" with the report link when Slack's 50-block limit or `limit` cut the list, and a context line with
    the window, the target and the report link; `text` is the notification fallback Slack asks for."""
    room = SLACK_BLOCKS_MAX - _SLACK_FIXED_BLOCKS - (1 if summary.changes else 0)
    worst = summary.worst[:room]
    advised = summary.advised[: room - len(worst)]
    containers = [_slack_container(row) for row in worst]
    for index, row in enumerate(advised):
        text = _slack_container(row)
        containers.append(f"{_BELOW_HEADING}\n{text}" if index == 0 else text)
    hidden_over = summary.over_target - len(worst)
    hidden_advised = summary.advised_below_target - len(advised)
    more = _more(hidden_over, hidden_advised)
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _cut(f"cputune: {_where(summary)}", SLACK_HEADER_MAX)},
        },
        _section(_headline_as(summary, _slack, _slack_code)),
        *(_section(text) for text in containers),
    ]
    if more:
        blocks.append(_section(f"{_slack(more)}: <{report_url}|see the report>."))
    if summary.changes:
        lines = [f"• {_slack_code(_change_who(row))} {_slack(change_line(row))}" for row in summary.changes]
        blocks.append(_section("\n".join([f"*{_slack(_CHANGES_HEADING)}*", *lines])))
    context = (
        f"{_slack(_window_label(summary.window)).capitalize()} · target {format_ratio(summary.throttle_target)} · "
        f"<{report_url}|Open the report>"
    )
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": _cut(_headline_as(summary, _slack, _slack_code), SLACK_TEXT_MAX), "blocks": blocks}


# --- JSON ------------------------------------------------------------------------------------------------------------


def as_json(summary: NamespaceSummary, report_url: str) -> dict[str, Any]:
    """The same facts, structured (NamespaceSummarySerializer describes them): names as stored, ratios 0-1, each
    listed container with every recommendation, and how many were left out."""
    coverage = summary.coverage
    return {
        "cluster": summary.cluster,
        "namespace": summary.namespace,
        "window": summary.window,
        "throttle_target": summary.throttle_target,
        "headline": headline(summary),
        "coverage": {
            "computed": coverage.computed,
            "partial": coverage.partial,
            "lifetime_only": _lifetime_only(summary),
            "covered_minutes": coverage.covered_minutes,
            "window_minutes": coverage.window_minutes,
            "computed_at": coverage.computed_at,
            "next_refresh_at": coverage.next_refresh_at,
            "containers": coverage.containers,
            "measured": coverage.measured,
            "lifetime": coverage.lifetime,
        },
        "containers_checked": summary.containers,
        "containers_over_target": summary.over_target,
        "containers_advised_below_target": summary.advised_below_target,
        "containers": [
            {
                "pod": row["pod"],
                "container": row["container"],
                "over_target": over,
                "throttle_ratio": row["throttle_ratio"],
                "lifetime": row["window_start"] is None,
                "window_start": row["window_start"],
                "window_end": row["window_end"],
                "recommendations": row["recommendations"],
            }
            for over, rows in ((True, summary.worst), (False, summary.advised))
            for row in rows
        ],
        "more_over_target": summary.hidden_over_target,
        "more_advised_below_target": summary.hidden_advised,
        "report_url": report_url,
        "changes": summary.changes,
    }
