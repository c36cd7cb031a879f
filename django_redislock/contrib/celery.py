"""Celery integration: the running task's id as the lock owner, and singleton tasks.

A lock taken with ``owner="celery"`` is held in the name of the Celery task id
(``current_task.request.id``) instead of a random per-hold token. The id is the
same for every attempt of a task (retries, a redelivery after a worker died), and
anyone who knows it can release the hold: the task's ``on_failure`` handler,
another worker, or an operator (:func:`release_task_lock`). Outside a task
(a direct call), the owner falls back to a random token.

The singleton recipe::

    from celery import shared_task
    from django_redislock.contrib.celery import singleton

    @shared_task(bind=True, acks_late=True)
    @singleton("report:{day}", ttl=600)
    def build_report(self, day):
        ...  # at most one run per day at a time, cluster-wide

A second ``build_report.delay("2026-11-22")`` while the first runs returns
``None`` at once (``on_locked="skip"``) instead of running twice. ``ttl`` bounds
how long a crashed worker's hold blocks the next run; without ``ttl`` the
watchdog renews the hold while the task runs and it expires one
``DEFAULT_TTL`` after the worker died.

The singleton lock is reentrant *per task id*: another attempt of the same task
id gets in. A retry (``self.retry()``) raises through the decorator, which
releases the hold before the retry runs, and the retry holds it again under the
same id. A redelivered copy of a task whose worker died (``acks_late``) runs at
once instead of waiting for the dead hold's TTL; the dead hold's count then
expires with its TTL. Different task ids (two ``delay()`` calls) never run
together.
"""

from __future__ import annotations

from typing import Any

from ..decorators import distributed_lock, register_owner
from ..exceptions import LockNotOwned, MissingDependency


def current_task_id() -> str | None:
    """The id of the Celery task running in this thread, or None outside a task."""
    try:
        from celery import current_task
    except ImportError as exc:  # pragma: no cover - celery is in the test extra
        raise MissingDependency(
            "owner='celery' needs Celery in this environment: pip install celery"
        ) from exc
    request = getattr(current_task, "request", None) if current_task else None
    task_id = getattr(request, "id", None)
    return str(task_id) if task_id else None


def singleton(
    name: str | Any,
    *,
    using: str = "default",
    ttl: float | None = None,
    on_locked: str | Any = "skip",
    watchdog: bool | None = None,
) -> distributed_lock:
    """At most one run of the decorated task per filled ``name`` at a time (see module doc).

    Put it *under* the Celery decorator so the lock wraps the function Celery runs.
    ``on_locked`` is ``"skip"`` (return None), ``"raise"`` (``LockNotAcquired``, which
    ``autoretry_for`` can turn into a retry) or a callable.
    """
    return distributed_lock(
        name,
        using=using,
        ttl=ttl,
        timeout=0,
        blocking=False,
        on_locked=on_locked,
        watchdog=watchdog,
        owner="celery",
        reentrant=True,
    )


def release_task_lock(name: str, task_id: str, using: str = "default") -> bool:
    """Release the hold of lock ``name`` that the task ``task_id`` has; False if it has none.

    For another worker or an operator cleaning up after a task that will not
    finish (revoked, or its worker died and you do not want to wait for the TTL).
    """
    from ..handlers import locks

    lock = locks[using].lock(name, owner=task_id)
    try:
        lock.release()
    except LockNotOwned:
        return False
    return True


# owner="celery" works as soon as this module is imported, even before the app is ready
register_owner("celery", current_task_id)
