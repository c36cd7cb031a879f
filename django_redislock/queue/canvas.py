"""Workflows close to Celery's canvas: ``task.s()``, :func:`chain`, :func:`group`, :func:`chord`,
and ``depends_on``.

::

    chain(fetch.s(url), parse.s(), store.s()).delay()       # each step gets the last result
    group(square.s(1), square.s(2)).delay().result(10)      # [1, 4]
    chord(group(square.s(i) for i in range(8)), total.s()).delay()  # total([0, 1, 4, ...])
    report.delay(day, depends_on=[load_a, load_b])           # runs once both succeeded

A workflow lives on one queue (every member runs there, whatever its ``@task(queue=...)``):
its state is one hash under that queue's hash tag, so the script that ends a member also
counts it and queues what comes next, on one cluster slot (:mod:`.workflows`). Delaying a
workflow returns a :class:`WorkflowHandle`. docs/workflows.md has the whole story.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..calls.script import script
from ..exceptions import InvalidArgument, ResultTimeout, ResultUnknown, TaskFailed
from ..handlers import queues
from ..validation import check_name, check_seconds
from ..wire import to_text
from .workflows import CHAIN_STEP, LAST, MARK, MEMBER, chord_inputs, workflow_keys

if TYPE_CHECKING:
    from .queue import Queue
    from .task_function import TaskFunction

#: Pause between two reads of a workflow while :meth:`WorkflowHandle.result` waits.
POLL = 0.05
#: Longest pause between two reads (the pause doubles up to this).
POLL_MAX = 0.5
#: Members of one group or chord at most (their ids and payloads go in one script call).
MAX_MEMBERS = 10_000


class Signature:
    """One call of a task, not sent yet: ``task.s(*args, **kwargs)``.

    ``delay(depends_on=...)`` sends it alone (a workflow of one task); inside
    :func:`chain`, :func:`group` and :func:`chord` it is a step or a member.
    """

    def __init__(
        self, task: TaskFunction[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        if getattr(task, "group", None) is not None:  # its members are queued by a script
            raise InvalidArgument(
                f"{task.path} has a group_key: tasks of concurrency groups cannot be "
                'workflow steps or members yet (docs/queue.md, "Concurrency groups")'
            )
        self.task = task
        self.args = list(args)
        self.kwargs = dict(kwargs)
        #: the id its run gets (a fresh one per signature)
        self.id = os.urandom(16).hex()

    def __repr__(self) -> str:
        return f"{self.task.path}.s(*{self.args!r}, **{self.kwargs!r})"

    def spec(self) -> dict[str, Any]:
        return {"id": self.id, "task": self.task.path, "args": self.args, "kwargs": self.kwargs}

    def check(self, extra_first: bool = False) -> None:
        """Raise ``TypeError`` when the task could not take these arguments (with the
        previous result first, for a chain step after the first)."""
        args = [None, *self.args] if extra_first else self.args
        self.task.check_call(args, self.kwargs)

    def delay(
        self, *, depends_on: Iterable[WorkflowHandle] = (), queue: str | None = None
    ) -> WorkflowHandle:
        """Queue this call alone; its :class:`WorkflowHandle`."""
        self.check()
        target = self.task.queue_named(queue)
        payload = payload_of(self, target, role=LAST, index=0)
        return start(target, "task", first=[(self.id, payload)], depends_on=depends_on)


class chain:
    """Steps run one after the other, each getting the previous step's result as its first
    argument. A step that fails (dead-lettered) stops the chain: the handle says FAILED with
    the step's id and error, and the steps after it never run."""

    def __init__(self, *steps: Signature) -> None:
        if not steps:
            raise InvalidArgument("chain() needs at least one step")
        for i, step in enumerate(steps):
            if not isinstance(step, Signature):
                raise InvalidArgument(f"chain() takes task.s(...) signatures, got {step!r}")
            step.check(extra_first=i > 0)
        self.steps = list(steps)

    def delay(
        self, *, depends_on: Iterable[WorkflowHandle] = (), queue: str | None = None
    ) -> WorkflowHandle:
        """Queue the first step; the :class:`WorkflowHandle` of the chain (its result: the
        last step's)."""
        first, rest = self.steps[0], self.steps[1:]
        target = first.task.queue_named(queue)
        role = CHAIN_STEP if rest else LAST
        payload = payload_of(first, target, role=role, index=0, rest=[s.spec() for s in rest])
        return start(target, "chain", first=[(first.id, payload)], depends_on=depends_on)


