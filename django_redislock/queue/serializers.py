"""Payload serializers: JSON with Django's encoder by default, pickle only on request.

JSON is the default because a queue payload outlives the code that wrote it and
is read by workers of another deploy: JSON cannot execute code when loaded and
stays readable in the admin. ``DjangoJSONEncoder`` writes dates, times,
decimals and UUIDs as strings (they come back as strings). Pickle round-trips
any Python object but runs code on load, so it is opt-in
(``OPTIONS["SERIALIZER"] = "pickle"``) and system check ``redislock.W002``
warns about it.

A payload is refused at enqueue (``InvalidArgument``) when a worker could not
decode it back: JSON nested deeper than :data:`MAX_DEPTH` levels (the decoder
recurses, and a worker decodes on a deeper stack than the caller encoded on),
or anything over ``OPTIONS["MAX_PAYLOAD_BYTES"]`` (checked by the queue).
"""

from __future__ import annotations

import json
import json.encoder
import pickle
from typing import Any, Protocol

from django.core.serializers.json import DjangoJSONEncoder

from ..exceptions import InvalidArgument

#: Deepest nesting of lists and dicts a JSON payload may have (a worker decodes it recursively).
MAX_DEPTH = 100


class Serializer(Protocol):
    """Turns payloads into bytes and back."""

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class JSONSerializer:
    """Compact JSON with :class:`~django.core.serializers.json.DjangoJSONEncoder`.

    One encoder is built here and shared by threads (``JSONEncoder.encode`` keeps no
    state between calls). It skips the circular-reference check, whose bookkeeping
    costs on every enqueue: a payload that contains itself ends in ``RecursionError``
    instead, reported like any other unserializable payload.

    A dict (every envelope) goes straight to the C encoder that ``encode`` would build
    for it: ``JSONEncoder.iterencode`` builds that encoder anew on every call, which cost
    a third of a small payload's encoding. Without the C accelerator, and for other
    values, ``encode`` itself runs; the text is the same either way.
    """

    def __init__(self) -> None:
        self.encoder = DjangoJSONEncoder(
            separators=(",", ":"), allow_nan=False, check_circular=False
        )
        enc, make = self.encoder, getattr(json.encoder, "c_make_encoder", None)
        #: ``encode``'s own one-shot C encoder (no markers: check_circular is off), or None
        self._chunks: Any = None
        if make is not None:
            self._chunks = make(
                None,
                enc.default,
                json.encoder.encode_basestring_ascii,
                enc.indent,
                enc.key_separator,
                enc.item_separator,
                enc.sort_keys,
                enc.skipkeys,
                enc.allow_nan,
            )

    def dumps(self, value: Any) -> bytes:
        try:
            if type(value) is dict and self._chunks is not None:
                text = "".join(self._chunks(value, 0))
            else:
                text = self.encoder.encode(value)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"payload is not JSON-serializable: {exc}") from exc
        except RecursionError as exc:
            raise InvalidArgument(
                "payload is not JSON-serializable: it contains itself or is nested too deep"
            ) from exc
        if text.count("[") + text.count("{") > MAX_DEPTH:  # cheap; brackets in strings count too
            check_depth(value)
        return text.encode()

    def loads(self, data: bytes) -> Any:
        """``json.loads(data)`` (``None`` for empty data), cheaper for the common case.

        ``json.loads`` of bytes first guesses their encoding (UTF-8, -16 or -32), then
        decodes and parses them. Data that starts with ``{`` or ``[`` followed by a
        non-zero byte is UTF-8 by that guess (every payload this app writes), so it is
        decoded as ``json.loads`` would and parsed with :meth:`json.JSONDecoder.raw_decode`;
        anything else, or a document followed by more text (whitespace, or extra data:
        an error), takes ``json.loads`` itself, so results and errors stay the same.
        """
        if not data:
            return None
        if type(data) is bytes and data[:1] in OPENERS and data[1:2] != b"\x00":
            text = data.decode("utf-8", "surrogatepass")
            value, end = DECODER.raw_decode(text)
            if end == len(text):
                return value
        return json.loads(data)


#: First bytes of a JSON document that ``json.loads`` reads as UTF-8 (see ``loads``).
OPENERS = (b"{", b"[")
#: A decoder with ``json.loads``'s defaults, shared by threads (it keeps no state).
DECODER = json.JSONDecoder()


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse a payload whose lists, tuples and dicts nest deeper than ``limit`` levels.

    Walks the value with an explicit stack (no recursion of its own), and names
    where the limit was crossed (``payload['args'][0][0]...``) so the caller can
    tell which argument it was.
    """
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            where = "".join(f"[{step!r}]" for step in path[:6])
            more = "..." if len(path) > 6 else ""
            raise InvalidArgument(
                f"payload{where}{more} is nested more than {limit} levels deep; "
                "a worker could not decode it"
            )
        for key, child in children:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1, (*path, key) if len(path) < 7 else path))


class PickleSerializer:
    """Pickle (opt-in): any picklable object; never load data from an untrusted Redis."""

    def dumps(self, value: Any) -> bytes:
        try:
            return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"payload cannot be pickled: {exc}") from exc
        except RecursionError as exc:
            raise InvalidArgument("payload cannot be pickled: it is nested too deep") from exc

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data) if data else None  # opt-in, see W002


SERIALIZERS: dict[str, type[Serializer]] = {"json": JSONSerializer, "pickle": PickleSerializer}


def get_serializer(name: str) -> Serializer:
    """The serializer for ``OPTIONS["SERIALIZER"]``."""
    return SERIALIZERS[name]()
