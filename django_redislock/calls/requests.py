"""Request ids: a fresh name for one script call that must be safe to resend.

A call whose reply is lost (a timeout, a dropped connection) leaves its caller
not knowing whether it ran, and redis-py resends it under the client's retry
policy. The scripts that change state and are not harmless to run twice take a
request id (or a request key built from one): they record their answer under
it, and a resend carrying the same id finds that answer and does nothing more.
See ``docs/calls.md`` ("Resend-safety") for the scripts that take one.

An id only has to differ from every other call's id while its record lives (a
minute, or a lease). It is a random part drawn once per process (and again in a
forked child, which would otherwise repeat its parent's ids) followed by a
counter, so a call costs no system call (about 0.1 µs, a third of
``os.urandom(9).hex()``). The random part is 64 bits: two processes draw the same one with a
chance of about one in 10^19 per pair.
"""

from __future__ import annotations

import itertools
import os

from .node import Keys

_base = os.urandom(8).hex()
_counter = itertools.count(1)


def _after_fork_in_child() -> None:
    global _base, _counter
    _base = os.urandom(8).hex()
    _counter = itertools.count(1)


os.register_at_fork(after_in_child=_after_fork_in_child)


def request_id() -> str:
    """A fresh id for one call that must be safe to resend (hex, 17 characters or more).

    Resending the *same* call must send the same id: draw it once per call, never
    per send.
    """
    return f"{_base}{next(_counter):x}"


def request_key(node: Keys, tag: str, *parts: str) -> str:
    """A fresh request key: ``<prefix>:{<tag>}:<parts>:req:<id>``.

    It shares ``{tag}`` with the keys of the object the call changes, so the
    script that records its answer there runs on one Cluster slot.
    """
    return node.key(tag, *parts, f"req:{request_id()}")
