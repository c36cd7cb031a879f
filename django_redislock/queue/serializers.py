"""Payload serializers: JSON with Django's encoder by default, pickle only on request.

JSON is the default because a queue payload outlives the code that wrote it and
is read by workers of another deploy: JSON cannot execute code when loaded and
stays readable in the admin. ``DjangoJSONEncoder`` writes dates, times,
decimals and UUIDs as strings (they come back as strings). Pickle round-trips
any Python object but runs code on load, so it is opt-in
(``OPTIONS["SERIALIZER"] = "pickle"``) and system check ``redislock.W002``
warns about it.
"""

from __future__ import annotations

import json
import pickle
from typing import Any, Protocol

from django.core.serializers.json import DjangoJSONEncoder

from ..exceptions import InvalidArgument


class Serializer(Protocol):
    """Turns payloads into bytes and back."""

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class JSONSerializer:
    """Compact JSON with :class:`~django.core.serializers.json.DjangoJSONEncoder`."""

    def __init__(self) -> None:
        # one encoder per serializer, not one per call: enqueue is a hot path
        self.encoder = DjangoJSONEncoder(separators=(",", ":"), allow_nan=False)

    def dumps(self, value: Any) -> bytes:
        try:
            text = self.encoder.encode(value)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"payload is not JSON-serializable: {exc}") from exc
        return text.encode()

    def loads(self, data: bytes) -> Any:
        return json.loads(data) if data else None


class PickleSerializer:
    """Pickle (opt-in): any picklable object; never load data from an untrusted Redis."""

    def dumps(self, value: Any) -> bytes:
        try:
            return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"payload cannot be pickled: {exc}") from exc

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data) if data else None  # opt-in, see W002


SERIALIZERS: dict[str, type[Serializer]] = {"json": JSONSerializer, "pickle": PickleSerializer}


def get_serializer(name: str) -> Serializer:
    """The serializer for ``OPTIONS["SERIALIZER"]``."""
    return SERIALIZERS[name]()
