"""``django_redislock.locks`` stays the handler; the old lock classes path forwards."""

from __future__ import annotations

import pytest

import django_redislock
from django_redislock import locking
from django_redislock.handlers import LockHandler


def test_the_package_attribute_is_the_handler() -> None:
    assert isinstance(django_redislock.locks, LockHandler)


@pytest.mark.parametrize("name", locking.__all__)
def test_old_path_warns_and_forwards_the_same_object(name: str) -> None:
    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning, match=f"django_redislock.locking.{name}"):
        exec(f"from django_redislock.locks import {name} as value", {}, namespace)
    assert namespace["value"] is getattr(locking, name)


def test_old_path_forwards_submodules() -> None:
    from django_redislock.locking import mutex

    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning):  # the statement itself (mypy cannot see the old path)
        exec("from django_redislock.locks import mutex as old", {}, namespace)
    assert namespace["old"] is mutex
