"""The :class:`Task` record and the parsing of script replies into tasks.

Scores are integer microseconds since the epoch, read from the Redis server's
``TIME`` inside the scripts, so every client agrees on what "due" means
whatever its own clock says. Integers below 2**53 are exact in a double, so a
score read back from Redis compares equal to the one that was written:
``Queue.dequeue`` removes a task only while its score is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from ..exceptions import UndecodablePayload
from ..wire import to_text

R = TypeVar("R")

#: Task states, in the order of the zsets in the scripts' KEYS (pending is ready or delayed).
READY = "ready"
DELAYED = "delayed"
IN_FLIGHT = "in_flight"
DEAD = "dead"
STATES = (READY, DELAYED, IN_FLIGHT, DEAD)

#: Fields a script returns per task: id, score, attempts, payload, last error.
TASK_FIELDS = 5
#: Numbers per task in a claim's reply (see :func:`parse_claimed`).
CLAIMED_FIELDS = 5


def micros(seconds: float) -> int:
    """Seconds as the integer microseconds the scripts work in."""
    return round(seconds * 1_000_000)


def from_micros(score: int) -> datetime:
    """An aware UTC datetime for a score."""
    return datetime.fromtimestamp(score / 1_000_000, tz=timezone.utc)


Loads = Callable[[Any], Any]

#: ``Task._decoded`` before the payload was read.
_UNREAD: Any = object()


@dataclass
class Task:
    """One task as Redis held it when it was read.

    ``score`` (microseconds since the epoch) is the due time for ready and
    delayed tasks and for tasks returned by ``pop`` (their deadline is
    ``lease_deadline``), the lease deadline for tasks listed as in flight, and
    the time of death for dead ones; pass a ready task's score to
    :meth:`Queue.dequeue`. ``attempts`` of a claimed task is the number of this run
    (1 for the first).

    ``payload`` is decoded when it is first read, not when the task is fetched:
    one undecodable payload (corrupt bytes, a pickle from another deploy) then
    fails only where it is used, as :class:`~django_redislock.exceptions.UndecodablePayload`,
    and never the claim or the listing it came in. ``raw_payload`` (the stored
    bytes) and ``payload_text`` (them as printable text) never raise.
    """

    queue: str
    id: str
    raw_payload: Any
    score: int
    state: str = READY
    attempts: int = 0
    last_error: str = ""
    lease_deadline: int | None = None
    #: The claim token of a task returned by ``pop``/``claim``: ``ack``, ``retry``,
    #: ``release`` and ``extend_lease`` act only while this claim is current ("" for none).
    claim: str = ""
    #: A claimed task whose previous lease expired (its worker may have died running it).
    suspect: bool = False
    #: The priority level (0, the default, to 9, the highest; see docs/queue.md "Priorities"):
    #: known for tasks returned by ``get``, ``tasks``, ``pop`` and ``claim``.
    priority: int = 0
    #: When it was queued or last replaced (server µs, the same clock as ``score``): known for
    #: tasks returned by ``get``; None for the others and for a task written by another
    #: producer or queued before enqueue times were recorded.
    enqueued_at: int | None = field(default=None, compare=False)
    loads: Loads | None = field(default=None, repr=False, compare=False)
    #: Set on a claimed task when a lease renewal answered that it was cancelled
    #: (:meth:`Queue.cancel`): its worker stops the run, or does not start it.
    cancel_requested: bool = field(default=False, compare=False)
    #: Seconds of the ``unique_for`` window its ack opens (set by the worker from the
    #: task's ``@task(unique_for=...)``; None: none).
    unique_for: float | None = field(default=None, compare=False, repr=False)
    _decoded: Any = field(default=_UNREAD, init=False, repr=False, compare=False)

    @property
    def payload(self) -> Any:
        """The decoded payload; raises ``UndecodablePayload`` when the stored bytes cannot be."""
        if self._decoded is _UNREAD:
            self._decoded = decode_payload(self.raw_payload, self.loads, self.id)
        if isinstance(self._decoded, UndecodablePayload):
            raise self._decoded
        return self._decoded

    @property
    def payload_text(self) -> str:
        """The stored payload as printable text: UTF-8 where it is, else the bytes' repr."""
        return payload_text(self.raw_payload)

    @property
    def when(self) -> datetime:
        """``score`` as an aware UTC datetime."""
        return from_micros(self.score)

    @property
    def lease_expires(self) -> datetime | None:
        """The lease deadline of a claimed task as an aware UTC datetime."""
        return None if self.lease_deadline is None else from_micros(self.lease_deadline)


