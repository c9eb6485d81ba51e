"""Parse the kubelet's `/metrics/cadvisor` exposition text into per-container counter readings. Pure Python.

A scrape is megabytes of text, tens of thousands of lines, of which only the few CPU families below matter. The speed
comes from never looking at the other lines in Python: one compiled regex walks the bytes in C and hands back only
the lines of the wanted families, and each distinct label set is parsed once (a cgroup's labels repeat on every
family). Everything else follows the Prometheus text format as cAdvisor writes it (docs/domain.md#kubelet-cadvisor):

- labels `namespace`/`pod`/`container` (Kubernetes ≥ 1.16) or `pod_name`/`container_name` (before);
- `container=""` with a pod and no image is the pod-level cgroup; the sandbox (`container="POD"` under docker, a
  `pause` image, or `container=""` with an image under containerd) and node-level series without a pod or namespace
  (`id="/"`, `/kubepods`, system slices) are skipped;
- an optional trailing timestamp in milliseconds;
- `container_cpu_usage_seconds_total` per CPU (`cpu="cpu00"`, …) on old cAdvisors, `cpu="total"` on newer ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import chain
from typing import BinaryIO

from apps.telemetry.counters import MAX_SANE, BadCounter, check_counter
from apps.telemetry.readings import CounterReading

# A line longer than this is refused unparsed: real cAdvisor lines are a few hundred bytes, and a hostile or corrupt
# line with a million labels must not cost a million label parses.
MAX_LINE_BYTES = 64 * 1024
# Problems listed at most; the rest are counted in one closing entry so a garbage scrape cannot build a huge list.
MAX_PROBLEMS = 50
# A saved scrape is read this much at a time, cut at a line end, so a 50 MB file costs a few MB of memory.
CHUNK_BYTES = 1 << 20
# What is kept of a line too long for one chunk: enough to tell it is longer than MAX_LINE_BYTES.
_LONG_LINE_HEAD = 2 * MAX_LINE_BYTES
# Distinct label blocks remembered; a scrape with more (each cgroup has a handful) starts the cache afresh.
_LABEL_CACHE_SIZE = 100_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_TS_MS = 253_402_300_800_000  # year 10000: a later timestamp cannot be a datetime

# Family codes. The first three are the CFS counters whose presence answers "does this kubelet expose throttling?".
(_PERIODS, _THROTTLED_PERIODS, _THROTTLED_SECONDS, _USAGE, _THREADS, _QUOTA, _PERIOD, _SHARES, _START, _WAITING,
 _STALLED) = range(11)  # fmt: skip
_FAMILIES: dict[bytes, int] = {
    b"container_cpu_cfs_periods_total": _PERIODS,
    b"container_cpu_cfs_throttled_periods_total": _THROTTLED_PERIODS,
    b"container_cpu_cfs_throttled_seconds_total": _THROTTLED_SECONDS,
    b"container_cpu_usage_seconds_total": _USAGE,
    b"container_threads": _THREADS,
    b"container_spec_cpu_quota": _QUOTA,
    b"container_spec_cpu_period": _PERIOD,
    b"container_spec_cpu_shares": _SHARES,
    b"container_start_time_seconds": _START,
    # CPU pressure (PSI "some" and "full" of cpu.pressure): kubelet ≥ 1.33 with KubeletPSI, on cgroup v2.
    b"container_pressure_cpu_waiting_seconds_total": _WAITING,
    b"container_pressure_cpu_stalled_seconds_total": _STALLED,
}
_NAMES = {code: name.decode() for name, code in _FAMILIES.items()}

# A wanted line starts right after a newline with one of the family names and `{`: the literal "\ncontainer_" prefix
# lets the regex engine skip through the text in C. `container_threads_max{` does not match (the `{` must follow the
# name). The body of the line is taken up to MAX_LINE_BYTES + 1 bytes so an endless line costs a bounded copy.
_ALTERNATION = b"|".join(re.escape(name) for name in sorted(_FAMILIES, key=len, reverse=True))
_WANTED_LINE = re.compile(rb"\n(" + _ALTERNATION + rb")\{([^\n]{0,%d})" % (MAX_LINE_BYTES + 1))
_WANTED_FIRST_LINE = re.compile(rb"(" + _ALTERNATION + rb")\{([^\n]{0,%d})" % (MAX_LINE_BYTES + 1))

# A label value: no raw quote, backslash or newline except as an escape. Written as an unrolled loop, which the
# regex engine runs without backtracking.
_VALUE = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
_LABEL_NAME = rb"[a-zA-Z_][a-zA-Z0-9_]*"
_PAIR = _LABEL_NAME + rb"[ \t]*=[ \t]*" + _VALUE
_LABEL_BLOCK = re.compile(rb"[ \t]*(?:" + _PAIR + rb"[ \t]*,[ \t]*)*(?:" + _PAIR + rb"[ \t]*)?")
_LABEL_PAIRS = re.compile(rb"(" + _LABEL_NAME + rb")[ \t]*=[ \t]*\"([^\"\\\n]*(?:\\.[^\"\\\n]*)*)\"")
# The names of a label block as cAdvisor writes it, cut out and joined as `_plain_labels` does.
_PLAIN_NAMES = re.compile(rb"," + _LABEL_NAME + rb'=(?:",' + _LABEL_NAME + rb"=)*")
_ESCAPE = re.compile(rb"\\(.)")
_ESCAPED = {b"\\": b"\\", b'"': b'"', b"n": b"\n"}

# The first meaningful line of exposition text: a comment, or a sample whose value is a number.
_SAMPLE_START = re.compile(rb"[a-zA-Z_:][a-zA-Z0-9_:]*(?:(\{)|[ \t]+(\S+))")

# What a label set means for us.
_SKIP, _CONTAINER, _POD = 0, 1, 2
# (kind, cgroup key, namespace, pod, container, cpu label) or the reason the label block is unreadable.
_Labels = tuple[int, tuple[bytes, str, str, str], str, str, str, bytes]
_NOT_WANTED: _Labels = (_SKIP, (b"", "", "", ""), "", "", "", b"")
# A label set naming no namespace and no pod at all: not a kubelet's cAdvisor (every one of its series has them).
# Told from _NOT_WANTED by identity.
_UNKNOWN: _Labels = (_SKIP, (b"", "", "", ""), "", "", "", b"")


class ScrapeError(ValueError):
    """The body is not Prometheus exposition text at all (an HTML error page, a JSON Status, binary data)."""


@dataclass(frozen=True, slots=True)
class CadvisorScrape:
    """What one kubelet's `/metrics/cadvisor` said about its containers.

    `readings` has one entry per (namespace, pod, container), sorted; `pod_readings` the pod-level cgroups
    (container ""). `has_cfs_counters` is False when the kubelet exposes no `container_cpu_cfs_*` series at all,
    which means "throttling is not reported here", not "zero throttling". `shares_by_container` maps
    (namespace, pod, container) to `container_spec_cpu_shares` (CounterReading has no field for it).
    `lines` counts every line of the body; `problems` describes bad lines and dropped values, at most MAX_PROBLEMS + 1.
    `has_pressure` is False when no `container_pressure_cpu_*` series came: pressure is not exported here.
    """

    readings: list[CounterReading]
    pod_readings: list[CounterReading]
    has_cfs_counters: bool
    lines: int
    problems: list[str]
    shares_by_container: dict[tuple[str, str, str], int] = field(default_factory=dict)
    has_pressure: bool = False

    def pod_quota_readings(self) -> list[CounterReading]:
        """The pod cgroups with CFS counters, i.e. a pod-level quota (every container limited, or spec.resources):
        the ones whose throttling can differ from their containers'. Others would only double the stored series."""
        return [r for r in self.pod_readings if r.periods_total is not None]