class group:
    """Members that run side by side; the handle's result is the list of their results."""

    def __init__(self, *members: Signature | Iterable[Signature]) -> None:
        flat: list[Any] = []
        for member in members:
            flat.extend([member] if isinstance(member, Signature) else list(member))
        if not flat or len(flat) > MAX_MEMBERS:
            raise InvalidArgument(f"a group takes 1 to {MAX_MEMBERS} members, got {len(flat)}")
        for member in flat:
            if not isinstance(member, Signature):
                raise InvalidArgument(f"group() takes task.s(...) signatures, got {member!r}")
            member.check()
        self.members: list[Signature] = flat

    def delay(
        self, *, depends_on: Iterable[WorkflowHandle] = (), queue: str | None = None
    ) -> WorkflowHandle:
        """Queue every member; the :class:`WorkflowHandle` of the group."""
        target = self.members[0].task.queue_named(queue)
        items = [(m.id, member_payload(m, target, i)) for i, m in enumerate(self.members)]
        return start(target, "group", first=items, count=len(items), depends_on=depends_on)


class chord:
    """A group whose callback runs once, with the list of member results (in member order),
    after every member ended.

    ``allow_failure=False``: a failed member fails the chord (FAILED, that member's id and
    error; the callback never runs). True: the callback runs anyway, a failed member's
    place in the list holding a :class:`~django_redislock.exceptions.TaskFailed`.
    """

    def __init__(
        self,
        header: group | Iterable[Signature],
        body: Signature,
        *,
        allow_failure: bool = False,
    ) -> None:
        self.header = header if isinstance(header, group) else group(*header)
        if not isinstance(body, Signature):
            raise InvalidArgument(f"the chord's callback must be a task.s(...), got {body!r}")
        body.check(extra_first=True)
        self.body = body
        self.allow_failure = bool(allow_failure)

    def delay(
        self, *, depends_on: Iterable[WorkflowHandle] = (), queue: str | None = None
    ) -> WorkflowHandle:
        """Queue every member; the :class:`WorkflowHandle` of the chord (its result: the
        callback's)."""
        members = self.header.members
        target = members[0].task.queue_named(queue)
        items = [(m.id, member_payload(m, target, i)) for i, m in enumerate(members)]
        callback = payload_of(
            self.body, target, role=LAST, index=len(members), chord_of=len(members)
        )
        return start(
            target,
            "chord",
            first=items,
            count=len(items),
            callback=(self.body.id, callback),
            allow_failure=self.allow_failure,
            depends_on=depends_on,
        )


def payload_of(
    sig: Signature,
    queue: Queue,
    *,
    role: str,
    index: int,
    rest: list[dict[str, Any]] | None = None,
    chord_of: int | None = None,
) -> dict[str, Any]:
    """A member's payload (encoded by :func:`start`, once the workflow id is known)."""
    mark: dict[str, Any] = {"role": role, "i": index, "q": queue.name}
    if rest:
        mark["next"] = rest
    if chord_of is not None:
        mark["in"] = chord_of
    return {"task": sig.task.path, "args": sig.args, "kwargs": sig.kwargs, MARK: mark}


def member_payload(sig: Signature, queue: Queue, index: int) -> dict[str, Any]:
    """The payload of a group's or chord's member ``index``."""
    return payload_of(sig, queue, role=MEMBER, index=index)


def workflow_ttl(queue: Queue) -> int:
    """Milliseconds a workflow's hash outlives its last change (``OPTIONS['RESULT_TTL']``)."""
    return max(1, int(float(queue.backend.options["RESULT_TTL"]) * 1000))


def start(
    queue: Queue,
    kind: str,
    *,
    first: list[tuple[str, dict[str, Any]]],
    count: int = 0,
    callback: tuple[str, dict[str, Any]] | None = None,
    allow_failure: bool = False,
    depends_on: Iterable[WorkflowHandle] = (),
) -> WorkflowHandle:
    """Create the workflow and queue (or defer) its first tasks: one round trip."""
    if queue.backend.options["EAGER"]:
        raise InvalidArgument("workflows need a worker: they do not run in EAGER mode")
    deps = list(depends_on)
    for dep in deps:
        if not isinstance(dep, WorkflowHandle):
            raise InvalidArgument(
                f"depends_on takes the handles of workflows (task.s(...).delay(), chain, group, "
                f"chord, or a delay(depends_on=...)), got {dep!r}"
            )
        if dep.queue_name != queue.name or dep.alias != queue.backend.alias:
            raise InvalidArgument(
                f"a dependency must run on the same queue ({queue.name!r}): {dep!r} is on "
                f"{dep.queue_name!r}"
            )
    workflow_id = os.urandom(16).hex()
    ttl = workflow_ttl(queue)

    def encoded(payload: dict[str, Any]) -> bytes:
        return bytes(
            queue.encode({**payload, MARK: {**payload[MARK], "id": workflow_id, "ttl": ttl}})
        )

    cb_id, cb_payload = ("", b"") if callback is None else (callback[0], encoded(callback[1]))
    args: list[Any] = [workflow_id, ttl, kind, count, "1" if allow_failure else "0", cb_id]
    args += [cb_payload, len(deps), *(str(d) for d in deps)]
    for task_id, payload in first:
        args += [task_id, encoded(payload)]
    keys = [*queue.script_keys, *workflow_keys(queue, workflow_id)]
    keys += [workflow_keys(queue, str(d))[0] for d in deps]
    queue.backend.register_queue(queue.name)
    with queue.backend.errors():
        script("workflow_start").run(queue.backend.client, keys, args)
    return WorkflowHandle(workflow_id, queue, kind, [t for t, _ in first])


