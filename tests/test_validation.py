"""The one family of value checks: a setting and an argument are held to the same rule.

A settings error puts the setting's name in front of the rule's phrase, an argument
error the argument's name; both name what they check, and an argument error is a
``ValueError`` raised before anything reaches Redis.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from django_redislock import conf, validation
from django_redislock.decorators import distributed_lock
from django_redislock.exceptions import InvalidArgument
from django_redislock.locking import keys
from django_redislock.queue.pools import check_pool


@pytest.mark.parametrize(
    ("value", "allow_zero", "phrase"),
    [
        (0, False, "must be > 0 and <= 604800 seconds, got 0"),
        (-1, True, "must be >= 0 and <= 604800 seconds, got -1"),
        (604801, True, "must be >= 0 and <= 604800 seconds, got 604801"),
        (math.nan, True, "must be >= 0 and <= 604800 seconds, got nan"),
        (math.inf, False, "must be > 0 and <= 604800 seconds, got inf"),
        ("30", False, "must be a number of seconds, not str"),
        (True, True, "must be a number of seconds, not bool"),
    ],
)
def test_seconds_setting_and_argument_share_one_rule(
    value: Any, allow_zero: bool, phrase: str
) -> None:
    assert validation.seconds_problem(value, allow_zero=allow_zero) == phrase
    schema = conf.LOCK_OPTIONS["DEFAULT_TIMEOUT" if allow_zero else "DEFAULT_TTL"]
    schema_check = schema.check
    assert schema_check is (
        validation.non_negative_seconds if allow_zero else validation.positive_seconds
    )
    assert schema_check(value) == phrase
    assert conf.option_value_errors({"X": value}, {"X": conf.Option(1, schema_check, "")}) == [
        f"OPTIONS['X'] {phrase}"
    ]
    with pytest.raises(InvalidArgument) as raised:
        validation.check_seconds(value, "lease", allow_zero=allow_zero)
    assert str(raised.value) == f"lease {phrase}"
    assert isinstance(raised.value, ValueError)


def test_seconds_in_range_come_back_as_float() -> None:
    assert validation.check_seconds(0, "delay", allow_zero=True) == 0.0
    assert validation.check_seconds(604800, "ttl", allow_zero=False) == 604800.0
    assert validation.positive_seconds(0.5) is None
    assert conf.MAX_SECONDS == validation.MAX_SECONDS


def test_the_lock_layer_uses_the_same_seconds_rule() -> None:
    """Its ``check_seconds`` refuses zero by default (a ttl) and accepts it when told."""
    with pytest.raises(InvalidArgument, match=r"^ttl must be > 0 and <= 604800 seconds, got 0$"):
        keys.check_seconds(0, "ttl")
    with pytest.raises(InvalidArgument, match=r"^timeout must be a number of seconds, not str$"):
        keys.check_seconds("5", "timeout", allow_zero=True)
    assert keys.check_seconds(0, "timeout", allow_zero=True) == 0.0
    assert keys.check_name is validation.check_lock_name
    assert keys.MAX_NAME_LENGTH == validation.MAX_LOCK_NAME_LENGTH


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: validation.check_name("a{b}"), "name must be 1-512 characters without"),
        (lambda: validation.check_name(7, "queue"), "queue must be a string, got int"),
        (lambda: validation.check_item(""), "item must be 1-200 characters without"),
        (lambda: validation.check_item(b"x"), "item must be a string, got bytes"),
        (lambda: validation.check_id("x" * 513), "id must be 1-512 characters, got"),
        (lambda: validation.check_count(0, allow_zero=False), "count must be an integer 1-5000"),
        (
            lambda: validation.check_units(-1, "units", allow_zero=True),
            "units must be an integer 0-",
        ),
        (lambda: validation.check_bool(1, "store_result"), "store_result must be True or False"),
        (lambda: check_pool("thread", 0), "concurrency must be a positive integer, got 0"),
        (lambda: distributed_lock("x", blocking=1), "blocking must be True or False, got 1"),  # type: ignore[arg-type]
    ],
)
def test_argument_errors_name_the_argument(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        call()
    assert str(raised.value).startswith(message), str(raised.value)


def test_checks_return_the_value_itself() -> None:
    class Id(str):
        pass

    given = Id("abc")
    assert validation.check_id(given) is given
    assert validation.check_name("orders") == "orders"
    assert validation.check_int(5, "n", 1, 5) == 5
    assert validation.integer_problem(0, 1) == "must be a positive integer, got 0"
    assert validation.integer_problem(-1, 0) == "must be an integer >= 0, got -1"
    assert validation.text_problem("a{", 10, braces=True) is None


def test_a_schedule_names_its_bad_task_or_queue() -> None:
    from datetime import timedelta

    from django_redislock.periodic.schedules import schedule

    every = timedelta(minutes=1)
    with pytest.raises(InvalidArgument, match=r"^task must be 1-512 characters without"):
        schedule("nightly", "app.{x}", every=every)
    with pytest.raises(InvalidArgument, match=r"^queue must be a string, got int"):
        schedule("nightly", "app.tasks.x", every=every, queue=7)  # type: ignore[arg-type]