@dataclass(slots=True)
class _Cgroup:
    """The values gathered for one cgroup (one `id` label) while the text is read."""

    id: bytes
    kind: int
    namespace: str
    pod: str
    container: str
    seen_order: int  # which cgroup came first in the text, for "else the last seen"
    ts_ms: int | None = None
    periods_total: int | None = None
    throttled_periods_total: int | None = None
    throttled_seconds_total: float | None = None
    cpu_usage_total: float | None = None  # the cpu="total" series (or one without a cpu label)
    cpu_usage: dict[bytes, float] = field(default_factory=dict)  # per-CPU series of old cAdvisors: cpu -> seconds
    threads: int | None = None
    quota_us: int | None = None
    quota_seen: bool = False  # quota_us stays None for "no quota", so whether the series came is kept apart
    period_us: int | None = None
    shares: int | None = None
    start_time_seconds: float | None = None
    pressure_waiting_seconds_total: float | None = None
    pressure_stalled_seconds_total: float | None = None

    def usage_seconds_total(self) -> float | None:
        if self.cpu_usage_total is not None:
            return self.cpu_usage_total
        if self.cpu_usage:
            return sum(self.cpu_usage.values())
        return None

    def has_reading(self) -> bool:
        return not (
            self.periods_total is None
            and self.throttled_periods_total is None
            and self.throttled_seconds_total is None
            and self.cpu_usage_total is None
            and not self.cpu_usage
            and self.threads is None
            and not self.quota_seen
            and self.period_us is None
            and self.pressure_waiting_seconds_total is None
            and self.pressure_stalled_seconds_total is None
        )


