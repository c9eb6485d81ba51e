"""Bulk SQL helpers every app's writers use: COPY into a table, refresh the planner's statistics, cut lists into
chunks. They know no app's tables, so they are importable from every layer (as apps/words.py is)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from django.db import connection

_T = TypeVar("_T")


def copy_supported() -> bool:
    return connection.vendor == "postgresql"


def copy_rows(cursor: Any, table: str, columns: Iterable[str], rows: Iterable[Sequence[Any]]) -> None:
    """PostgreSQL: COPY `rows` (tuples in `columns` order) into `table` through a Django cursor — how every bulk
    write reaches the database (temporary load tables, then one statement)."""
    with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def analyze_tables(*tables: str) -> None:
    """PostgreSQL: refresh the planner's statistics of tables that just changed a lot.

    Autovacuum may be off or minutes behind (it was off on the machines cputune is tested on). Without statistics
    the planner took a cluster of thousands of pods for a handful and ran ingest's container lookup as a nested loop
    over every container for every reading. ANALYZE samples at most 30,000 rows per table, well under a second even
    at 150,000 pods.
    """
    if connection.vendor != "postgresql" or not tables:
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(tables)}")


def chunks(items: list[_T], size: int) -> Iterable[list[_T]]:
    """`items` in consecutive lists of at most `size`."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
