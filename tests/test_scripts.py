"""The Lua script files: their header comments and the shared-fragment includes."""

from __future__ import annotations

import re

import pytest

from django_redislock import scripts


@pytest.mark.parametrize("name", scripts.names())
def test_every_script_documents_its_keys_arguments_and_returns(name: str) -> None:
    text = scripts.source(name)
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    assert "-- include:" not in text  # every include was expanded
    if "KEYS[" in text.replace(header, ""):
        assert "KEYS[" in header
    if "ARGV[" in text.replace(header, ""):
        assert "ARGV[" in header
    assert re.search(r"^-- returns", header, re.MULTILINE)


def test_an_include_is_replaced_by_its_fragment() -> None:
    ack = scripts.fragment("claims")
    assert ack.startswith("-- Fragment:")
    for name in ("queue_ack", "queue_pop"):
        assert ack in scripts.source(name)
        assert scripts.source(name).count("local function ack(") == 1


def test_an_unknown_fragment_is_named_in_the_error() -> None:
    with pytest.raises(LookupError, match="'nope'"):
        scripts.fragment("nope")