class _Problems:
    """Problem notes, capped; the line number is only worked out for the notes that are kept."""

    __slots__ = ("counted_to", "data", "dropped", "first_line", "line_number", "notes")

    def __init__(self) -> None:
        self.data = b""
        self.notes: list[str] = []
        self.dropped = 0
        # Problems come in text order, so newlines are counted on from the last one: linear even for 50 problems
        # spread over 50 MB.
        self.counted_to = 0
        self.first_line = self.line_number = 1

    def chunk(self, data: bytes, first_line: int) -> None:
        """Positions from now on are in `data`, whose first line is line `first_line` of the body."""
        self.data = data
        self.counted_to = 0
        self.first_line = self.line_number = first_line

    def at(self, pos: int, message: str) -> None:
        if len(self.notes) >= MAX_PROBLEMS:
            self.dropped += 1
            return
        if pos < self.counted_to:
            self.counted_to, self.line_number = 0, self.first_line
        self.line_number += self.data.count(b"\n", self.counted_to, pos)
        self.counted_to = pos
        self.notes.append(f"line {self.line_number}: {message}")

    def add(self, message: str) -> None:
        if len(self.notes) >= MAX_PROBLEMS:
            self.dropped += 1
            return
        self.notes.append(message)

    def as_list(self) -> list[str]:
        if self.dropped:
            return [*self.notes, f"... and {self.dropped} more problems not listed"]
        return list(self.notes)


def _unescape(raw: bytes) -> bytes:
    if b"\\" not in raw:
        return raw
    return _ESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), m.group(0)), raw)


def _is_pause_image(image: bytes) -> bool:
    """`registry.k8s.io/pause:3.10`, `gcr.io/google_containers/pause-amd64:3.0`; not `acme/pausebot`."""
    repository = image.rsplit(b"/", 1)[-1].split(b"@", 1)[0].split(b":", 1)[0]
    return repository == b"pause" or repository.startswith(b"pause-")


def _plain_labels(block: bytes) -> dict[bytes, bytes] | None:
    """Labels written as cAdvisor writes them, `a="x",b="y"` with no escape or blank; None for anything else.

    Split on the quotes, the text alternates names and values (a value holds no raw quote); the names, the first given
    a comma too, must join back into `,a=",b=`. Keys stay `,name=`, which saves cutting each name out of its separators.
    """
    if b"\\" in block:
        return None
    parts = block.split(b'"')
    if len(parts) < 3 or len(parts) % 2 == 0 or parts[-1] not in (b"", b","):
        return None
    names = parts[0:-1:2]
    names[0] = b"," + names[0]
    if _PLAIN_NAMES.fullmatch(b'"'.join(names)) is None:
        return None
    return dict(zip(names, parts[1::2], strict=True))


