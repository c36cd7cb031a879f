"""The call layer's request ids: fresh per call, across threads and forked children."""

from __future__ import annotations

import os
import threading

import pytest

from django_redislock.calls.requests import request_id, request_key
from django_redislock.inventory import calls as stock_calls
from django_redislock.locking import mutex

from .conftest import RedisTarget


def test_request_ids_never_repeat_across_threads() -> None:
    drawn: list[list[str]] = [[] for _ in range(4)]

    def draw(into: list[str]) -> None:
        into.extend(request_id() for _ in range(5_000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [rid for into in drawn for rid in into]
    assert len(set(every)) == len(every) == 20_000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_forked_child_draws_ids_its_parent_never_draws() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its first ids, then leave without cleanup
        os.write(write, " ".join(request_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 4096).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    parent = [request_id() for _ in range(3)]
    assert len(child) == 3
    assert not set(child) & set(parent)
    assert child[0][:16] != parent[0][:16]  # a random part of its own


def test_a_request_key_shares_the_objects_hash_tag(redis_target: RedisTarget) -> None:
    backend = redis_target.queue_backend()
    first, second = request_key(backend, "q:jobs"), request_key(backend, "q:jobs")
    assert first != second
    assert first.startswith(backend.key("q:jobs", "req:"))
    queue = backend.queue("jobs")
    assert queue.request_key().startswith(backend.key("q:jobs", "req:"))
    assert queue.request_key() != queue.request_key()


def test_every_resend_safe_call_takes_its_id_from_the_call_layer(
    monkeypatch: pytest.MonkeyPatch, redis_target: RedisTarget
) -> None:
    monkeypatch.setattr(stock_calls, "request_id", lambda: "fixed")
    monkeypatch.setattr(mutex, "request_id", lambda: "fixed")
    assert stock_calls.clear_call().request == "fixed"
    lock = redis_target.lock_backend().lock("r", reentrant=True)
    assert lock._request_id() == "fixed"
