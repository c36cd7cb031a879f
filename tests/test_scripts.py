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
    header = ack.split("\nlocal ", 1)[0]
    for name in ("queue_ack", "queue_pop"):
        assert header in scripts.source(name)
        assert scripts.source(name).count("local function ack(") == 1


def test_an_unknown_fragment_is_named_in_the_error() -> None:
    with pytest.raises(LookupError, match="'nope'"):
        scripts.fragment("nope")


@pytest.mark.parametrize("name", scripts.names())
def test_a_script_defines_only_the_fragment_code_it_uses(name: str) -> None:
    # every call runs the whole chunk, definitions included: one left unused costs each call
    text = scripts.source(name)
    code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
    for defined in re.findall(r"^local function (\w+)\(", code, re.MULTILINE):
        assert len(re.findall(rf"\b{defined}\b", code)) >= 2, defined
    for defined in re.findall(r"^local ([A-Z_]+)\s*=", code, re.MULTILINE):
        assert len(re.findall(rf"\b{defined}\b", code)) >= 2, defined


def test_the_enqueue_script_leaves_out_the_claim_side_of_its_fragments() -> None:
    text = scripts.source("queue_enqueue")
    assert "local function prio_set(" in text and "local function rate_count(" in text
    for unused in ("prio_due", "prio_claimable", "prio_forget", "rate_add", "RATE_RINGS"):
        assert unused not in text
