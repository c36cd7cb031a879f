"""The async pool's event loop: timers that fire on time to the microsecond.

asyncio waits for its next timer with ``epoll_wait``, whose timeout is whole
milliseconds rounded up: an ``await asyncio.sleep(0.010)`` on the stock loop lasts
10.2-11 ms (0.7 ms late at the median, measured on the pool at 32 runs at once),
where ``time.sleep(0.010)`` in a thread lasts 10.15 ms. For I/O-bound tasks of a few
milliseconds that lateness is the async pool's main cost against the thread pool, so
the pool's own loop waits on the epoll descriptor with ``select()``, whose timeout
has microseconds, and then collects the events without waiting. Nothing else changes:
the same selector, the same events, one more system call for a wait that an event
ended (a wait that ran out, the timer's case, has no event to collect and makes none).

Only where asyncio would build that loop anyway (the default policy on a platform
with epoll); a policy of the user's (uvloop, say) keeps its own loop.

A timeout to the microsecond is not enough on its own: Linux lets a thread's timed wait
end up to its timer slack late (50 µs by default), so that wake-ups can be grouped. The
loop's thread asks for 1 ns instead (:func:`fine_timer_slack`, ``prctl``, that thread
only): a 10 ms ``asyncio.sleep`` on the pool lasted 10.137 ms (median of 5 drains of
2,000 at 32 at once) with the default slack and 10.064 ms with 1 ns, where the thread
pool's ``time.sleep`` (default slack, its threads are the tasks') lasted 10.079 ms.
"""

from __future__ import annotations

import asyncio
import select
import selectors
import sys
from typing import Any

#: ``select()`` takes descriptors below FD_SETSIZE only; above it the loop keeps epoll's wait.
FD_SETSIZE = 1024
#: ``prctl`` options (linux/prctl.h) and the loop thread's timer slack, in nanoseconds
PR_SET_TIMERSLACK = 29
PR_GET_TIMERSLACK = 30
TIMER_SLACK_NS = 1


def fine_timer_slack() -> bool:
    """Set the calling thread's timer slack to :data:`TIMER_SLACK_NS`; False where it cannot.

    Linux only (elsewhere nothing changes). ``ctypes`` is imported here, in the loop's own
    thread as it starts (about 1.5 ms, beside the worker's first claim), not with the pool.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        return int(libc.prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc to load, or no prctl in it
        return False


def new_loop() -> asyncio.AbstractEventLoop:
    """The pool's event loop: a :class:`FineEpollSelector` loop where the default loop is epoll."""
    epoll = getattr(selectors, "EpollSelector", None)
    policy = asyncio.get_event_loop_policy()
    if epoll is None or type(policy) is not asyncio.DefaultEventLoopPolicy:
        return asyncio.new_event_loop()
    if selectors.DefaultSelector is not epoll:
        return asyncio.new_event_loop()
    return asyncio.SelectorEventLoop(FineEpollSelector())


if hasattr(selectors, "EpollSelector"):

    class FineEpollSelector(selectors.EpollSelector):
        """An epoll selector whose timed waits end to the microsecond (see the module)."""

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is not None and timeout > 0:
                fd = self.fileno()
                if fd < FD_SETSIZE:
                    # the epoll descriptor is readable as soon as any registered one is ready
                    readable, _, _ = select.select([fd], [], [], timeout)
                    if not readable:
                        return []  # a timer's wait ran out: no event to collect, no 2nd call
                    timeout = 0
            found: Any = super().select(timeout)
            return list(found)

else:  # pragma: no cover - platforms without epoll keep asyncio's own loop (see new_loop)
    FineEpollSelector = None  # type: ignore[assignment,misc]
