"""The Lua scripts of this app, one ``.lua`` file each, loaded by name.

Every file starts with a ``KEYS[..] / ARGV[..] / returns`` comment, declares
every key it touches in ``KEYS`` (so each script runs on one cluster slot) and
never builds key names inside Lua. Every call goes through
:mod:`django_redislock.calls.script` (``EVALSHA``, loading the source after ``NOSCRIPT``).

Redis Lua has no ``require``, so code that two scripts share lives in
``fragments/<name>.lua`` (a ``local function``) and a script pulls it in with a
line ``-- include: <name>``, replaced by the fragment when the source is read.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_INCLUDE = re.compile(r"^-- include: (\w+)$", re.MULTILINE)


@cache
def source(name: str) -> str:
    """Return the Lua source of the script ``name`` (file ``<name>.lua``), includes expanded."""
    text = files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")
    return _INCLUDE.sub(lambda found: fragment(found.group(1)), text)


def fragment(name: str) -> str:
    """Return the shared Lua code ``fragments/<name>.lua`` (a script includes it by name)."""
    path = files(__package__).joinpath("fragments").joinpath(f"{name}.lua")
    if not path.is_file():
        raise LookupError(f"Lua fragment {name!r} not found (fragments/{name}.lua)")
    return path.read_text(encoding="utf-8").rstrip("\n")


def names() -> list[str]:
    """Return the names of all scripts shipped with the app."""
    return sorted(
        entry.name[: -len(".lua")]
        for entry in files(__package__).iterdir()
        if entry.name.endswith(".lua")
    )
