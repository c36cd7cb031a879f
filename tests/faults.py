"""A TCP fault proxy between a client and a real Redis server, for fault-injection tests.

:class:`FaultProxy` listens on a loopback port and forwards every connection to
one upstream server (a single server, one cluster node or one Redlock master).
It parses the RESP traffic both ways, so it knows which reply answers which
request, and can, on demand:

* pass everything through (the default) and count the requests it saw;
* **stall** one or both directions: bytes wait in the proxy until ``resume()``
  (or a deadline), like a server or a network that stops answering;
* **delay** replies by a fixed time;
* **drop a reply** after its request reached Redis: the command ran, the
  client never learns its outcome; the proxy then cuts the connection at once
  (``then="cut"``: the client sees a connection error) or keeps it open and
  silent (``then="silent"``: the client waits for its socket timeout);
* **cut a connection mid-reply**: half of the reply's bytes, then a reset;
* **stall once a request went out** (``stall_on``): the request reaches Redis,
  then the proxy stalls as above;
* **swallow a request** (``drop_request``): it never reaches Redis and the
  connection stays silent;
* cut every open connection now (``cut_all``).

Reply faults are rules (:class:`Fault`) that match requests by command name or
by a predicate on the request's arguments, fire a bounded number of times, and
record what they hit, so a test can wait until its fault really happened.
A ``NOSCRIPT`` error reply never fires a rule: the request did nothing, and
redis-py answers it with a second request that the rule then meets.

Everything runs on one asyncio loop in a daemon thread per proxy, listens on
127.0.0.1 only, and ``close()`` (or the fixtures in ``tests/proxied.py``) stops
the loop, resets every connection and joins the thread within a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .servers import free_port

Args = tuple[bytes, ...]
Matcher = str | Callable[[Args], bool] | None
Direction = Literal["both", "up", "down"]

#: Commands that set up or probe a connection; ``match=None`` skips them.
SETUP_COMMANDS = frozenset(
    {
        b"HELLO",
        b"AUTH",
        b"CLIENT",
        b"SELECT",
        b"READONLY",
        b"READWRITE",
        b"CLUSTER",
        b"COMMAND",
        b"PING",
        b"INFO",
        b"SCRIPT",
        b"ECHO",
    }
)
#: Commands after which a RESP2 connection carries pub/sub messages, not replies.
PUBSUB_COMMANDS = frozenset({b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE"})
#: How long ``close()`` waits for the loop thread.
CLOSE_TIMEOUT = 5.0
#: Longest any single stall may last, whatever a test asks (bounded by design).
MAX_STALL = 30.0
_POLL = 0.002


class ProtocolError(Exception):
    """The bytes are not RESP."""


def _line_end(buf: bytes | bytearray, pos: int) -> int | None:
    end = buf.find(b"\r\n", pos)
    return None if end < 0 else end


def frame_end(buf: bytes | bytearray, pos: int = 0) -> int | None:
    """Index just past the RESP2/RESP3 frame that starts at ``pos``, or None if incomplete."""
    if pos >= len(buf):
        return None
    kind = buf[pos : pos + 1]
    end = _line_end(buf, pos)
    if end is None:
        return None
    if kind in (b"+", b"-", b":", b",", b"#", b"_", b"("):
        return end + 2
    try:
        size = int(buf[pos + 1 : end])
    except ValueError as exc:
        raise ProtocolError(f"bad RESP header {bytes(buf[pos:end])!r}") from exc
    if kind in (b"$", b"!", b"="):
        if size < 0:
            return end + 2
        stop = end + 2 + size + 2
        return stop if len(buf) >= stop else None
    if kind in (b"*", b"~", b">", b"%", b"|"):
        items = size * 2 if kind in (b"%", b"|") else size
        cursor = end + 2
        for _ in range(max(items, 0)):
            nxt = frame_end(buf, cursor)
            if nxt is None:
                return None
            cursor = nxt
        if kind == b"|":  # an attribute precedes the reply it annotates
            return frame_end(buf, cursor)
        return cursor
    raise ProtocolError(f"unknown RESP type {bytes(kind)!r}")


def parse_request(buf: bytes | bytearray) -> tuple[Args, int] | None:
    """The first command in ``buf`` and its length in bytes, or None if incomplete."""
    if not buf:
        return None
    if buf[:1] != b"*":  # an inline command
        end = _line_end(buf, 0)
        if end is None:
            return None
        return tuple(bytes(buf[:end]).split()), end + 2
    end = _line_end(buf, 0)
    if end is None:
        return None
    count = int(buf[1:end])
    cursor = end + 2
    args: list[bytes] = []
    for _ in range(count):
        head = _line_end(buf, cursor)
        if head is None:
            return None
        if buf[cursor : cursor + 1] != b"$":
            raise ProtocolError("a request array must hold bulk strings")
        size = int(buf[cursor + 1 : head])
        start = head + 2
        if len(buf) < start + size + 2:
            return None
        args.append(bytes(buf[start : start + size]))
        cursor = start + size + 2
    return tuple(args), cursor


def command_name(args: Args) -> bytes:
    return args[0].upper() if args else b""


def contains(*needles: bytes | str) -> Callable[[Args], bool]:
    """A matcher for requests whose arguments contain every one of ``needles`` (substrings)."""
    wanted = [n.encode() if isinstance(n, str) else n for n in needles]

    def match(args: Args) -> bool:
        if command_name(args) in SETUP_COMMANDS:
            return False
        return all(any(n in arg for arg in args) for n in wanted)

    return match


def _matches(matcher: Matcher, args: Args) -> bool:
    if matcher is None:
        return command_name(args) not in SETUP_COMMANDS
    if isinstance(matcher, str):
        return command_name(args) == matcher.upper().encode()
    return bool(matcher(args))


Action = Literal["drop_reply", "cut_mid_reply", "delay_reply", "drop_request", "stall"]


@dataclass
class Fault:
    """A rule: the next ``times`` requests that ``match`` get ``action``.

    ``hits`` lists the requests it fired on; ``fired`` is set at the first one.
    """

    action: Action
    match: Matcher = None
    times: int = 1
    then: Literal["cut", "silent"] = "cut"
    seconds: float = 0.0
    direction: Direction = "down"
    hits: list[Args] = field(default_factory=list)
    fired: threading.Event = field(default_factory=threading.Event)

    @property
    def armed(self) -> bool:
        return len(self.hits) < self.times

    def wait(self, timeout: float = 5.0) -> bool:
        """Wait until the fault fired once; True if it did."""
        return self.fired.wait(timeout)


@dataclass
class _Pending:
    args: Args
    fault: Fault | None = None


class _Conn:
    def __init__(
        self,
        proxy: FaultProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.c_reader, self.c_writer = client
        self.u_reader, self.u_writer = upstream
        self.pending: deque[_Pending] = deque()
        self.pubsub = False
        self.silent = False  # replies are swallowed until the client gives up
        self.closed = False

    def abort(self) -> None:
        """Reset both sides now (RST, not a graceful close)."""
        if self.closed:
            return
        self.closed = True
        for writer in (self.c_writer, self.u_writer):
            with contextlib.suppress(Exception):
                writer.transport.abort()

    async def upward(self) -> None:
        buf = bytearray()
        while not self.closed:
            data = await self.c_reader.read(65536)
            if not data:
                return
            buf += data
            while True:
                parsed = parse_request(buf)
                if parsed is None:
                    break
                args, size = parsed
                raw = bytes(buf[:size])
                del buf[:size]
                await self.proxy._wait_unstalled("up")
                self.proxy._record(args)
                if command_name(args) in PUBSUB_COMMANDS:
                    self.pubsub = True
                if self.proxy._take(args, ("drop_request",)) is not None:
                    self.silent = True
                    continue
                self.pending.append(_Pending(args))
                if self.closed:
                    return
                self.u_writer.write(raw)
                await self.u_writer.drain()
                stall = self.proxy._take(args, ("stall",))
                if stall is not None:
                    self.proxy.stall(stall.seconds, stall.direction)

    async def downward(self) -> None:
        buf = bytearray()
        while not self.closed:
            data = await self.u_reader.read(65536)
            if not data:
                return
            buf += data
            while True:
                end = frame_end(buf)
                if end is None:
                    break
                raw = bytes(buf[:end])
                del buf[:end]
                if not await self._reply(raw) or self.closed:
                    return

    async def _reply(self, raw: bytes) -> bool:
        """Forward (or not) one reply frame; False once the connection is done."""
        if raw[:1] == b">" or self.pubsub or not self.pending:
            await self._send(raw)
            return True
        pending = self.pending.popleft()
        delay = self.proxy.reply_delay
        fault = None
        if not raw.startswith(b"-NOSCRIPT"):
            fault = self.proxy._take(pending.args, ("drop_reply", "cut_mid_reply", "delay_reply"))
        if fault is not None and fault.action == "delay_reply":
            delay += fault.seconds
        if delay > 0:
            await asyncio.sleep(min(delay, MAX_STALL))
        if fault is None or fault.action == "delay_reply":
            await self._send(raw)
            return True
        if fault.action == "cut_mid_reply":
            await self._send(raw[: max(1, len(raw) // 2)])
            self.abort()
            return False
        if fault.then == "cut":  # drop_reply
            self.abort()
            return False
        self.silent = True
        return True

    async def _send(self, raw: bytes) -> None:
        await self.proxy._wait_unstalled("down")
        if self.silent or self.closed:
            return
        self.c_writer.write(raw)
        await self.c_writer.drain()


class FaultProxy:
    """A fault-injecting TCP proxy on 127.0.0.1 in front of ``upstream`` (host, port).

    Use ``start()``/``close()`` or ``with FaultProxy(...) as proxy:``. Its
    ``url`` and ``address`` are where clients connect.
    """

    def __init__(self, upstream: tuple[str, int], name: str = "") -> None:
        self.upstream = upstream
        self.name = name or f"proxy->{upstream[1]}"
        self.port = 0
        self.reply_delay = 0.0
        #: Every request seen (setup commands included), in arrival order.
        self.requests: list[Args] = []
        self._faults: list[Fault] = []
        self._stall_until = {"up": 0.0, "down": 0.0}
        self._guard = threading.Lock()
        self._conns: set[_Conn] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def __repr__(self) -> str:
        return f"<FaultProxy {self.name} :{self.port}>"

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(CLOSE_TIMEOUT) or self._error is not None:
            self.close()
            raise RuntimeError(f"{self.name} did not start: {self._error!r}")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._listen())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(
                    asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 2.0)
                )
            loop.close()

    async def _listen(self) -> None:
        for _ in range(20):
            port = free_port()
            try:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
            except OSError:
                continue
            self.port = port
            return
        raise RuntimeError("no free port for the proxy")

    def close(self) -> None:
        """Stop listening, reset every connection and join the loop thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._shutdown)
        if self._thread is not None:
            self._thread.join(CLOSE_TIMEOUT)
            if self._thread.is_alive():
                raise RuntimeError(f"{self.name} did not stop")
            self._thread = None

    def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.abort()
        assert self._loop is not None
        self._loop.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 5.0)
        except (OSError, asyncio.TimeoutError):
            writer.transport.abort()
            return
        conn = _Conn(self, (reader, writer), upstream)
        self._conns.add(conn)
        tasks = [asyncio.ensure_future(conn.upward()), asyncio.ensure_future(conn.downward())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:  # a parse error is a bug in the proxy: make it visible
                if not task.cancelled() and isinstance(task.exception(), ProtocolError):
                    self._error = task.exception()
        except asyncio.CancelledError:  # the proxy is closing: end quietly
            pass
        finally:
            for task in tasks:
                task.cancel()
            conn.abort()
            self._conns.discard(conn)

    # ---- the loop's side -------------------------------------------------------------

    def _record(self, args: Args) -> None:
        with self._guard:
            self.requests.append(args)

    def _take(self, args: Args, actions: Sequence[str]) -> Fault | None:
        with self._guard:
            for fault in self._faults:
                if fault.action in actions and fault.armed and _matches(fault.match, args):
                    fault.hits.append(args)
                    fault.fired.set()
                    return fault
        return None

    async def _wait_unstalled(self, direction: str) -> None:
        while time.monotonic() < self._stall_until[direction]:
            await asyncio.sleep(_POLL)

    # ---- what tests call -------------------------------------------------------------

    def _add(self, fault: Fault) -> Fault:
        with self._guard:
            self._faults.append(fault)
        return fault

    def drop_reply(
        self, match: Matcher = None, *, times: int = 1, then: Literal["cut", "silent"] = "cut"
    ) -> Fault:
        """Let the next ``times`` matching requests reach Redis and lose their replies.

        ``then="cut"`` resets the connection at once; ``"silent"`` keeps it
        open and forwards nothing more on it, so the client times out.
        """
        return self._add(Fault("drop_reply", match, times, then))

    def cut_mid_reply(self, match: Matcher = None, *, times: int = 1) -> Fault:
        """Forward half of the next matching reply's bytes, then reset the connection."""
        return self._add(Fault("cut_mid_reply", match, times))

    def delay_reply(self, seconds: float, match: Matcher = None, *, times: int = 1) -> Fault:
        """Hold the next ``times`` matching replies for ``seconds`` each."""
        return self._add(Fault("delay_reply", match, times, seconds=seconds))

    def drop_request(self, match: Matcher = None, *, times: int = 1) -> Fault:
        """Swallow the next matching request (Redis never sees it); the connection goes silent."""
        return self._add(Fault("drop_request", match, times))

    def stall_on(
        self, seconds: float, match: Matcher = None, *, direction: Direction = "down"
    ) -> Fault:
        """Once the next matching request went up to Redis, stall ``direction`` for ``seconds``.

        With ``"down"`` (the default) the request runs and neither its reply nor
        anything else comes back until the stall ends: a server or network that
        freezes just as the call goes out.
        """
        return self._add(Fault("stall", match, 1, seconds=seconds, direction=direction))

    def clear(self) -> None:
        """Disarm every fault, end any stall and reply delay (requests stay counted)."""
        with self._guard:
            self._faults.clear()
        self.reply_delay = 0.0
        self.resume()

    def stall(self, seconds: float = MAX_STALL, direction: Direction = "both") -> None:
        """Stop forwarding in ``direction`` for ``seconds`` (at most :data:`MAX_STALL`).

        ``"up"`` holds requests (Redis does not see them), ``"down"`` holds
        replies (Redis ran the commands), ``"both"`` holds everything.
        Held bytes go through, in order, when the stall ends.
        """
        until = time.monotonic() + min(seconds, MAX_STALL)
        for side in ("up", "down") if direction == "both" else (direction,):
            self._stall_until[side] = until

    def resume(self) -> None:
        """End any stall now."""
        self._stall_until = {"up": 0.0, "down": 0.0}

    @contextlib.contextmanager
    def stalled(self, direction: Direction = "both") -> Iterator[None]:
        """Stall ``direction`` for the ``with`` block."""
        self.stall(MAX_STALL, direction)
        try:
            yield
        finally:
            self.resume()

    def delay(self, seconds: float) -> None:
        """Delay every reply by ``seconds`` from now on (0 to stop)."""
        self.reply_delay = seconds

    def cut_all(self) -> int:
        """Reset every open connection now; returns how many there were."""
        loop = self._loop
        if loop is None:
            return 0
        count = len(self._conns)
        done = threading.Event()

        def cut() -> None:
            for conn in list(self._conns):
                conn.abort()
            done.set()

        loop.call_soon_threadsafe(cut)
        done.wait(CLOSE_TIMEOUT)
        return count

    @property
    def connections(self) -> int:
        """Client connections open through the proxy now."""
        return len(self._conns)

    def count(self, match: Matcher = None) -> int:
        """How many requests seen so far match (``None``: all but setup commands)."""
        with self._guard:
            return sum(1 for args in self.requests if _matches(match, args))

    def reset_counts(self) -> None:
        with self._guard:
            self.requests.clear()
