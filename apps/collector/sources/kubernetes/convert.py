"""Kubernetes payloads → values: the checks a scrape body must pass, the text of an error answer, and one node's read.

Pure Python, no kubernetes client: the objects of a list go through apps.collector.inventory, a scrape through
apps.collector.cadvisor (both shared with the dump import); this module adds what only the live source needs.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apps.collector.cadvisor import parse_cadvisor
from apps.collector.inventory import node_with_kubelet_config
from apps.collector.sources.base import NodeRead, NodeScrapeError
from apps.telemetry.readings import NodeInfo

__all__ = ["check_metrics_text", "error_text", "json_object", "node_info_from_kubelet_config", "node_read"]

_UTF8_CHECK_BYTES = 1024 * 1024
_FIRST_SAMPLE = re.compile(rb"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{|\s)")
_NON_SPACE = re.compile(rb"\S")


def node_read(node: str, body: bytes, now: datetime) -> NodeRead:
    """A node's `/metrics/cadvisor` scrape → its readings (stamped `now` where the scrape has no timestamps) and
    problems, including one when the kubelet exposes no CFS counters at all."""
    scrape = parse_cadvisor(body, node=node, default_ts=now)
    result = NodeRead(
        node=node,
        readings=scrape.readings,
        pod_readings=scrape.pod_quota_readings(),
        has_cfs_counters=scrape.has_cfs_counters,
        has_pressure=scrape.has_pressure if scrape.readings else None,
        spec_shares=scrape.shares_by_container,
    )
    result.problems.extend(scrape.problems)
    if not scrape.has_cfs_counters and scrape.readings:
        result.problems.append(
            "this kubelet exposes no container_cpu_cfs_* series: throttling is not reported on this node "
            "(usage is still collected); the node agent can read cpu.stat directly"
        )
    return result


def node_info_from_kubelet_config(node: str, config: Mapping[str, Any]) -> NodeInfo:
    """The facts a node's kubelet configuration (`/configz` → `kubeletconfig`) adds: CPU manager policy and the like."""
    return node_with_kubelet_config(NodeInfo(name=node), config)


def json_object(body: bytes, what: str) -> dict[str, Any]:
    """An answer that must be one JSON object (a list page, a node); ValueError naming `what` otherwise."""
    try:
        value = json.loads(body)
    except ValueError:
        raise ValueError(f"{what} is not JSON: {error_text(body)}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} is a JSON {type(value).__name__}, expected an object")
    return value


def check_metrics_text(node_name: str, body: bytes) -> None:
    """Refuse a scrape that is not metrics text (empty, binary, not UTF-8, no sample line first), as Prometheus would
    fail such a scrape: NodeScrapeError naming the node and what is wrong."""
    text_start = _NON_SPACE.search(body)
    if text_start is None:
        raise NodeScrapeError(node_name, "the scrape is empty")
    if b"\x00" in body:
        raise NodeScrapeError(node_name, f"the scrape holds binary bytes, not metrics text ({len(body)} bytes)")
    not_utf8 = _not_utf8(body)
    if not_utf8 is not None:
        raise NodeScrapeError(node_name, f"the scrape is not UTF-8 text: {not_utf8}")
    first = _first_sample_line(body, text_start.start())
    if first and not _FIRST_SAMPLE.match(first):
        raise NodeScrapeError(node_name, f"the scrape does not look like metrics text: {first[:80]!r}")


def _not_utf8(body: bytes) -> str | None:
    """Where the body stops being UTF-8 ("line 12, byte 3456: …"), or None when it is UTF-8 throughout.

    Decoded a slice of whole lines at a time (no UTF-8 character holds a newline byte): decoding the whole body
    at once made a copy of it as large as the body.
    """
    if body.isascii():
        return None
    view = memoryview(body)
    start, size = 0, len(body)
    while start < size:
        end = body.find(b"\n", start + _UTF8_CHECK_BYTES)
        end = size if end < 0 else end + 1
        try:
            codecs.utf_8_decode(view[start:end], "strict", True)
        except UnicodeDecodeError as error:
            position = start + error.start
            line = body.count(b"\n", 0, position) + 1
            return f"line {line}, byte {position}: {bytes(view[max(0, position - 40) : position + 20])!r}"
        start = end
    return None


def _first_sample_line(body: bytes, start: int) -> bytes:
    """The first line from `start` that is neither blank nor a comment (b"" if none), found without splitting the
    whole body into lines, which would cost far more than the one line looked at."""
    size = len(body)
    while start < size:
        end = body.find(b"\n", start)
        if end < 0:
            end = size
        line = body[start:end].rstrip(b"\r")
        if line.strip() and not line.startswith(b"#"):
            return line
        start = end + 1
    return b""


def error_text(body: bytes, limit: int = 300) -> str:
    """The useful part of an error answer: a Status message when it is one, else its first characters."""
    try:
        status = json.loads(body)
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])[:limit]
    except ValueError:
        pass
    text = body[:limit].decode("utf-8", errors="replace").strip()
    return text or "(empty answer)"
