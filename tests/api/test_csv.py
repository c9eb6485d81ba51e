"""The shared CSV writer: what a spreadsheet user sees when opening the file."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from apps.api.csv import neutralise, stream_csv


def parse(chunks) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(chunks).decode())))


@pytest.mark.parametrize(
    "text",
    [
        '=HYPERLINK("http://evil.example","click")',
        "+1+2",
        "-2+3",
        "@SUM(A1:A2)",
        "\t=1+1",
        "\r=1+1",
        "=cmd|' /C calc'!A0",
    ],
)
def test_text_that_a_spreadsheet_would_run_as_a_formula_gets_a_leading_quote(text):
    assert neutralise(text) == "'" + text
    [_, row] = parse(stream_csv([{"summary": text}], ["summary"]))
    assert row == ["'" + text]


def test_ordinary_text_is_left_alone():
    assert neutralise("Raise the CPU limit from 500m to 600m") == "Raise the CPU limit from 500m to 600m"
    assert neutralise("a=b") == "a=b"  # only a leading trigger matters


def test_numbers_stay_numbers_even_when_negative():
    assert neutralise(-0.5) == -0.5
    assert neutralise(-3) == -3
    assert parse(stream_csv([{"x": -0.5, "y": -3, "z": 0}], ["x", "y", "z"]))[1] == ["-0.5", "-3", "0"]


def test_none_is_an_empty_cell_never_zero():
    [header, row] = parse(stream_csv([{"a": None, "b": 0, "c": 0.0}], ["a", "b", "c"]))
    assert header == ["a", "b", "c"]
    assert row == ["", "0", "0.0"]


def test_a_non_finite_float_is_an_empty_cell():
    assert neutralise(float("nan")) == ""
    assert neutralise(float("-inf")) == ""


def test_dates_are_iso_8601_and_lists_json():
    when = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    assert neutralise(when) == "2025-05-01T12:00:00+00:00"
    assert neutralise(["raise_limit", "cut_threads"]) == '["raise_limit","cut_threads"]'


def test_columns_follow_the_field_order_and_missing_keys_are_empty():
    rows: list[dict[str, object]] = [{"b": 2, "a": 1, "ignored": "x"}, {"a": 3}]
    assert parse(stream_csv(rows, ["a", "b"])) == [["a", "b"], ["1", "2"], ["3", ""]]


def test_commas_quotes_and_newlines_survive_a_round_trip():
    text = 'threads, "many"\nsecond line'
    assert parse(stream_csv([{"s": text}], ["s"]))[1] == [text]


def test_rows_are_read_lazily_one_at_a_time():
    consumed = []

    def rows():
        for i in range(3):
            consumed.append(i)
            yield {"n": i}

    chunks = stream_csv(rows(), ["n"])
    assert next(chunks) == b"n\r\n" and consumed == []
    assert next(chunks) == b"0\r\n" and consumed == [0]
