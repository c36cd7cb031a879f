"""A task module that makes a worker's idle wait two minutes long (tests/test_drain_process.py).

Listed in ``REDISLOCK_TASK_MODULES`` of a ``drain_queue`` subprocess, it is imported at the
worker's start: its idle BLPOP then lasts :data:`IDLE_WAIT` seconds (with a socket timeout
above it), so a test can tell "a stop signal cut the wait" from "the wait ran out" by whether
the process ends at all within a generous deadline, not by how long it took.
"""

from django_redislock.queue import idle

#: The idle BLPOP of a worker that imported this module (seconds).
IDLE_WAIT = 120.0

idle.MAX_IDLE_WAIT = IDLE_WAIT
