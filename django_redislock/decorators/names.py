"""What one decorated call's lock is named and held as: name templates and named owners."""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable
from typing import Any

from ..exceptions import InvalidArgument
from ..locking.keys import check_name

_formatter = string.Formatter()


class BadLockName(InvalidArgument):
    """A call's arguments give no usable lock name (a decorated view answers 400)."""


#: Owners named by a string that an integration resolves per call (``"celery"``:
#: the running Celery task's id); filled by :func:`register_owner`.
named_owners: dict[str, Callable[[], str | None]] = {}


def register_owner(name: str, resolve: Callable[[], str | None]) -> None:
    """Make ``owner=name`` hold locks as ``resolve()`` (``None``: a random token).

    Integrations register here (see :mod:`django_redislock.contrib`) so that
    this module never imports them.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_owner: name must be a non-empty string, got {name!r}")
    named_owners[name] = resolve


def check_template(name: Any) -> None:
    """Raise :class:`InvalidArgument` unless ``name`` is a usable name or name template."""
    if not isinstance(name, str):
        raise InvalidArgument(f"name must be a str or a callable, not {type(name).__name__}")
    try:
        fields = [field for _, field, _, _ in _formatter.parse(name) if field is not None]
    except ValueError as exc:
        raise InvalidArgument(f"name template {name!r} is malformed: {exc}") from exc
    if not fields:
        check_name(name)
    elif not name.strip():
        raise InvalidArgument("name must be a non-empty string")


def bound_arguments(func: Callable[..., Any], args: Any, kwargs: Any) -> dict[str, Any]:
    """The call's arguments by parameter name, with ``**kwargs`` flattened in.

    The signature is that of the innermost wrapped function; when the call does
    not fit it (Django's ``method_decorator`` hands over a bound method whose
    ``__wrapped__`` still takes ``self``), that of ``func`` itself.
    """
    signature = inspect.signature(func)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        try:
            signature = inspect.signature(func, follow_wrapped=False)
            bound = signature.bind(*args, **kwargs)
        except (TypeError, ValueError):
            raise TypeError(f"{getattr(func, '__qualname__', func)}(): {exc}") from exc
    bound.apply_defaults()
    values = dict(bound.arguments)
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            values.update(values.pop(param.name, {}))
    return values
