"""``@distributed_lock``: one object that is both a decorator and a context manager.

::

    @distributed_lock("order:{order_id}", ttl=30, timeout=0)
    def pay(request, order_id): ...

    @distributed_lock("user:{request.user.pk}")          # attribute access works
    class ProfileView(View): ...                           # wraps dispatch()

    class Command(BaseCommand):
        @distributed_lock("nightly-report", on_locked="skip")
        def handle(self, *args, **options): ...

    with distributed_lock("rebuild-index"):                # a context manager too
        ...

The name is a :meth:`str.format` template filled from the call's arguments as
:func:`inspect.signature` binds them (``**kwargs`` are flattened, so a class
view's URL kwargs are available), or a callable given the call's arguments.
Filled-in values are escaped so that any string, such as a URL value, makes a
distinct usable name (see :mod:`django_redislock.locking.names`); a value that
is not text at all raises :class:`BadLockName`, which a view answers with 400.

On an async class-based view (Django's ``View.view_is_async``), decorated on
the class or on ``dispatch()``, the lock is taken with ``acquire_async()`` and
held while the handler's coroutine runs.

When the lock stays taken for the whole wait, ``on_locked`` decides:

* ``"raise"``: raise :class:`~django_redislock.exceptions.LockNotAcquired`;
* ``"skip"``: do not call the function, return ``None``;
* ``"response"``: return an HTTP 423 (Locked) response with ``Retry-After`` set
  to the holder's remaining TTL in whole seconds;
* a callable ``on_locked(lock, *args, **kwargs)``: its result is returned.

The default (``None``) is ``"response"`` when an argument of the call is an
``HttpRequest`` (a view) and ``"raise"`` otherwise.

When the function ran but its hold had ended before the release (expired or
force-released), ``on_release_lost`` decides: ``"raise"`` (:class:`LockLost`),
``"ignore"`` (return the function's result), ``"response"`` (an HTTP 409
Conflict, the view's own status in ``X-Lock-Lost-Status``) or a callable
``on_release_lost(lock, result, *args, **kwargs)``; the default is
``"response"`` for a view and ``"raise"`` otherwise. An exception of the
function itself is never replaced by the ``LockLost`` of its release. As a context manager the
lock always raises when it is not acquired: a ``with`` body cannot be skipped.

``permits=N`` makes the name a semaphore's: up to N calls hold a permit at once (see
:mod:`django_redislock.locking.semaphore`); the same ``on_locked`` answers when none is free
for the whole wait, and a 423's ``Retry-After`` is the time until the first permit ends.

``owner`` names the holder instead of a random per-hold token: a string, a
callable given the call's arguments, or ``"celery"`` for the id of the Celery
task being run (see :mod:`django_redislock.contrib.celery`). Anyone who knows the owner
can then release the hold from another process
(``locks[alias].lock(name, owner=...).release()``), for example the next
attempt of a task whose worker died.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .names import BadLockName, bound_arguments, check_template, register_owner

if TYPE_CHECKING:  # imported on first use (see __getattr__)
    from .lock import ON_LOCKED, ON_RELEASE_LOST, distributed_lock
    from .rate import rate_limited
    from .responses import lock_pttl, lock_pttl_async, locked_response, lost_response

#: exported name -> its submodule, imported on first use: the app registers lock owners
#: (``register_owner``) at start-up, but the decorator and its HTTP responses (which import
#: ``django.http``) are only needed by code that decorates something
_EXPORTS = {
    "ON_LOCKED": ".lock",
    "ON_RELEASE_LOST": ".lock",
    "distributed_lock": ".lock",
    "lock_pttl": ".responses",
    "lock_pttl_async": ".responses",
    "locked_response": ".responses",
    "lost_response": ".responses",
    "rate_limited": ".rate",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "ON_LOCKED",
    "ON_RELEASE_LOST",
    "BadLockName",
    "bound_arguments",
    "check_template",
    "distributed_lock",
    "lock_pttl",
    "lock_pttl_async",
    "locked_response",
    "lost_response",
    "rate_limited",
    "register_owner",
]
