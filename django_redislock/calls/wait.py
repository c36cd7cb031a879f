"""The call layer's blocking wait: ``BLPOP`` on lists of one slot with a client-side deadline.

Three parts of the app block on Redis: a lock waiter until a release pushes the
lock's signal list, an idle worker until an enqueue pushes a queue's signal
list, and a task's result waiter until the worker's store pushes the result's
``done`` list. All go through :func:`wait_on` (or :func:`wait_on_async`). The
first two take what was pushed (``BLPOP``: one wake-up per push); the result
waiter passes ``keep=True`` and leaves it (``BLMOVE key key RIGHT LEFT`` rotates
the element onto the same list), so every waiter of one result wakes at once.

Why the deadline is the client's: ``BLPOP`` wakes as soon as a push arrives, but
Redis checks blocked clients' own timeouts only on its clock tick (every 100 ms
at the default ``hz 10``), which would end a wait up to 100 ms late. So the
``BLPOP`` goes out with a server timeout :data:`SERVER_SLACK` longer than the
wait, and the reply is awaited until the caller's deadline: ``seconds`` from the
call, so the time a first call spends getting its connection ready (a Cluster
client loading its slot map, a new connection's handshake) is part of the wait,
not added to it. If nothing came, the
connection (still blocked on the server) is closed instead of going back to its
pool, so no later command ever reads that ``BLPOP``'s late reply. That costs a
reconnect, but only on the path where nothing was pushed in time.

What a wait leaves behind:

* **Deadline passed**: nothing popped; the connection is closed, the server
  drops the blocked client with it; a later push stays in the list.
* **Cancelled** (asyncio) or **interrupted** (a signal handler raising, as the
  worker's stop does) at any point after the ``BLPOP`` was written: the
  connection is closed before the exception goes on, so the same holds. A push
  that raced the interruption may have been popped and is then lost; a signal
  list only wakes waiters, and every caller checks the state again after a wait.
* **Connection error** (a cut, a server restart): the connection is closed and
  the node's :meth:`~django_redislock.calls.node.Node.errors` raises
  ``ConnectionFailed`` naming the setting. It is not resent: the lost reply may
  have carried a popped element, and a resend would then block to the deadline
  for a push that already happened. The caller's loop goes on (the lock's next
  attempt, the worker's outage handling).
* **Redirected** (``MOVED``/``ASK`` while a Cluster reshards): returns None, as
  if nothing came; the caller's next script call goes through the Cluster
  client, which follows the redirection and refreshes its slot map.
* **Process death**: the server drops the blocked client with its socket.

Clients that are not redis-py's own (``OPTIONS['CLIENT_CLASS']``, e.g.
fakeredis) get a plain ``client.blpop``: their connections are not redis-py's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio

from ..exceptions import InvalidArgument
from .node import Node

#: Extra server-side timeout beyond the client-side deadline (seconds): the server ends a
#: forgotten ``BLPOP`` by itself even if closing the connection did not reach it.
SERVER_SLACK = 1.0

#: What a wait returns when something was pushed: the list's key and the popped element.
Popped = tuple[bytes, bytes]


def _server_timeout(seconds: float) -> str:
    return f"{seconds + SERVER_SLACK:.3f}"


def _command(keys: Sequence[str], seconds: float, keep: bool) -> tuple[str, ...]:
    """The blocking command: ``BLPOP`` of the keys, or with ``keep`` a ``BLMOVE`` onto itself."""
    if keep:
        return ("BLMOVE", keys[0], keys[0], "RIGHT", "LEFT", _server_timeout(seconds))
    return ("BLPOP", *keys, _server_timeout(seconds))


#: The shortest wait sent (seconds): a wait for nothing still sends one ``BLPOP``.
MIN_WAIT = 0.001


def _left(deadline: float) -> float:
    """What is left of the caller's wait once its connection is ready (at least MIN_WAIT).

    The deadline is taken when the caller calls, so what a first call spends getting
    ready (a Cluster client loading its slot map, a new connection's handshake) comes
    out of the wait, not on top of it.
    """
    return max(deadline - time.monotonic(), MIN_WAIT)


def _check(node: Node, client: Any, keys: Sequence[str], keep: bool) -> None:
    if not keys:
        raise InvalidArgument("a wait needs at least one key")
    if keep and len(keys) > 1:
        raise InvalidArgument(f"a wait with keep=True takes one key, got {list(keys)!r}")
    if node.is_cluster and len(keys) > 1 and len({client.keyslot(key) for key in keys}) > 1:
        raise InvalidArgument(f"a wait takes keys of one Cluster slot, got {list(keys)!r}")


def _popped(reply: Any, keys: Sequence[str], keep: bool) -> Popped | None:
    """The wait's reply as ``(key, element)``, or None: ``BLPOP`` names the key, ``BLMOVE`` not."""
    if reply is None:
        return None
    if keep:
        return (keys[0].encode(), reply)
    return (reply[0], reply[1])


def _redirected(exc: redis.ResponseError) -> bool:
    return str(exc).startswith(("MOVED", "ASK"))


def wait_on(
    node: Node, keys: Sequence[str], seconds: float, *, keep: bool = False
) -> Popped | None:
    """Block until one of ``keys`` is pushed (popping one element) or ``seconds`` pass.

    Returns ``(key, element)``, or None when the deadline passed (or a Cluster
    redirected the wait). ``keys`` must share one Cluster slot. With ``keep``
    (one key) the element stays in the list, rotated to its head. Connection
    errors are raised as the node maps them (``ConnectionFailed``); see the
    module's docstring for what each outcome leaves behind.
    """
    deadline = time.monotonic() + seconds
    client = node.client
    _check(node, client, keys, keep)
    seconds = max(seconds, MIN_WAIT)
    with node.errors():
        if node.options["CLIENT_CLASS"] is not None:
            return _popped(_plain_wait(client, keys, seconds, keep), keys, keep)
        pool = _pool_of(client, keys)
        conn = pool.get_connection()
        try:
            seconds = _left(deadline)
            conn.send_command(*_command(keys, seconds, keep))
            if not conn.can_read(timeout=seconds):
                conn.disconnect()  # still blocked on the server: never reused
                return None
            return _popped(conn.read_response(), keys, keep)
        except redis.ResponseError as exc:
            if _redirected(exc):
                return None
            raise
        except BaseException:
            conn.disconnect()  # an interruption or a broken socket: a reply may still be due
            raise
        finally:
            pool.release(conn)


def _pool_of(client: Any, keys: Sequence[str]) -> Any:
    """The connection pool of the node that serves ``keys`` (redis-py's API is untyped)."""
    if isinstance(client, redis.RedisCluster):
        cluster: Any = client
        return cluster.get_redis_connection(cluster.get_node_from_key(keys[0])).connection_pool
    return client.connection_pool


def wait_then(
    node: Node, keys: Sequence[str], seconds: float, then: Sequence[Any]
) -> tuple[Popped | None, Any] | None:
    """:func:`wait_on` with the command ``then`` sent behind the ``BLPOP``: one round trip.

    Both go out in one write on one connection (``then``'s keys must share the wait's
    Cluster slot). Redis reads a blocked client's next command only once its ``BLPOP``
    has returned, so ``then`` runs right after the wake-up (or the server's own timeout),
    and its reply follows the ``BLPOP``'s: an idle worker's claim rides on its wait.

    Returns ``(popped or None, then's reply)`` when both replies came (an error reply of
    ``then`` as the ``ResponseError`` redis-py makes of it, not raised: ``NOSCRIPT`` says
    it did not run), or None when the caller's deadline passed first (or a Cluster
    redirected the wait). Whenever the replies were not both read (None, an interruption,
    a connection error) the connection is closed, and whether ``then`` ran is unknown:
    almost never after a deadline (the ``BLPOP`` was still blocked, and the server drops
    it with the client), but a push that raced the end of the wait may have run it. Only
    a call that is safe to resend (a request key) belongs in ``then``. Clients that are
    not redis-py's own (``OPTIONS['CLIENT_CLASS']``) cannot be used.
    """
    deadline = time.monotonic() + seconds
    client = node.client
    _check(node, client, keys, False)
    if node.options["CLIENT_CLASS"] is not None:
        raise InvalidArgument("wait_then needs redis-py's own client, not OPTIONS['CLIENT_CLASS']")
    with node.errors():
        pool = _pool_of(client, keys)
        conn = pool.get_connection()
        try:
            seconds = _left(deadline)
            conn.send_packed_command(conn.pack_commands([_command(keys, seconds, False), then]))
            if not conn.can_read(timeout=seconds):
                conn.disconnect()  # still blocked on the server: never reused
                return None
            try:
                popped = _popped(conn.read_response(), keys, False)
            except redis.ResponseError as exc:
                conn.disconnect()  # then's reply is still due
                if _redirected(exc):
                    return None
                raise
            try:
                return popped, conn.read_response()
            except redis.ResponseError as exc:
                return popped, exc  # both replies read: the connection goes back as it is
        except BaseException:
            conn.disconnect()  # an interruption or a broken socket: a reply may still be due
            raise
        finally:
            pool.release(conn)


def _plain_wait(client: Any, keys: Sequence[str], seconds: float, keep: bool) -> Any:
    """The wait through a client's own command method (a ``CLIENT_CLASS`` such as fakeredis)."""
    if keep:
        return client.blmove(keys[0], keys[0], seconds, "RIGHT", "LEFT")
    return client.blpop(list(keys), timeout=seconds)


async def wait_on_async(
    node: Node, keys: Sequence[str], seconds: float, *, keep: bool = False
) -> Popped | None:
    """The asyncio twin of :func:`wait_on`, on the node's client for the running loop.

    Cancellation-safe: cancelled at any ``await``, the connection is closed before
    the cancellation goes on (the close itself does not wait), so it never goes
    back to the pool with a ``BLPOP`` in flight. A cancellation that something below
    swallowed (the wait then returns as if it ended) is raised here: see
    :func:`raise_swallowed_cancel`.
    """
    task = asyncio.current_task()
    before = cancels(task)
    try:
        return await _wait_on_async(node, keys, seconds, keep)
    finally:
        raise_swallowed_cancel(task, before)


def cancels(task: asyncio.Task[Any] | None) -> int:
    """How many cancellations of ``task`` are pending (0 before Python 3.11: not counted)."""
    cancelling = getattr(task, "cancelling", None)
    return int(cancelling()) if cancelling is not None else 0


def raise_swallowed_cancel(task: asyncio.Task[Any] | None, before: int) -> None:
    """Raise ``CancelledError`` if ``task`` was cancelled during a wait that then returned.

    Seen on Python 3.11 with redis-py 8.1: a ``cancel()`` that lands while a command's
    reply is awaited can be lost inside redis-py's asyncio ``execute_command``, which then
    returns the reply; a lock waiter cancelled so went on waiting and could be granted a
    hold nobody owned any more. The task's pending-cancellation count still says it was
    cancelled, so the cancellation goes on from the caller's guard (a lock's script call,
    a wait). Raising from ``finally`` keeps a ``CancelledError`` already on its way as it
    is (the count is the same one).
    """
    if task is not None and cancels(task) > before:
        raise asyncio.CancelledError


async def _wait_on_async(
    node: Node, keys: Sequence[str], seconds: float, keep: bool
) -> Popped | None:
    deadline = time.monotonic() + seconds
    client = node.async_client()
    _check(node, client, keys, keep)
    seconds = max(seconds, MIN_WAIT)
    with node.errors():
        if node.options["CLIENT_CLASS"] is not None:
            return _popped(await _plain_wait(client, keys, seconds, keep), keys, keep)
        if isinstance(client, redis.asyncio.RedisCluster):
            await client.initialize()  # loads the slot map if no command was sent yet
            owner = client.get_node_from_key(keys[0])
            if owner is None:
                raise redis.exceptions.SlotNotCoveredError(f"no node serves {keys[0]!r}")
            conn = owner.acquire_connection()
            try:
                return await _wait(conn, keys, deadline, keep)
            finally:
                _give_back(owner, conn)
        async_pool: Any = client.connection_pool
        conn = await async_pool.get_connection()
        try:
            return await _wait(conn, keys, deadline, keep)
        finally:
            await async_pool.release(conn)


def _give_back(owner: Any, conn: Any) -> None:
    """Return ``conn`` to its Cluster node's free list (redis-py 5 has no ``release``)."""
    release = getattr(owner, "release", None)
    if release is not None:
        release(conn)
    else:
        owner._free.append(conn)


async def _wait(conn: Any, keys: Sequence[str], deadline: float, keep: bool) -> Popped | None:
    try:
        if not getattr(conn, "is_connected", True):
            await conn.connect()
        seconds = _left(deadline)
        await conn.send_command(*_command(keys, seconds, keep))
        reply = await asyncio.wait_for(conn.read_response(), timeout=seconds)
        return _popped(reply, keys, keep)
    except asyncio.TimeoutError:
        # still blocked on the server: closed, never reused. An asyncio transport closes
        # its socket on the loop's next turn (redis-py already asked it to, cancelling
        # the read): yield that turn, so the server has dropped the BLPOP before the
        # caller goes on, and a push made right after the wait returns stays in the list.
        await conn.disconnect(nowait=True)
        await asyncio.sleep(0)
        return None
    except redis.ResponseError as exc:
        if _redirected(exc):
            return None
        raise
    except BaseException:
        # nowait: the socket is closed before the first suspension, so a second
        # cancellation cannot return the connection to the pool still blocked
        await conn.disconnect(nowait=True)
        raise