def decode_payload(raw: Any, loads: Loads | None, id: str) -> Any:
    """``loads(raw)``, or the ``UndecodablePayload`` (returned, not raised) that says why not.

    Any exception of the serializer counts (a pickle runs code while loading, so
    it can raise anything); so does ``RecursionError`` from data nested deeper
    than the decoder's stack allows.
    """
    if loads is None:
        return raw
    try:
        return loads(raw)
    except Exception as exc:
        return UndecodablePayload(
            f"payload of task {id!r} cannot be decoded ({type(exc).__name__}: {exc}); "
            f"stored: {payload_text(raw)[:200]}"
        )


def payload_text(raw: Any) -> str:
    """Stored payload bytes as text that prints safely (never deserialized)."""
    if not isinstance(raw, bytes):
        return str(raw)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return repr(raw)
    return text if text.isprintable() else repr(raw)


def parse_tasks(
    queue: str, flat: Sequence[Any], loads: Loads, state: Callable[[int], str]
) -> list[Task]:
    """Turn ``[id, score, attempts, payload, error, ...]`` into tasks.

    ``state(score)`` names the state of each task (pending tasks are ready or
    delayed depending on the server time). Payloads are kept as stored and
    decoded with ``loads`` when first read (see :class:`Task`).
    """
    tasks = []
    for i in range(0, len(flat), TASK_FIELDS):
        raw_id, raw_score, attempts, payload, error = flat[i : i + TASK_FIELDS]
        score = int(float(raw_score))
        tasks.append(
            Task(
                queue=queue,
                id=to_text(raw_id),
                raw_payload=payload,
                score=score,
                state=state(score),
                attempts=int(attempts),
                last_error=to_text(error),
                loads=loads,
            )
        )
    return tasks


def parse_claimed(
    queue: str,
    fields: Sequence[bytes],
    data: bytes,
    loads: Loads,
    *,
    lease_deadline: int | None = None,
    claims: Sequence[str] | None = None,
) -> list[Task]:
    """Turn a claim's two task strings into in-flight tasks.

    ``fields`` is the first string split at ``,``: per task its due score, this run's
    attempt number and the byte lengths of its id, last error and payload
    (:data:`CLAIMED_FIELDS` values). ``data`` is the second: every task's id, then every
    task's last error, then every task's payload. Two reply elements per claim
    instead of three per task: a worker reads one claim per batch, and each element
    costs it a parse. ``claims`` are the claim tokens of the tasks in order (one per
    task, or ``ValueError``); each task gets its token and ``lease_deadline`` as it is
    built.
    """
    count = len(fields) // CLAIMED_FIELDS
    tokens: Sequence[str] = [""] * count if claims is None else claims
    id_sizes = [int(value) for value in fields[2::CLAIMED_FIELDS]]
    error_sizes = [int(value) for value in fields[3::CLAIMED_FIELDS]]
    at_id, at_error = 0, sum(id_sizes)
    at_payload = at_error + sum(error_sizes)
    tasks: list[Task] = []
    append = tasks.append
    for score, attempts, id_size, error_size, payload_size, claim in zip(
        fields[0::CLAIMED_FIELDS],
        fields[1::CLAIMED_FIELDS],
        id_sizes,
        error_sizes,
        map(int, fields[4::CLAIMED_FIELDS]),
        tokens,
        strict=True,
    ):
        id = data[at_id : at_id + id_size].decode()
        at_id += id_size
        error = ""
        if error_size:
            # the error is the one part not written by this app's scripts alone: never fail on it
            error = data[at_error : at_error + error_size].decode(errors="replace")
            at_error += error_size
        payload = data[at_payload : at_payload + payload_size]
        at_payload += payload_size
        # positional, in the field order of Task: half the cost of keywords, once per task
        append(
            Task(
                queue,
                id,
                payload,
                int(float(score)),
                IN_FLIGHT,
                int(attempts),
                error,
                lease_deadline,
                claim,
                False,
                0,
                None,
                loads,
            )
        )
    return tasks


