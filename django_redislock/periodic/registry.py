"""``@periodic_task`` and the ``REDISLOCK_PERIODIC_TASKS`` setting: where schedules come from.

A periodic task is an ordinary ``@task`` that a scheduler enqueues on its ticks: workers run
it like any other task (retries, leases, dead letters), and it can still be ``delay()``-ed by
hand. The decorator registers its schedule in :data:`schedules` under the task's path (or
``name=``); the setting adds schedules for tasks defined elsewhere, with their own arguments::

    REDISLOCK_PERIODIC_TASKS = {
        "nightly-report": {"task": "shop.tasks.report", "cron": "0 3 * * *", "args": ["daily"]},
    }
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from django.core.checks import CheckMessage, Error, register

from ..exceptions import ConfigurationError, InvalidArgument
from ..queue.registry import TaskFunction, task
from .schedules import DEFAULT_GRACE, Schedule, croniter_class, schedule

P = ParamSpec("P")
R = TypeVar("R")

PERIODIC_SETTING = "REDISLOCK_PERIODIC_TASKS"
#: The keys an entry of ``REDISLOCK_PERIODIC_TASKS`` may have: key -> (default, meaning).
#: The settings reference is generated from it.
ENTRY_KEYS: dict[str, tuple[str, str]] = {
    "task": ("required", "Dotted path of a `@task` (found among the worker's task modules)."),
    "cron": (
        "-",
        "Five-field cron expression, read in `timezone` (needs the `periodic` extra).",
    ),
    "every": ("-", "Interval: a `timedelta` or seconds. Exactly one of `cron` and `every`."),
    "args": ("`[]`", "Positional arguments of every call (checked against the signature)."),
    "kwargs": ("`{}`", "Keyword arguments of every call."),
    "queue": ("the task's", "Queue the ticks go to."),
    "catch_up": (
        '`"none"`',
        "Ticks missed while no scheduler ran: `none` (skip those more than `grace` late), "
        "`last` (queue the latest), `all` (queue each, at most 1,000).",
    ),
    "grace": ("`60`", "Seconds a tick may be late and still count as on time."),
    "timezone": ("`TIME_ZONE`", "Zone name a `cron` expression is read in."),
}
#: Schedules declared with ``@periodic_task`` in this process, by schedule name.
schedules: dict[str, Schedule] = {}


def periodic_task(
    *,
    cron: str | None = None,
    every: timedelta | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    catch_up: str = "none",
    grace: float = DEFAULT_GRACE,
    timezone: Any = None,
    name: str | None = None,
    **task_options: Any,
) -> Callable[[Callable[P, R]], TaskFunction[P, R]]:
    """Register a ``@task`` that schedulers enqueue on every tick of ``cron`` or ``every``.

    Exactly one of ``cron`` (five fields, read in ``timezone`` or ``TIME_ZONE``) and ``every``
    (a positive ``timedelta``) is required. ``args``/``kwargs`` are passed on each tick and
    checked against the signature now. ``catch_up`` (``"none"``, ``"last"``, ``"all"``) and
    ``grace`` (seconds) decide what happens to ticks missed while no scheduler ran; see
    :class:`~django_redislock.periodic.schedules.Schedule`. ``task_options`` go to ``@task``
    (``queue=``, ``using=``, ``max_attempts=``, ``lease=``, ``priority=``: the level each
    tick is queued at). Bad values raise
    :class:`~django_redislock.exceptions.InvalidArgument` naming the argument.
    """

    def register(function: Callable[P, R]) -> TaskFunction[P, R]:
        wrapped: TaskFunction[P, R] = task(**task_options)(function)
        found = schedule(
            name or wrapped.path,
            wrapped.path,
            cron=cron,
            every=every,
            args=args,
            kwargs=kwargs,
            catch_up=catch_up,
            grace=grace,
            timezone=timezone,
        )
        wrapped.payload(found.args, found.kwargs)  # a call the function cannot take fails now
        schedules[found.name] = found
        return wrapped

    return register


def entry_schedule(name: Any, entry: Any) -> Schedule:
    """One ``REDISLOCK_PERIODIC_TASKS`` entry as a schedule; errors name the entry."""
    where = f"{PERIODIC_SETTING}[{name!r}]: "
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where}must be a dict, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(ENTRY_KEYS), key=str)
    if unknown:
        raise ConfigurationError(
            f"{where}unknown key(s) {', '.join(map(repr, unknown))}; "
            f"valid keys are {', '.join(ENTRY_KEYS)}"
        )
    if not isinstance(entry.get("task"), str) or "." not in entry["task"]:
        raise ConfigurationError(
            f"{where}'task' must be the dotted path of a @task, got {entry.get('task')!r}"
        )
    every = entry.get("every")
    if isinstance(every, (int, float)) and not isinstance(every, bool):
        every = timedelta(seconds=every)  # seconds are fine in a settings file
    try:
        found = schedule(
            str(name),
            entry["task"],
            cron=entry.get("cron"),
            every=every,
            args=entry.get("args", ()),
            kwargs=entry.get("kwargs"),
            catch_up=entry.get("catch_up", "none"),
            grace=entry.get("grace", DEFAULT_GRACE),
            timezone=entry.get("timezone"),
            queue=entry.get("queue"),
        )
    except InvalidArgument as exc:
        raise ConfigurationError(f"{where}{exc}") from None
    return found


def settings_schedules() -> dict[str, Schedule]:
    """The schedules of ``REDISLOCK_PERIODIC_TASKS``; ConfigurationError names a bad entry."""
    from django.conf import settings

    value = getattr(settings, PERIODIC_SETTING, {})
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{PERIODIC_SETTING} must be a dict of schedule name -> entry, got {value!r}"
        )
    found = {}
    for name, entry in value.items():
        found[str(name)] = entry_schedule(name, entry)
    return found


def all_schedules() -> dict[str, Schedule]:
    """Decorated schedules and the setting's (a setting entry wins over a same-named one)."""
    return {**schedules, **settings_schedules()}


@register("redislock")
def check_periodic_tasks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``redislock.E021``: a bad ``REDISLOCK_PERIODIC_TASKS`` entry or a missing croniter.

    Task paths are not imported here (the worker's task modules decide what exists); the
    scheduler reports a path that names no ``@task`` when it starts.
    """
    from django.conf import settings

    hint = (
        f"{PERIODIC_SETTING} = {{'name': {{'task': 'app.tasks.fn', 'cron': '*/5 * * * *'}}}}; "
        "see docs/workers.md"
    )
    value = getattr(settings, PERIODIC_SETTING, None)
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [Error(f"{PERIODIC_SETTING} must be a dict, got {value!r}", hint=hint, id=E021)]
    errors: list[CheckMessage] = []
    for name, entry in value.items():
        try:
            entry_schedule(name, entry)
        except ConfigurationError as exc:
            errors.append(Error(str(exc), hint=hint, id=E021))
    return errors


E021 = "redislock.E021"


def needs_croniter(found: Mapping[str, Schedule]) -> None:
    """MissingDependency (naming the extra) if a cron schedule exists without croniter."""
    if any(item.cron for item in found.values()):
        croniter_class()
