"""Blocking until a lock's signal list is pushed, or a client-side deadline passes.

A release pushes the lock's signal list when someone waits, so a waiter blocks
there for at most the holder's remaining time (or its own timeout) and then
tries again. The wait is the call layer's blocking form
(:func:`django_redislock.calls.wait.wait_on`): the deadline is kept on the
client, so an *expiry* is noticed on time rather than on the server's next
clock tick, and a connection whose ``BLPOP`` outlived its deadline, or whose
wait was cancelled, is closed instead of being reused.
"""

from __future__ import annotations

from ..calls.node import Node
from ..calls.wait import Popped, wait_on, wait_on_async


def wait_for_signal(backend: Node, key: str, seconds: float) -> Popped | None:
    """Block until ``key`` is pushed (consuming one element) or ``seconds`` pass.

    Returns what was popped (the element tells a release's wake-up from a passed-on
    one, see lock_rw_write.lua), or None.
    """
    return wait_on(backend, (key,), seconds)


async def wait_for_signal_async(backend: Node, key: str, seconds: float) -> Popped | None:
    """The asyncio twin of :func:`wait_for_signal`."""
    return await wait_on_async(backend, (key,), seconds)
