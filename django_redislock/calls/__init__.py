"""The call layer: what a Redis node offers and how every Lua script is sent to it.

:mod:`.node` states what the layers above need from a backend or a Redlock
master (clients, key building, error mapping, scripts); :mod:`.script` sends the
scripts (blocking, asyncio, pipelined) and handles ``NOSCRIPT`` in one place;
:mod:`.wait` blocks on signal lists with a client-side deadline;
:mod:`.direct` sends the hot calls without redis-py's per-command wrapper;
:mod:`.requests` draws the ids that make a call safe to resend, and
:mod:`.transport` tells an asyncio connection closed under a send (which redis-py
reports as an ``AttributeError``) from other errors.
See ``docs/calls.md``.
"""
