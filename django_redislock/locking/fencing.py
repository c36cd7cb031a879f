"""Fenced writes: make a Django model update conditional on the lock's fencing token.

Why: a lock holder can pause (GC, swap, SIGSTOP, a slow network) for longer
than its TTL. The lock expires, another process takes it and writes; then the
first one wakes up, still believing it holds the lock, and overwrites the
newer data. A TTL alone cannot prevent this. A *fence* can: each grant gets a
number strictly larger than every earlier grant of the same lock name, the
protected row stores the highest fence that wrote it, and a write is applied
only when it carries a larger one::

    with locks["default"].lock(f"stock:{sku}") as lock:
        rows = Stock.objects.filter(sku=sku)
        applied = fenced_update(rows, lock.fence, quantity=F("quantity") - 1)
        if not applied:
            raise LockLost("a newer holder already wrote this row")

The check and the write are one ``UPDATE ... SET ..., fence = %s WHERE ... AND fence < %s``
statement, so the database, not the paused client, decides.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from ..exceptions import InvalidArgument


def fenced_update(
    target: models.QuerySet[Any] | type[models.Model] | models.Model,
    fence: int,
    *,
    fence_field: str = "fence",
    **values: Any,
) -> bool:
    """Apply ``values`` to the rows of ``target`` whose ``fence_field`` is below ``fence``.

    ``target`` is a queryset, a model class (all rows) or a saved instance (its
    row). The rows' ``fence_field`` is set to ``fence`` in the same statement.
    Returns True when at least one row was updated, False when a write with
    the same or a newer fence got there first (or no row matched).
    """
    if isinstance(fence, bool) or not isinstance(fence, int) or fence <= 0:
        raise InvalidArgument(f"fence must be a positive int (lock.fence), got {fence!r}")
    if fence_field in values:
        raise InvalidArgument(f"values must not set the fence field {fence_field!r} itself")
    queryset = _queryset(target)
    lower = {f"{fence_field}__lt": fence}
    updated: int = queryset.filter(**lower).update(**{fence_field: fence, **values})
    return updated > 0


def _queryset(target: Any) -> models.QuerySet[Any]:
    if isinstance(target, models.QuerySet):
        return target
    if isinstance(target, type) and issubclass(target, models.Model):
        everything: models.QuerySet[Any] = target._default_manager.all()
        return everything
    if isinstance(target, models.Model):
        if target.pk is None:
            raise InvalidArgument("target is an unsaved model instance; save it first")
        row: models.QuerySet[Any] = type(target)._default_manager.filter(pk=target.pk)
        return row
    raise InvalidArgument(
        f"target must be a QuerySet, a model class or a model instance, not {target!r}"
    )
