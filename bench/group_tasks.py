"""The tasks of :mod:`bench.groups`: a no-op run that notes its tenant, grouped and not."""

from __future__ import annotations

import time

from django_redislock import task

#: (tenant, monotonic time) of every run in this process, in start order
STARTED: list[tuple[str, float]] = []


@task(queue="bench-groups", group_key=lambda tenant: tenant, group_concurrency=2)
def grouped(tenant: str) -> None:
    STARTED.append((tenant, time.monotonic()))


@task(queue="bench-groups")
def plain(tenant: str) -> None:
    STARTED.append((tenant, time.monotonic()))
