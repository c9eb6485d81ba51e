"""The shared CSV writer and file name: what a spreadsheet user sees when opening the file, and what it is called."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime

import pytest

from apps.advisor.export import neutralise, recommendations_csv_filename, stream_csv


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


# --- the file name the page and the API give a recommendations CSV ----------------------------------------------------


def test_the_file_name_names_cluster_namespace_and_window():
    assert recommendations_csv_filename(cluster="demo", namespace="shop", window="24h") == (
        "cputune-demo-shop-24h-recommendations.csv"
    )
    assert recommendations_csv_filename(cluster="demo", window="1h") == "cputune-demo-1h-recommendations.csv"
    assert recommendations_csv_filename(window="7d") == "cputune-7d-recommendations.csv"


@pytest.mark.parametrize(
    "name",
    ["a\";filename*=UTF-8''evil.cmd;b=\"", "../../etc/passwd", "a\r\nSet-Cookie: x=1", "ns\\x", "é", "", "a b\tc"],
)
def test_only_safe_characters_of_a_name_reach_the_file_name(name):
    filename = recommendations_csv_filename(cluster="demo", namespace=name, window="1h")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", filename), filename
    assert filename.startswith("cputune-demo-") and filename.endswith("-1h-recommendations.csv")


def test_a_hostile_name_keeps_its_safe_letters_and_a_long_one_is_cut():
    assert recommendations_csv_filename(namespace="a\";filename*=UTF-8''evil.cmd;b=\"", window="1h") == (
        "cputune-a_filename_UTF-8_evil.cmd_b_-1h-recommendations.csv"
    )
    assert len(recommendations_csv_filename(cluster="c" * 253, namespace="n" * 253, window="1h")) < 255
