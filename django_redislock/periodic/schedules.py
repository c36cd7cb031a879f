"""A schedule: when a periodic task is due, and the id each of its ticks is queued under.

A tick is an instant (whole microseconds since the Unix epoch, UTC). Every scheduler computes
the same ticks from the same definition without talking to the others, which is what lets the
queue deduplicate them: the task id of a tick is ``periodic:<name>:<tick in UTC>``.

* ``every=timedelta(...)`` ticks at whole multiples of the interval since the epoch (UTC), so
  ``every=timedelta(hours=1)`` fires at the top of every UTC hour whatever the time zone.
* ``cron="..."`` is read in a time zone (``timezone=``, else Django's ``TIME_ZONE``) by
  croniter. On a spring-forward day a tick in the skipped hour (02:30) fires at the first
  instant after the jump (03:00 local); in the repeated autumn hour an expression that names
  its hours (``30 2 * * *``) fires once, at the first pass, while one whose hour field starts
  with ``*`` (``*``, ``*/1``, ``*/2``) fires in both passes, as it does every hour of real
  time (what cron(8) does with such a field).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from datetime import timezone as dt_timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..exceptions import InvalidArgument, MissingDependency
from ..validation import check_name

#: The missed-tick policies (see :class:`Schedule`).
CATCH_UP = ("none", "last", "all")
#: Seconds a tick may be late and still count as on time under ``catch_up="none"``.
DEFAULT_GRACE = 60.0
#: Most missed ticks one schedule enqueues at once with ``catch_up="all"`` (the oldest beyond
#: it are skipped, with a warning): a long downtime of a one-second schedule must not flood.
MAX_CATCH_UP = 1000
#: Most cron ticks walked forward at once (to count skipped ticks, or to list a short span):
#: the work of one round stays bounded after however long a downtime.
MAX_CRON_WALK = 10 * MAX_CATCH_UP
#: One second, in the microseconds that ticks are counted in.
SECOND = 1_000_000
MISSING_CRONITER = (
    "cron= schedules need the croniter package: pip install 'django-redislock[periodic]'"
)
_NAME = re.compile(r"^[^{}\s]{1,200}$")
#: Where a new cron expression is first walked from, to refuse one that never fires (croniter
#: looks ahead for decades, so a leap-day schedule passes from any start).
NEVER_FIRES_PROBE = datetime(2000, 1, 1)


def croniter_class() -> Any:
    """The croniter class, or :class:`MissingDependency` naming the ``periodic`` extra."""
    try:
        from croniter import croniter
    except ImportError as exc:
        raise MissingDependency(MISSING_CRONITER) from exc
    return croniter


def check_cron(expression: Any, argument: str = "cron") -> str:
    """A five-field cron expression croniter accepts, or InvalidArgument naming ``argument``."""
    if not isinstance(expression, str) or len(expression.split()) != 5:
        raise InvalidArgument(
            f"{argument} must be a cron expression of five fields "
            f"(minute hour day month weekday), got {expression!r}"
        )
    try:
        walker = croniter_class()(expression, NEVER_FIRES_PROBE)
    except (ValueError, KeyError) as exc:  # croniter's errors derive from ValueError
        raise InvalidArgument(
            f"{argument} {expression!r} is not a valid cron expression: {exc}"
        ) from None
    try:  # valid fields that no date matches (Feb 31st) would fail every round of a scheduler
        walker.get_next(datetime)
    except (ValueError, KeyError):
        raise InvalidArgument(
            f"{argument} {expression!r} never fires: no date matches it (such as February "
            "31st); check its day and month fields"
        ) from None
    return expression


def check_every(value: Any, argument: str = "every") -> int:
    """A positive interval (timedelta or seconds) in whole microseconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidArgument(f"{argument} must be a timedelta, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgument(f"{argument} must be a positive interval, got {value!r}")
    return max(1, round(seconds * SECOND))


def check_catch_up(value: Any, argument: str = "catch_up") -> str:
    """One of :data:`CATCH_UP`."""
    if value not in CATCH_UP:
        raise InvalidArgument(f"{argument} must be one of {', '.join(CATCH_UP)}; got {value!r}")
    return str(value)


def check_schedule_name(value: Any, argument: str = "name") -> str:
    """A schedule name: up to 200 characters, no spaces or braces (it goes into task ids)."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidArgument(
            f"{argument} must be 1-200 characters without spaces or braces, got {value!r}"
        )
    return value


def zone(name: Any, argument: str = "timezone") -> tzinfo:
    """A time zone from a name or a tzinfo; None means Django's ``TIME_ZONE``."""
    if name is None:
        from django.conf import settings

        name = settings.TIME_ZONE or "UTC"
    if isinstance(name, tzinfo):
        return name
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidArgument(f"{argument} {name!r} is not a known time zone: {exc}") from None


def to_micros(moment: datetime) -> int:
    """An aware datetime as whole microseconds since the epoch."""
    delta = moment - datetime(1970, 1, 1, tzinfo=dt_timezone.utc)
    return (delta.days * 86400 + delta.seconds) * SECOND + delta.microseconds


def to_datetime(tick: int) -> datetime:
    """A tick as an aware UTC datetime."""
    return datetime(1970, 1, 1, tzinfo=dt_timezone.utc) + timedelta(microseconds=tick)


def tick_label(tick: int) -> str:
    """A tick in UTC, ISO 8601 (microseconds only when the tick has them)."""
    moment = to_datetime(tick)
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


@dataclass(frozen=True)
class Schedule:
    """One periodic task: what to queue (task path, arguments) and when (cron or every).

    ``catch_up`` decides what a scheduler does with ticks that passed while no scheduler ran:
    ``"none"`` enqueues only ticks at most ``grace`` seconds late (the others are skipped),
    ``"last"`` enqueues the latest missed tick however late, ``"all"`` every missed tick in
    order (at most :data:`MAX_CATCH_UP`). A schedule that no scheduler has ever run starts
    now: ticks from before it existed are never caught up.
    """

    name: str
    task: str
    cron: str | None = None
    every: int | None = None  # microseconds
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    catch_up: str = "none"
    grace: float = DEFAULT_GRACE
    timezone: tzinfo | None = None
    #: the queue ticks go to (None: the task's own queue)
    queue: str | None = None

    def task_id(self, tick: int) -> str:
        """The queue id of one tick: the same in every scheduler, so the queue dedups it."""
        return f"periodic:{self.name}:{tick_label(tick)}"

    def ticks(self, after: int, until: int) -> Sequence[int]:
        """Ticks ``t`` with ``after < t <= until``, oldest first.

        For ``every`` this is a ``range`` (no list is built, however long the span); a cron
        span is walked tick by tick and stops after :data:`MAX_CRON_WALK` ticks (use
        :meth:`recent` for the latest ticks of a long span).
        """
        if self.every is not None:
            first = (after // self.every + 1) * self.every
            return range(first, until + 1, self.every)
        assert self.cron is not None
        walker = croniter_class()(self.cron, to_datetime(after).astimezone(self._zone()))
        found: list[int] = []
        while len(found) < MAX_CRON_WALK:
            moment: datetime = walker.get_next(datetime)
            tick = to_micros(moment)
            if tick > until:
                break
            if tick > after and not self._second_pass(moment):
                found.append(tick)
        return found

    def recent(self, after: int, until: int, limit: int) -> list[int]:
        """The latest ``limit`` ticks ``t`` with ``after < t <= until``, oldest first.

        A cron schedule is walked backwards from ``until``, so the work is bounded by
        ``limit`` however long ago ``after`` was.
        """
        if self.every is not None:
            return list(self.ticks(after, until)[-limit:])
        assert self.cron is not None
        start = to_datetime(until + 1).astimezone(self._zone())
        walker = croniter_class()(self.cron, start)
        found: list[int] = []
        while len(found) < limit:
            moment: datetime = walker.get_prev(datetime)
            tick = to_micros(moment)
            if tick <= after:
                break
            if tick <= until and not self._second_pass(moment):
                found.append(tick)
        return found[::-1]

    def count(self, after: int, until: int) -> int:
        """How many ticks lie in ``(after, until]`` (for cron: at most :data:`MAX_CRON_WALK`)."""
        return len(self.ticks(after, until))

    def next_tick(self, after: int) -> int:
        """The first tick strictly after ``after``."""
        if self.every is not None:
            return (after // self.every + 1) * self.every
        assert self.cron is not None
        found = croniter_class()(self.cron, to_datetime(after).astimezone(self._zone()))
        while True:
            moment: datetime = found.get_next(datetime)
            tick = to_micros(moment)
            if tick > after and not self._second_pass(moment):
                return tick

    def _zone(self) -> tzinfo:
        """The zone a cron expression is read in: the schedule's, else ``TIME_ZONE``."""
        return self.timezone or zone(None)

    def _second_pass(self, moment: datetime) -> bool:
        """True for the second pass of a repeated autumn hour when the hour field is not ``*...``.

        ``30 2 * * *`` means "02:30 once a day", so its second 02:30 is skipped; ``0 * * * *``
        means "every hour", and the repeated hour is an hour of real time like any other.
        """
        assert self.cron is not None
        if self.cron.split()[1].startswith("*"):  # ``*``, ``*/1``, ``*/2``: cron(8)'s wildcard
            return False
        naive = moment.replace(tzinfo=None)
        zone_ = moment.tzinfo
        first = naive.replace(fold=0, tzinfo=zone_)
        return bool(to_micros(first) != to_micros(moment))

    def due(self, last: int | None, now: int) -> tuple[list[int], int]:
        """The ticks to enqueue at ``now`` given the last enqueued one; and how many skipped.

        ``last`` is None when no scheduler ever enqueued this schedule: only its latest tick
        is due then, if it is at most ``grace`` seconds old (a scheduler started just after
        a tick still queues it; nothing from before the schedule existed is caught up).
        """
        grace = round(self.grace * SECOND)
        if last is None:
            return self.recent(now - grace, now, 1), 0
        if self.catch_up == "none":
            late_until = max(last, now - grace - 1)  # ticks up to here are more than grace late
            return self.recent(late_until, now, MAX_CATCH_UP), self.count(last, late_until)
        ticks = self.recent(last, now, MAX_CATCH_UP if self.catch_up == "all" else 1)
        return ticks, max(0, self.count(last, now) - len(ticks))


def schedule(
    name: str,
    task: str,
    *,
    cron: str | None = None,
    every: timedelta | float | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    catch_up: str = "none",
    grace: float = DEFAULT_GRACE,
    timezone: str | tzinfo | None = None,
    queue: str | None = None,
    where: str = "",
) -> Schedule:
    """A validated :class:`Schedule`; errors name the argument (prefixed by ``where``)."""
    if (cron is None) == (every is None):
        raise InvalidArgument(f"{where}give exactly one of cron= and every=, got {cron=}, {every=}")
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise InvalidArgument(f"{where}args must be a list, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise InvalidArgument(f"{where}kwargs must be a dict, got {type(kwargs).__name__}")
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace > 0:
        raise InvalidArgument(f"{where}grace must be a positive number of seconds, got {grace!r}")
    try:
        return Schedule(
            name=check_schedule_name(name),
            task=check_name(task, "task"),
            cron=None if cron is None else check_cron(cron),
            every=None if every is None else check_every(every),
            args=tuple(args),
            kwargs=dict(kwargs or {}),
            catch_up=check_catch_up(catch_up),
            grace=float(grace),
            timezone=None if timezone is None else zone(timezone),
            queue=None if queue is None else check_name(queue, "queue"),
        )
    except InvalidArgument as exc:
        if not where:
            raise
        raise InvalidArgument(f"{where}{exc}") from None