def _parse_labels(block: bytes) -> _Labels | str:
    """Read one label block (between the braces) into what it means for us, or say why it cannot be read."""
    # Node-level series (the root, /kubepods, system slices) carry namespace="": skip them before any parsing.
    # In valid text `,namespace=""` can only be that label with an empty value, as a value holds no raw quote.
    if b',namespace=""' in block or block.startswith(b'namespace=""'):
        return _NOT_WANTED
    labels = _plain_labels(block)
    if labels is None:
        if _LABEL_BLOCK.fullmatch(block) is None:
            snippet = block[:80].decode("utf-8", "replace")
            return f"malformed labels {{{snippet}{'...' if len(block) > 80 else ''}}}"
        labels = {b"," + name + b"=": _unescape(value) for name, value in _LABEL_PAIRS.findall(block)}

    if b",namespace=" not in labels and b",pod=" not in labels and b",pod_name=" not in labels:
        return _UNKNOWN
    namespace = labels.get(b",namespace=") or b""
    pod = labels.get(b",pod=") or labels.get(b",pod_name=") or b""
    container = labels.get(b",container=") or labels.get(b",container_name=") or b""
    image = labels.get(b",image=") or b""
    if not pod or not namespace:
        return _NOT_WANTED  # node level
    if container == b"POD" or (b"pause" in image and _is_pause_image(image)) or (not container and image):
        return _NOT_WANTED  # the sandbox that holds the pod's namespaces (docker names it POD; containerd leaves it "")
    kind = _CONTAINER if container else _POD
    namespace_str = namespace.decode("utf-8", "replace")
    pod_str = pod.decode("utf-8", "replace")
    container_str = container.decode("utf-8", "replace")
    # The cgroup id tells a dead container's cgroup from its live successor's; without one, the names stand in.
    key = (labels.get(b",id=") or b"", namespace_str, pod_str, container_str)
    return (kind, key, namespace_str, pod_str, container_str, labels.get(b",cpu=") or b"")


