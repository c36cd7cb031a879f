"""The types of what goes into a Redis call and what comes back, shared by the call layer."""

from __future__ import annotations

from typing import Any

#: A key name as redis-py takes it.
Key = str | bytes
#: One argument of a command as redis-py encodes it.
Arg = str | bytes | int | float
#: A RESP reply as redis-py parses it (an int, bytes, None, an error, or a list of
#: replies). It stays untyped here: every caller's parser knows its script's reply shape.
Reply = Any