class WorkflowHandle(str):
    """The id of a workflow (a ``str``), and what can be read of it.

    ``state``: ``RUNNING``, ``SUCCESSFUL``, ``FAILED`` (a step or member failed: see
    ``failed_id``/``error``), ``CANCELLED`` (a workflow it depended on failed) or
    ``UNKNOWN`` (expired: ``OPTIONS['RESULT_TTL']`` after its last change).
    """

    alias: str
    queue_name: str
    kind: str
    #: the ids of the tasks queued first (a group's or chord's members, a chain's first step)
    task_ids: list[str]

    def __new__(
        cls, id: str, queue: Queue, kind: str = "", task_ids: Sequence[str] = ()
    ) -> WorkflowHandle:
        made = super().__new__(cls, id)
        made.alias, made.queue_name = queue.backend.alias, queue.name
        made.kind, made.task_ids = kind, list(task_ids)
        return made

    def __repr__(self) -> str:
        return f"WorkflowHandle({str(self)!r}, kind={self.kind!r}, queue={self.queue_name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # names, not the queue object: a handle pickles (a session, a cache) and follows
        # a settings reset
        return (_rebuild, (str(self), self.alias, self.queue_name, self.kind, self.task_ids))

    @property
    def queue(self) -> Queue:
        found: Queue = queues[self.alias].queue(check_name(self.queue_name))
        return found

    def info(self) -> dict[str, Any]:
        """``state``, ``failed_id``, ``error``, ``kind``, ``members``, ``deferred`` (one round
        trip)."""
        queue = self.queue
        with queue.backend.errors():
            reply = script("workflow_read").run(
                queue.backend.client, workflow_keys(queue, str(self)), [str(self)]
            )
        state, failed, error, raw, kind, n, deferred = reply
        return {
            "state": to_text(state),
            "failed_id": to_text(failed),
            "error": to_text(error),
            "kind": to_text(kind),
            "members": int(n),
            "deferred": to_text(deferred) == "1",
            "raw": raw,
        }

    @property
    def state(self) -> str:
        """Where the workflow is now (one round trip)."""
        return str(self.info()["state"])

    @property
    def failed_id(self) -> str:
        """The id of the task that failed the workflow ("" while none did)."""
        return str(self.info()["failed_id"])

    @property
    def error(self) -> str:
        """Why it failed or was cancelled ("" while it did not)."""
        return str(self.info()["error"])

    def result(self, timeout: float | None = None) -> Any:
        """The workflow's value, waiting up to ``timeout`` seconds (None: as long as it takes).

        A chain's: its last step's result; a chord's: its callback's; a group's: the list
        of its members' results; a single task's: its result. Raises :class:`TaskFailed`
        (with ``task_id`` the failed step) when it failed or was cancelled,
        :class:`ResultUnknown` when it is unknown (expired), :class:`ResultTimeout` when
        ``timeout`` passed first. Waits by reading the hash again, every 50 ms at first,
        then every 0.5 s at most.
        """
        deadline = (
            None
            if timeout is None
            else time.monotonic() + check_seconds(timeout, "timeout", allow_zero=True)
        )
        pause = POLL
        while True:
            info = self.info()
            if info["state"] != "RUNNING":
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(f"workflow {str(self)!r} is still RUNNING")
            left = POLL_MAX if deadline is None else max(0.0, deadline - time.monotonic())
            time.sleep(min(pause, left))
            pause = min(pause * 2, POLL_MAX)
        state = info["state"]
        if state == "SUCCESSFUL":
            queue = self.queue
            if info["kind"] == "group":
                return chord_inputs(queue, str(self), info["members"])
            raw = info["raw"]
            return queue.serializer.loads(raw) if raw else None
        if state in ("FAILED", "CANCELLED"):
            what = "failed" if state == "FAILED" else "was cancelled"
            raise TaskFailed(
                f"workflow {str(self)!r} {what}: {info['error']}",
                task_id=info["failed_id"],
                error=info["error"],
            )
        raise ResultUnknown(f"no workflow {str(self)!r}: it expired (RESULT_TTL) or never started")


def _rebuild(
    id: str, alias: str, queue_name: str, kind: str, task_ids: list[str]
) -> WorkflowHandle:
    """A pickled :class:`WorkflowHandle` again (no Redis call)."""
    made = str.__new__(WorkflowHandle, id)
    made.alias, made.queue_name, made.kind, made.task_ids = alias, queue_name, kind, task_ids
    return made
