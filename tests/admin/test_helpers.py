"""The dashboard's small helpers: durations, counts, checkbox values, page cursors."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from django_redislock.admin.actions import parse_selected
from django_redislock.admin.common import duration, runtime
from django_redislock.admin.queues import requested_page
from django_redislock.admin.rows import TaskRow
from django_redislock.templatetags.redislock_admin import count


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.04, "0.0 s"),
        (3.25, "3.2 s"),
        (-4.5, "-4.5 s"),
        (42, "42 s"),
        (185, "3 min 5 s"),
        (7440, "2 h 4 min"),
        (3600, "1 h"),
        (266400, "3 d 2 h"),
    ],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0.0 ms"), (0.0004, "0.4 ms"), (0.04, "40 ms"), (0.5, "500 ms"), (3.25, "3.2 s")],
)
def test_runtime(seconds: float, text: str) -> None:
    """A run's runtime below a second is shown in ms: the recent runs said "0.0 s"."""
    assert runtime(seconds) == text


def test_count_filter() -> None:
    assert [count(1234567), count(0), count(None), count("x"), count(True)] == [
        "1,234,567", "0", "", "x", "True"
    ]  # fmt: skip


def test_checkbox_values_keep_colons_in_ids_and_drop_junk() -> None:
    values = ["12:a:b", "-5:neg", "x:bad", "7:", "nocolon", "9:<b>"]
    assert parse_selected(values) == [(12, "a:b"), (-5, "neg"), (9, "<b>")]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ("ready", "first", None)),
        ("?state=dead", ("dead", "first", None)),
        ("?state=bogus", ("ready", "first", None)),
        ("?state=delayed&last=1", ("delayed", "last", None)),
        ("?after=15&id=a%2Fb", ("ready", "after", (15, "a/b"))),
        ("?before=15&id=x", ("ready", "before", (15, "x"))),
        ("?after=abc&id=x", ("ready", "first", None)),
        ("?after=15", ("ready", "first", None)),
    ],
)
def test_requested_page(query: str, expected: tuple[str, str, object]) -> None:
    assert requested_page(RequestFactory().get("/" + query)) == expected


def test_a_payload_too_deep_for_json_is_shown_as_stored() -> None:
    deep = "[" * 5000 + "]" * 5000  # json.loads raises RecursionError, not ValueError
    row = TaskRow("deep", "dead", 0, 1, deep, len(deep), "", 0)
    assert row.pretty() == deep
