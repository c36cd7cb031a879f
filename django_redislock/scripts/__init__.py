"""The Lua scripts of this app, one ``.lua`` file each, loaded by name.

Every file starts with a ``KEYS[..] / ARGV[..] / returns`` comment, declares
every key it touches in ``KEYS`` (so each script runs on one cluster slot) and
never builds key names inside Lua. Scripts are registered lazily per client
with ``register_script`` (EVALSHA, falling back to loading the source).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def source(name: str) -> str:
    """Return the Lua source of the script ``name`` (file ``<name>.lua``)."""
    return files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


def names() -> list[str]:
    """Return the names of all scripts shipped with the app."""
    return sorted(
        entry.name[: -len(".lua")]
        for entry in files(__package__).iterdir()
        if entry.name.endswith(".lua")
    )
