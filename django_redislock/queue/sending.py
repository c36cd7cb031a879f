"""One script call on a queue alias, for the scripts that are not a queue's own operations.

The workers registry, the periodic scheduler, a stock and the Django tasks results
each send scripts of their own on a queue alias: one call, ``(script, keys, args)``,
on the alias's blocking client (:func:`run_call`) or on its asyncio client for the
running loop (:func:`run_call_async`). The call goes through the client itself, so a
Cluster client's retries apply, and a connection error is raised as
:class:`~django_redislock.exceptions.ConnectionFailed` naming the setting. A queue's
own operations use :class:`~.calls.QueueCalls`' prepared calls instead.

Neither retries on its own: whether a resend is safe is the script's business (each
caller says so). A call cancelled at its ``await`` may or may not have run; the
connection it was read on is closed by redis-py, so a late reply is never read by the
next command.
"""

from __future__ import annotations

from typing import Any

from ..calls.node import Node
from ..calls.script import Call


def run_call(node: Node, call: Call) -> Any:
    """Run ``call`` on ``node``'s blocking client; its reply."""
    script, keys, args = call
    with node.errors():
        return node.script(script)(keys=keys, args=args)


async def run_call_async(node: Node, call: Call) -> Any:
    """The asyncio twin of :func:`run_call`."""
    script, keys, args = call
    client = node.async_client()
    with node.errors():
        return await node.script(script, client)(keys=keys, args=args)
