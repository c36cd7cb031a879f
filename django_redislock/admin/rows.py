"""A task as the dashboard shows it, and its payload as text that is never deserialized.

A pickled payload written by someone else can't run code in the web process: the pages
show the stored bytes (JSON by default, as text with its ``\\uXXXX`` escapes turned into
characters) and never load them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..queue.records import DEAD, DELAYED, IN_FLIGHT, READY, from_micros
from .common import duration, encode_id

#: The zset a state's tasks live in (1 pending, 2 in flight, 3 dead), as the scripts number them.
WHERE = {READY: 1, DELAYED: 1, IN_FLIGHT: 2, DEAD: 3}


@dataclass
class TaskRow:
    """A task as the dashboard shows it: raw payload text, never deserialized."""

    id: str
    state: str
    score: int
    attempts: int
    payload: str
    size: int
    last_error: str
    now: int
    truncated: bool = False
    urls: dict[str, str] = field(default_factory=dict)
    #: The payload bytes as read (the download view), else b"".
    raw: bytes = b""
    #: The priority level (0, the default, to 9; docs/queue.md "Priorities").
    priority: int = 0
    #: Its recorded runs, oldest first (:mod:`~django_redislock.queue.history`; the task page).
    runs: list[Any] = field(default_factory=list)
    #: When it was queued (server µs), or None when not recorded (queued by another producer
    #: or before enqueue times were kept).
    enqueued: int | None = None

    @property
    def enqueued_at(self) -> datetime | None:
        """``enqueued`` as an aware UTC datetime."""
        return None if self.enqueued is None else from_micros(self.enqueued)

    @property
    def waiting(self) -> str:
        """How long ago it was queued, for the task page ("" when not recorded)."""
        return "" if self.enqueued is None else duration((self.now - self.enqueued) / 1e6)

    @property
    def when(self) -> datetime:
        """Due time (ready, delayed), lease deadline (in flight) or time of death (dead)."""
        return from_micros(self.score)

    @property
    def seconds_from_now(self) -> float:
        return (self.score - self.now) / 1e6

    @property
    def relative(self) -> str:
        """``in 4 min`` or ``3.2 s ago``."""
        seconds = self.seconds_from_now
        return f"in {duration(seconds)}" if seconds >= 0 else f"{duration(-seconds)} ago"

    @property
    def where(self) -> int:
        return WHERE[self.state]

    @property
    def token(self) -> str:
        """``score:id``, the value of the row's checkbox (the score makes stale picks fail).

        The id is %-escaped (see :func:`~.common.encode_id`) so that one with a
        newline comes back unchanged when the browser posts the form.
        """
        return f"{self.score}:{encode_id(self.id)}"

    @property
    def preview(self) -> str:
        """The stored payload text with JSON's ``\\uXXXX`` escapes shown as the characters."""
        return unescape_json(self.payload)

    def pretty(self) -> str:
        """The payload indented when it is (whole) JSON, else as stored, escapes shown as text."""
        if not self.truncated:
            try:
                return json.dumps(json.loads(self.payload), indent=2, ensure_ascii=False)
            except (ValueError, RecursionError):  # not JSON, or nested deeper than it can parse
                pass
        return unescape_json(self.payload)


_ESCAPE = re.compile(
    r"\\\\|\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})"
)


def _unescape(match: re.Match[str]) -> str:
    high, low, single = match.groups()
    if high:
        code = 0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        return chr(code)
    if single:
        code = int(single, 16)
        return chr(code) if not 0xD800 <= code <= 0xDFFF and code >= 0x20 else match.group(0)
    return match.group(0)  # an escaped backslash stays as it is


def unescape_json(text: str) -> str:
    """``text`` with JSON ``\\uXXXX`` escapes (and surrogate pairs) turned into characters.

    For display only, on text that may be cut anywhere (a preview): an escaped
    backslash is kept, so ``\\\\u00e9`` stays literal; lone surrogates and control
    characters stay escaped.
    """
    return _ESCAPE.sub(_unescape, text)


def payload_text(raw: Any, serializer: str) -> str:
    """Stored payload bytes as text; pickles are shown as their bytes' repr, never loaded."""
    data = raw if isinstance(raw, bytes) else str(raw).encode()
    if serializer == "pickle":
        return repr(data)
    return data.decode("utf-8", errors="replace")