def _check_body(data: bytes) -> bool:
    """Whether the body has any line at all; raise ScrapeError unless its first one looks like exposition text.

    Only the first 4 KiB of that line are looked at: a comment, `name{...`, or `name value` with a numeric value
    (which turns away "Internal Server Error", an HTML page, a JSON Status or compressed bytes).
    """
    start = 0
    size = len(data)
    while start < size:
        end = data.find(b"\n", start, start + 4096)
        line = data[start : start + 4096 if end < 0 else end].strip()
        if line:
            if line.startswith(b"#"):
                return True
            sample = _SAMPLE_START.match(line)
            if sample is not None:
                if sample.group(1) == b"{":
                    return True
                try:
                    float(sample.group(2))
                except ValueError:
                    pass
                else:
                    return True
            snippet = line[:60].decode("utf-8", "replace")
            raise ScrapeError(f"not Prometheus exposition text: the body starts with {snippet!r}")
        if end < 0:
            break
        start = end + 1
    return False


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's bytes as chunks of whole lines, about CHUNK_BYTES each; only the last may lack its newline.

    A line longer than _LONG_LINE_HEAD is cut to its first _LONG_LINE_HEAD bytes (and its newline): the parser
    refuses it as longer than MAX_LINE_BYTES either way, and an endless line must not be held in memory.
    """
    rest = b""
    while True:
        block = stream.read(CHUNK_BYTES)
        if not block:
            if rest:
                yield rest
            return
        buffer = rest + block if rest else block
        cut = buffer.rfind(b"\n") + 1
        if cut:
            yield buffer[:cut]
        rest = buffer[cut:]
        if len(rest) > _LONG_LINE_HEAD:
            head, rest = rest[:_LONG_LINE_HEAD], b""
            while True:
                block = stream.read(CHUNK_BYTES)
                if not block:
                    yield head
                    return
                end = block.find(b"\n")
                if end >= 0:
                    yield head + b"\n"
                    rest = block[end + 1 :]
                    break


def parse_cadvisor(data: bytes, *, node: str = "", default_ts: datetime) -> CadvisorScrape:
    """Parse a kubelet `/metrics/cadvisor` body into one CounterReading per container (and per pod-level cgroup).

    Counters are cumulative as cAdvisor reports them (periods as int, seconds as float); `quota_us` is None when the
    quota is 0 or absent. A reading's `ts` is the newest sample timestamp among its series (they are in ms), else
    `default_ts` (timezone-aware). Bad lines and impossible values (NaN, ±Inf, negative, past 2**53) are dropped and
    described in `problems`, and so is a last line without its newline (the body may have been cut inside its value);
    series without namespace and pod labels are counted in one problem. When several cgroups report one container,
    the newest (by start time) is kept.
    Raises ScrapeError only when the body is not exposition text at all, ValueError for a naive `default_ts`.
    """
    return _parse((data,), node, default_ts)


def parse_cadvisor_stream(stream: BinaryIO, *, node: str = "", default_ts: datetime) -> CadvisorScrape:
    """parse_cadvisor for a body read from a binary stream (a saved scrape), CHUNK_BYTES at a time: memory stays
    bounded by the chunk and the containers found, whatever the size of the body. OSError from the stream passes."""
    return _parse(_chunks(stream), node, default_ts)


def _parse(chunks: Iterable[bytes], node: str, default_ts: datetime) -> CadvisorScrape:
    """Parse a body given as chunks of whole lines (only the last may lack its newline)."""
    if default_ts.tzinfo is None:
        raise ValueError(f"default_ts must be timezone-aware, got naive {default_ts.isoformat()}")
    problems = _Problems()
    label_cache: dict[bytes, _Labels | str] = {}
    cgroups: dict[tuple[bytes, str, str, str], _Cgroup] = {}
    has_cfs_counters = False
    unknown_series, unknown_block = 0, b""
    newlines = 0
    body_seen = any_container = unterminated = False
    for data in chunks:
        if not body_seen:
            body_seen = _check_body(data)
            if not body_seen:  # blank lines only so far
                newlines += data.count(b"\n")
                continue
        problems.chunk(data, newlines + 1)
        newlines += data.count(b"\n")
        if not any_container:
            any_container = data.startswith(b"container_") or b"\ncontainer_" in data
        if len(label_cache) > _LABEL_CACHE_SIZE:
            label_cache.clear()
        size = len(data)
        unterminated = not data.endswith(b"\n")
        first = _WANTED_FIRST_LINE.match(data)
        matches = _WANTED_LINE.finditer(data) if first is None else chain((first,), _WANTED_LINE.finditer(data))
        has_cfs_counters, unknown_series, unknown_block = _parse_matches(
            matches, size, unterminated, label_cache, cgroups, problems, has_cfs_counters, unknown_series, unknown_block
        )

    if not body_seen:
        problems.add("the body is empty: no metrics at all")
        return CadvisorScrape([], [], False, 0, problems.as_list())
    lines = newlines + (1 if unterminated else 0)
    if not cgroups and not any_container:
        problems.add("no container_* series at all: is this the kubelet's /metrics/cadvisor?")
    if unknown_series:
        snippet = unknown_block[:120].decode("utf-8", "replace") + ("..." if len(unknown_block) > 120 else "")
        problems.add(
            f"{unknown_series} container_* series name no namespace or pod, e.g. {{{snippet}}}: not a kubelet's "
            "label set, skipped"
        )
    readings, pod_readings, shares = _readings(cgroups, node, default_ts, problems)
    has_pressure = any(c.pressure_waiting_seconds_total is not None for c in cgroups.values())
    return CadvisorScrape(readings, pod_readings, has_cfs_counters, lines, problems.as_list(), shares, has_pressure)


def _parse_matches(
    matches: Iterable[re.Match[bytes]],
    size: int,
    unterminated: bool,
    label_cache: dict[bytes, _Labels | str],
    cgroups: dict[tuple[bytes, str, str, str], _Cgroup],
    problems: _Problems,
    has_cfs_counters: bool,
    unknown_series: int,
    unknown_block: bytes,
) -> tuple[bool, int, bytes]:
    """The wanted lines of one chunk into `cgroups`; returns the running (has_cfs_counters, unknown_series,
    unknown_block). One loop in one frame on purpose: helper calls per line cost real time."""
    for match in matches:
        name, rest = match.groups()
        code = _FAMILIES[name]
        if code <= _THROTTLED_SECONDS:
            has_cfs_counters = True
        if len(rest) > MAX_LINE_BYTES:
            problems.at(match.start(2), f"{name.decode()} line longer than {MAX_LINE_BYTES} bytes, skipped")
            continue
        close = rest.rfind(b"}")
        if close < 0:
            problems.at(match.start(2), f"{name.decode()} line has no closing brace (truncated?), skipped")
            continue
        block = rest[:close]
        parsed = label_cache.get(block)
        if parsed is None:
            parsed = label_cache[block] = _parse_labels(block)
        if isinstance(parsed, str):
            problems.at(match.start(2), f"{name.decode()}: {parsed}, skipped")
            continue
        kind, key, namespace, pod, container, cpu = parsed
        if kind == _SKIP:
            if parsed is _UNKNOWN:
                unknown_series += 1
                unknown_block = unknown_block or block
            continue

        tail = rest[close + 1 :].split()
        try:
            if len(tail) == 1:
                value, ts_ms = float(tail[0]), None
            elif len(tail) == 2:
                value, ts_ms = float(tail[0]), int(tail[1])
                if not 0 <= ts_ms < _MAX_TS_MS:
                    raise ValueError
            else:
                raise ValueError
        except ValueError:
            problems.at(
                match.start(2), f"{name.decode()}: value or timestamp missing or unreadable in {rest[close:][:60]!r}"
            )
            continue
        if unterminated and match.end() == size:
            problems.at(match.start(2), f"{name.decode()}: the body ends inside this line (cut short?), skipped")
            continue

        cgroup = cgroups.get(key)
        if cgroup is None:
            cgroup = cgroups[key] = _Cgroup(key[0], kind, namespace, pod, container, len(cgroups))
        if ts_ms is not None and (cgroup.ts_ms is None or ts_ms > cgroup.ts_ms):
            cgroup.ts_ms = ts_ms
        if not _store(cgroup, code, value, cpu, problems, match.start(2)):
            problems.at(
                match.start(2), f"duplicate {_NAMES[code]} series for {namespace}/{pod}/{container}; kept the last"
            )
    return has_cfs_counters, unknown_series, unknown_block


_COUNTERS = frozenset({_PERIODS, _THROTTLED_PERIODS, _THROTTLED_SECONDS, _USAGE, _THREADS, _WAITING, _STALLED})


def _store(cgroup: _Cgroup, code: int, value: float, cpu: bytes, problems: _Problems, pos: int) -> bool:
    """Keep one sample's value on its cgroup (or drop it as impossible, noting why).

    Returns False when the cgroup already had that series: a duplicate, whose last value is kept.
    """
    if code <= _USAGE or (code >= _THREADS and code in _COUNTERS):
        # The comparison alone passes every sane value (NaN fails it) without the cost of a call per sample.
        if not 0.0 <= value <= MAX_SANE:
            try:
                check_counter(_NAMES[code], value)
            except BadCounter as exc:
                problems.at(pos, f"{cgroup.namespace}/{cgroup.pod}/{cgroup.container}: {exc}; value dropped")
                return True
    elif not math.isfinite(value):
        problems.at(
            pos, f"{cgroup.namespace}/{cgroup.pod}/{cgroup.container}: {_NAMES[code]} is {value}; value dropped"
        )
        return True

    first = True
    if code == _PERIODS:
        first = cgroup.periods_total is None
        cgroup.periods_total = int(value)
    elif code == _THROTTLED_PERIODS:
        first = cgroup.throttled_periods_total is None
        cgroup.throttled_periods_total = int(value)
    elif code == _THROTTLED_SECONDS:
        first = cgroup.throttled_seconds_total is None
        cgroup.throttled_seconds_total = value
    elif code == _USAGE:
        if not cpu or cpu == b"total":
            first = cgroup.cpu_usage_total is None
            cgroup.cpu_usage_total = value
        else:  # older cAdvisors: one series per CPU, summed at the end
            first = cpu not in cgroup.cpu_usage
            cgroup.cpu_usage[cpu] = value
    elif code == _THREADS:
        first = cgroup.threads is None
        cgroup.threads = int(value)
    elif code == _QUOTA:
        first = cgroup.quota_seen is False
        cgroup.quota_seen = True
        cgroup.quota_us = int(value) if value > 0 else None  # 0 (or -1 from raw v1) means no quota
    elif code == _PERIOD:
        first = cgroup.period_us is None
        cgroup.period_us = int(value) if value > 0 else None
    elif code == _SHARES:
        first = cgroup.shares is None
        cgroup.shares = int(value)
    elif code == _WAITING:
        first = cgroup.pressure_waiting_seconds_total is None
        cgroup.pressure_waiting_seconds_total = value
    elif code == _STALLED:
        first = cgroup.pressure_stalled_seconds_total is None
        cgroup.pressure_stalled_seconds_total = value
    else:
        first = cgroup.start_time_seconds is None
        cgroup.start_time_seconds = value
    return first


def _newest(candidates: list[_Cgroup]) -> _Cgroup:
    """The live one of several cgroups reporting one container: the latest start time, else the last seen."""
    return max(
        candidates,
        key=lambda c: (c.start_time_seconds is not None, c.start_time_seconds or 0.0, c.seen_order),
    )


def _readings(
    cgroups: dict[tuple[bytes, str, str, str], _Cgroup], node: str, default_ts: datetime, problems: _Problems
) -> tuple[list[CounterReading], list[CounterReading], dict[tuple[str, str, str], int]]:
    by_container: dict[tuple[str, str, str], list[_Cgroup]] = {}
    for cgroup in cgroups.values():
        by_container.setdefault((cgroup.namespace, cgroup.pod, cgroup.container), []).append(cgroup)

    readings: list[CounterReading] = []
    pod_readings: list[CounterReading] = []
    shares: dict[tuple[str, str, str], int] = {}
    for key in sorted(by_container):
        candidates = by_container[key]
        cgroup = candidates[0]
        if len(candidates) > 1:
            cgroup = _newest(candidates)
            problems.add(
                f"{'/'.join(key)}: {len(candidates)} cgroups report this container (cAdvisor keeps a dead one for "
                f"a while); kept the newest, {cgroup.id.decode('utf-8', 'replace') or '(no id)'}"
            )
        if cgroup.shares is not None:
            shares[key] = cgroup.shares
        if not cgroup.has_reading():
            continue
        reading = CounterReading(
            namespace=cgroup.namespace,
            pod=cgroup.pod,
            container=cgroup.container,
            ts=default_ts if cgroup.ts_ms is None else _EPOCH + timedelta(milliseconds=cgroup.ts_ms),
            periods_total=cgroup.periods_total,
            throttled_periods_total=cgroup.throttled_periods_total,
            throttled_seconds_total=cgroup.throttled_seconds_total,
            usage_seconds_total=cgroup.usage_seconds_total(),
            pressure_waiting_seconds_total=cgroup.pressure_waiting_seconds_total,
            pressure_stalled_seconds_total=cgroup.pressure_stalled_seconds_total,
            threads=cgroup.threads,
            period_us=cgroup.period_us,
            quota_us=cgroup.quota_us,
            node=node,
        )
        (pod_readings if cgroup.kind == _POD else readings).append(reading)
    return readings, pod_readings, shares