def optional_score(value: Any) -> int | None:
    """A score from a script, where -1 means "none"."""
    score = int(float(value))
    return None if score < 0 else score


@dataclass(frozen=True)
class Claim:
    """What one claim saw: the claimed tasks and when there will be work again."""

    tasks: list[Task]
    now: int
    next_due: int | None
    next_lease_deadline: int | None
    acked: int
    recovered: int
    #: this claim's request key (pass it as ``done_request`` to the next claim to free it)
    request: str = ""
    #: the queue is paused: nothing was claimed, and nothing will be until it is resumed
    paused: bool = False
    #: the queue's rate limit held tasks back: the server time (µs) it admits the next one
    next_allowed: int | None = None

    @property
    def held_back(self) -> bool:
        """Due tasks are waiting that the queue's rate limit did not admit yet."""
        due = self.next_due is not None and self.next_due <= self.now
        return due and self.next_allowed is not None and not self.paused

    @property
    def next_work(self) -> int | None:
        """When a claim may next get a task (µs of server time); None: wait for a wake-up.

        The next due task, but not before the rate limit admits one, and never while
        the queue is paused (a resume wakes idle workers through the signal list).
        """
        if self.paused or self.next_due is None:
            return None
        return self.next_due if self.next_allowed is None else max(self.next_due, self.next_allowed)


#: Fields before the tasks in a claim reply (now, hints, counts, claim tokens, suspects,
#: levels, paused, next allowed).
CLAIM_HEAD = 10


def parse_claim(queue: str, reply: list[Any], loads: Loads, lease_us: int, request: str) -> Claim:
    """A claim script's reply (``queue_pop.lua``) as a :class:`Claim` of request key ``request``.

    The claim tokens come as the first of consecutive numbers, or, in a resend's
    answer, one by one; suspects and priority levels are positions in the tasks.
    """
    now = int(reply[0])
    meta, data = reply[CLAIM_HEAD], reply[CLAIM_HEAD + 1]
    fields = meta.split(b",") if meta else []
    tokens = reply[5]
    if isinstance(tokens, list):  # a resend's answer: the tokens one by one
        claims = [to_text(token) for token in tokens]
    else:  # consecutive tokens from the first
        first = int(tokens)
        claims = [str(token) for token in range(first, first + len(fields) // CLAIMED_FIELDS)]
    tasks = parse_claimed(queue, fields, data, loads, lease_deadline=now + lease_us, claims=claims)
    for position in reply[6]:
        tasks[int(position) - 1].suspect = True
    levels = reply[7]
    for i in range(0, len(levels), 2):
        tasks[int(levels[i]) - 1].priority = int(levels[i + 1])
    next_due, next_deadline = optional_score(reply[1]), optional_score(reply[2])
    acked, recovered = int(reply[3]), int(reply[4])
    paused, allowed = bool(int(reply[8])), optional_score(reply[9])
    return Claim(tasks, now, next_due, next_deadline, acked, recovered, request, paused, allowed)


@dataclass(frozen=True)
class Entry:
    """A validated, serialized task ready to be sent: id, delay (microseconds) and data."""

    id: str
    delay: int
    data: bytes


@dataclass(frozen=True)
class Call(Generic[R]):
    """One script call: its name, its ARGV and how to read its reply."""

    script: str
    args: list[Any]
    parse: Callable[[Any], R]
    #: keys after the queue's own: the request key of a call that must be safe to resend
    extra_keys: tuple[str, ...] = ()
