"""How tasks are sent to the queue: validated and serialized, then one enqueue script call.

The enqueue senders of :class:`~.calls.QueueCalls` (through it, of
:class:`~django_redislock.queue.Queue`), kept apart from the other operations' builders
because they are the producer's hot path: each keeps its prepared call per client
(:class:`~django_redislock.calls.script.Prepared`) and registers the queue name once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..calls.direct import DirectSender
from ..calls.script import NoScriptError, Prepared, script
from ..connections import ROUTED_ERRORS
from ..exceptions import InvalidArgument
from ..validation import check_count, check_id, check_seconds
from .arguments import parse_codes, parse_flags
from .records import Call, Entry, micros
from .serializers import Serializer

if TYPE_CHECKING:
    from ..backends.redis import RedisQueueBackend

R = TypeVar("R")


class EnqueueMixin:
    """The enqueue senders: the general script, ``delay()``'s own, ``unique_for``'s."""

    backend: RedisQueueBackend
    name: str
    keys: list[str]
    script_keys: list[str]
    rates_key: str
    enqueued_key: str
    unique_key: str
    serializer: Serializer
    #: (client, the prepared enqueue call, its DirectSender or None) for send_entries
    _enqueue_head: tuple[Any, Prepared, DirectSender | None] | None
    #: (client, the prepared call, its DirectSender, the request's prefix) for send_one
    _one_head: tuple[Any, Prepared, DirectSender | None, bytes | None] | None

    if TYPE_CHECKING:  # provided by QueueCalls

        def _run(self, call: Call[R]) -> R: ...

        def request_key(self) -> str: ...

    def send_entries(self, args: list[Any]) -> list[bool]:
        """Run the enqueue script with ``args`` as ARGV (replace flag, then id/delay/data triples).

        The hot path of every blocking enqueue (a replacing one goes through
        :meth:`_run` with a request key instead, so a resend is harmless). Per
        client (first call, a forked child, a settings reset) the call is prepared once
        (:class:`~django_redislock.calls.script.Prepared`: the EVALSHA head packed once,
        for a :class:`~django_redislock.calls.direct.DirectSender` where the client allows one),
        and the queue name is registered
        (:meth:`~django_redislock.backends.redis.RedisQueueBackend.register_queue`)
        then, or again after it was forgotten, rather than checked on every call.
        """
        backend = self.backend
        # replacing (the flag's first character) is not the hot path: a request key makes a
        # resend harmless
        if args[0][:1] == "1":
            backend.register_queue(self.name)
            extra = (self.rates_key, self.request_key())
            return self._run(Call("queue_enqueue", args, parse_flags, extra))
        client = backend.client
        hot = self._enqueue_head
        if hot is None or hot[0] is not client or self.name not in backend.registered:
            backend.register_queue(self.name)
            keys = [*self.script_keys, self.rates_key]
            direct = bool(backend.options.get("DIRECT_SENDER", True))
            prepared = script("queue_enqueue").prepare(client, keys, direct)
            hot = self._enqueue_head = (client, prepared, prepared.sender)
        try:  # a plain try, not backend.errors(), as in _run
            reply = hot[1](args)
        except ROUTED_ERRORS:  # node errors, error replies: errors() sorts them
            with backend.errors():
                raise
        return parse_flags(reply)

    def send_one(self, id: str, data: bytes) -> int:
        """Queue one task due now at level 0, keeping a queued copy: what ``delay()`` sends.

        :meth:`send_entries` with the ARGV ``["0", id, 0, data]`` would do the same; this
        sends ``queue_enqueue_one.lua``, that script's one-task path with the six keys it
        uses rather than twelve, and packs the request in one step from a prefix built
        once where the direct sender writes strict UTF-8 (redis-py's default encoding).
        Returns 1 queued, 0 a copy with ``id`` was kept. An id with a payload field that is
        in neither zset (an orphan field, a dead task) is sent through ``queue_enqueue``,
        which repairs or revives it: the first script wrote nothing then.
        """
        backend = self.backend
        client = backend.client
        hot = self._one_head
        if hot is None or hot[0] is not client or self.name not in backend.registered:
            hot = self._one_head = self._prepare_one(client)
        try:  # a plain try, not backend.errors(), as in _run
            sender, prefix = hot[2], hot[3]
            if sender is None or prefix is None:
                reply = hot[1]([id, data])
            else:
                raw = id.encode()
                request = b"%b$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
                    prefix,
                    len(raw),
                    raw,
                    len(data),
                    data,
                )
                try:
                    reply = sender.send(request)
                except NoScriptError:  # nothing ran: load the script, send it again
                    reply = hot[1].reloaded([id, data])
        except ROUTED_ERRORS:  # node errors, error replies: errors() sorts them
            with backend.errors():
                raise
        code = int(reply)
        if code < 0:
            return int(self.send_entries(["0", id, 0, data])[0])
        return code

    def _prepare_one(self, client: Any) -> tuple[Any, Prepared, DirectSender | None, bytes | None]:
        """Register the queue name, and prepare :meth:`send_one`'s call for ``client``."""
        backend = self.backend
        backend.register_queue(self.name)
        pending, inflight, _, payload, _, _, signal = self.keys
        keys = [pending, inflight, payload, signal, self.enqueued_key, self.rates_key]
        direct = bool(backend.options.get("DIRECT_SENDER", True))
        prepared = script("queue_enqueue_one").prepare(client, keys, direct)
        sender = prepared.sender
        prefix = sender.prefix(2) if sender is not None and sender.utf8 else None
        return client, prepared, sender, prefix

    def send_unique(self, args: list[Any]) -> list[int]:
        """Run the enqueue script with ``args`` (flag prefixed with ``"u"``) checking the ids'
        ``unique_for`` windows; per task 1 queued, 0 an earlier copy kept, 2 refused."""
        self.backend.register_queue(self.name)
        extra: tuple[str, ...] = (self.rates_key, self.unique_key)
        if args[0][1:2] == "1":
            extra += (self.request_key(),)
        return self._run(Call("queue_enqueue", args, parse_codes, extra))

    def encode(self, payload: Any) -> bytes:
        """Serialize a payload, refusing one over ``OPTIONS['MAX_PAYLOAD_BYTES']``."""
        data = self.serializer.dumps(payload)
        limit = self.backend.options["MAX_PAYLOAD_BYTES"]
        if len(data) > limit:
            raise InvalidArgument(
                f"payload is {len(data)} bytes serialized, over OPTIONS['MAX_PAYLOAD_BYTES'] "
                f"= {limit} of {self.backend.settings_name}[{self.backend.alias!r}]"
            )
        return data

    def prepare(self, id: str, payload: Any = None, delay: float = 0) -> Entry:
        """Validate and serialize one task without sending it (raises InvalidArgument)."""
        check_id(id)
        seconds = check_seconds(delay, "delay", allow_zero=True)
        return Entry(id, micros(seconds), self.encode(payload))

    def batches(self, items: Iterable[Any], delay: float, batch_size: int) -> list[list[Entry]]:
        """Validate every ``(id, payload[, delay])`` item, then cut them into batches."""
        check_count(batch_size, "batch_size", allow_zero=False)
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise InvalidArgument("items must be an iterable of (id, payload) tuples")
        entries = []
        for i, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) not in (2, 3):
                raise InvalidArgument(f"items[{i}] must be (id, payload) or (id, payload, delay)")
            try:
                entries.append(self.prepare(item[0], item[1], item[2] if len(item) == 3 else delay))
            except InvalidArgument as exc:
                raise InvalidArgument(f"items[{i}]: {exc}") from exc
        return [entries[i : i + batch_size] for i in range(0, len(entries), batch_size)]
