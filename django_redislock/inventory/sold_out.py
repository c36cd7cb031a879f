"""What this process knows is sold out: refusals answered from memory, 0 Redis calls.

After a sale sells out, the crowd that keeps arriving (often 10-100x the stock) would
each cost a round trip. A take that the server answers "sold out" is remembered here
with the units it found, and further takes of that stock (for as many units or more)
are refused from memory until the stock can have changed:

* every script that brings units back (``restore``, ``set``, ``add``, ``clear``)
  publishes the stock's units key on the backend's channel (``<prefix>:stock-changes``,
  in the same script: no extra round trip), and a listener thread per backend and
  process forgets the stock when the message arrives;
* a process's own change forgets the stock at once, before the call returns;
* whatever happens to messages, an entry is trusted for at most :data:`MAX_AGE`
  seconds while the listener is subscribed (then one ``GET`` probe renews it), and for
  :data:`UNTRACKED_AGE` when it is not (its connection failed, or is still starting).

A sold-out answer is remembered as trusted only when the listener was subscribed
before the take was sent and no change arrived while it was in flight (the listener
counts changes: ``epoch``), so a restore that raced the refusal is never lost.
The worst-case staleness (a buyer refused while a unit was back) is the delivery
delay of the message, bounded by ``MAX_AGE``; see docs/seckill.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

logger = logging.getLogger("django_redislock.inventory")

#: Longest a sold-out answer is trusted while the listener is subscribed (seconds).
MAX_AGE = 1.0
#: Longest a sold-out answer is trusted without a subscribed listener (seconds).
UNTRACKED_AGE = 0.1
#: Most stocks remembered (then the memory starts over).
MAX_ITEMS = 10_000
#: How long the listener waits for a message before it looks whether it is still needed.
POLL = 1.0
#: A listener with nothing to watch for this long ends (the next sold-out starts one).
IDLE_EXIT = 60.0


def channel(backend: RedisQueueBackend) -> str:
    """The backend's stock-changes channel (PUBLISH reaches every node of a Cluster)."""
    return f"{backend.key_prefix}:stock-changes"


class Listener:
    """One backend's subscription in one process: forgets stocks as their changes arrive."""

    def __init__(self, memory: SoldOutMemory, backend: RedisQueueBackend) -> None:
        self.memory = memory
        self.backend = backend
        self.pid = os.getpid()
        #: changes received so far (read before a take is sent, compared after)
        self.epoch = 0
        self.subscribed = threading.Event()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, name="redislock-sold-out", daemon=True)

    def alive(self) -> bool:
        return not self.ended.is_set() and self.pid == os.getpid()

    def _run(self) -> None:
        pubsub: Any = None
        idle_since = time.monotonic()
        try:
            client: Any = self.backend.client
            pubsub = client.pubsub()
            pubsub.subscribe(channel(self.backend))
            while True:
                message = pubsub.get_message(timeout=POLL)
                if message is None:
                    if self.memory.watching(self):
                        idle_since = time.monotonic()
                    elif time.monotonic() - idle_since > IDLE_EXIT:
                        return
                elif message["type"] == "subscribe":
                    self.subscribed.set()
                elif message["type"] == "message":
                    self.memory.changed(self, message["data"])
        except Exception as exc:  # the connection failed: trust nothing it would have told
            logger.info("sold-out listener of %s ended: %s", self.backend.alias, exc)
        finally:
            self.ended.set()
            self.memory.forget_listener(self)
            if pubsub is not None:
                with contextlib.suppress(Exception):  # a broken connection: nothing more to do
                    pubsub.close()


class Ticket(NamedTuple):
    """What the memory looked like before a take was sent."""

    listener: Listener | None
    epoch: int


class Entry(NamedTuple):
    units: int
    at: float
    #: the listener whose subscription covered the whole take, or None (untracked)
    listener: Listener | None


class SoldOutMemory:
    """The process's sold-out stocks, by (backend, units key)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[tuple[int, str], Entry] = {}
        self.listeners: dict[int, Listener] = {}
        #: called with (backend, units key) for each change received (other caches of
        #: what a stock looks like, e.g. its number of buckets, forget it too)
        self.on_change: list[Callable[[Any, str], None]] = []

    def refuses(self, backend: RedisQueueBackend, key: str, qty: int) -> int | None:
        """The units left when a take of ``qty`` is known to be refused, else None."""
        entry = self.entries.get((id(backend), key))
        if entry is None or entry.units >= qty:
            return None
        listener = entry.listener
        tracked = listener is not None and listener.backend is backend and listener.alive()
        if time.monotonic() - entry.at < (MAX_AGE if tracked else UNTRACKED_AGE):
            return entry.units
        return None

    def known(self, backend: RedisQueueBackend, key: str) -> bool:
        """True when the stock was seen sold out (trusted or not: a take probes it first)."""
        return (id(backend), key) in self.entries

    def ticket(self, backend: RedisQueueBackend) -> Ticket:
        """Read before a take is sent; :meth:`remember` compares it with what came since."""
        listener = self.listeners.get(id(backend))
        if listener is None or not listener.alive() or not listener.subscribed.is_set():
            return Ticket(None, 0)
        return Ticket(listener, listener.epoch)

    def remember(self, backend: RedisQueueBackend, key: str, units: int, ticket: Ticket) -> None:
        """A take of this stock was refused sold out with ``units`` left."""
        listener = ticket.listener
        if listener is not None and (not listener.alive() or listener.epoch != ticket.epoch):
            listener = None  # a change arrived while the take was in flight: untracked
        with self.lock:
            if len(self.entries) >= MAX_ITEMS:
                self.entries.clear()
            self.entries[(id(backend), key)] = Entry(units, time.monotonic(), listener)
            self._listen(backend)

    def forget(self, backend: RedisQueueBackend, key: str) -> None:
        """The stock may be on sale: the next take asks Redis."""
        self.entries.pop((id(backend), key), None)

    def clear(self) -> None:
        """Forget every stock (as a process that never saw one sold out)."""
        self.entries.clear()

    def _listen(self, backend: RedisQueueBackend) -> None:
        listener = self.listeners.get(id(backend))
        if listener is not None and listener.alive() and listener.backend is backend:
            return
        listener = Listener(self, backend)
        self.listeners[id(backend)] = listener
        listener.thread.start()

    # -- the listener's side ------------------------------------------------------------------

    def changed(self, listener: Listener, key: Any) -> None:
        name = key.decode() if isinstance(key, bytes) else str(key)
        with self.lock:
            listener.epoch += 1
            self.entries.pop((id(listener.backend), name), None)
        for forget in self.on_change:
            forget(listener.backend, name)

    def watching(self, listener: Listener) -> bool:
        """True while some stock of the listener's backend is remembered."""
        wanted = id(listener.backend)
        return any(backend == wanted for backend, _ in list(self.entries))

    def forget_listener(self, listener: Listener) -> None:
        """A listener ended: its backend's entries lose their trust (they age out fast)."""
        with self.lock:
            if self.listeners.get(id(listener.backend)) is listener:
                del self.listeners[id(listener.backend)]
            for memo, entry in list(self.entries.items()):
                if entry.listener is listener:
                    self.entries[memo] = entry._replace(listener=None)


#: The process's memory (a forked child's listeners are not its own: see ``Listener.alive``).
memory = SoldOutMemory()
