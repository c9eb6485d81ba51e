"""CSV for spreadsheets, shared by the API and the dashboard's CSV pages: streamed, formula-safe, None as an empty
cell, and one file-name scheme. Pure Python (no Django), below both so neither imports the other.

A cell that a spreadsheet would read as a formula (text starting with `=`, `+`, `-`, `@`, a tab or a carriage return,
the OWASP "CSV injection" list) gets a leading `'`, which spreadsheets show as plain text. Only text is touched: an int
or float stays a number, so `-0.5` from a float is written as `-0.5`, while the text `-0.5` would be neutralised.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import Any

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> str | int | float:
    """The cell for one value: "" for None (never 0) and for a non-finite float; numbers as they are; dates in ISO 8601;
    lists and dicts as JSON; text with a leading `'` when it starts with a formula trigger."""
    if value is None:
        return ""
    if isinstance(value, bool):  # before int: bool is an int subclass, but a spreadsheet should see a word
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ""
    if isinstance(value, datetime | date):
        text = value.isoformat()
    elif isinstance(value, list | tuple | dict):
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    else:
        text = str(value)
    if text.startswith(FORMULA_TRIGGERS):
        return "'" + text
    return text


class _Line:
    """A write-only file for csv.writer that hands back what was written (one row at a time)."""

    def write(self, text: str) -> str:
        return text


def stream_csv(rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> Iterator[bytes]:
    """UTF-8 CSV (RFC 4180, CRLF line ends): a header of `fields` in order, then one line per row, produced lazily.

    A field missing from a row is an empty cell; keys not in `fields` are left out. Rows are read one at a time, so a
    queryset iterator streams without being held in memory.
    """
    writer = csv.writer(_Line())
    yield writer.writerow(list(fields)).encode()
    for row in rows:
        yield writer.writerow([neutralise(row.get(field)) for field in fields]).encode()


_UNSAFE_IN_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_PART_MAX_CHARS = 80  # Kubernetes names reach 253 characters; file systems stop at 255 bytes


def _file_name_part(name: str) -> str:
    return _UNSAFE_IN_FILE_NAME.sub("_", name)[:_NAME_PART_MAX_CHARS] or "_"


def changes_csv_filename(*, cluster: str, namespace: str) -> str:
    """`cputune-<cluster>-<namespace>-changes.csv`, names reduced as for the recommendations file."""
    return "-".join(["cputune", _file_name_part(cluster), _file_name_part(namespace), "changes"]) + ".csv"


def recommendations_csv_filename(*, window: str, cluster: str | None = None, namespace: str | None = None) -> str:
    """`cputune-<cluster>-<namespace>-<window>-recommendations.csv`, leaving out the names not given.

    Only `[A-Za-z0-9._-]` from the names reach it (any other run of characters becomes `_`), so a cluster or
    namespace name cannot add quotes, parameters or path separators to a Content-Disposition header or the saved file.
    """
    parts = [_file_name_part(name) for name in (cluster, namespace, window) if name]
    return "-".join(["cputune", *parts, "recommendations"]) + ".csv"
