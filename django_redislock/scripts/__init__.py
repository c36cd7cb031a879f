"""The Lua scripts of this app, one ``.lua`` file each, loaded by name.

Every file starts with a ``KEYS[..] / ARGV[..] / returns`` comment, declares
every key it touches in ``KEYS`` (so each script runs on one cluster slot) and
never builds key names inside Lua. Every call goes through
:mod:`django_redislock.calls.script` (``EVALSHA``, loading the source after ``NOSCRIPT``).

Redis Lua has no ``require``, so code that two scripts share lives in
``fragments/<name>.lua`` (a ``local function``) and a script pulls it in with a
line ``-- include: <name>``, replaced by the fragment when the source is read.

A script runs its whole body on every call, ``local function`` definitions and constant
tables included (Redis caches the compiled chunk, not its locals). So an include keeps only
the fragment's definitions the script reaches, directly or through another kept one: the
enqueue script, which uses two of the priority fragment's six functions and one of the rates
fragment's three, no longer builds the other closures and tables on every call (about 2.5 µs
of a 12-13.5 µs enqueue).
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_INCLUDE = re.compile(r"^-- include: (\w+)$", re.MULTILINE)
#: A top-level definition of a fragment: ``local function name(`` or ``local a, b = ...``.
_DEFINES = re.compile(r"^local (?:function (\w+)|([\w, ]+?)\s*=)")


@cache
def source(name: str) -> str:
    """Return the Lua source of the script ``name`` (file ``<name>.lua``), includes expanded.

    Each included fragment brings only the definitions the script uses (see the module doc).
    """
    text = files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")
    included = {
        found.group(1): _pieces(fragment(found.group(1))) for found in _INCLUDE.finditer(text)
    }
    flat = [(name, piece) for name, (_, pieces) in included.items() for piece in pieces]
    kept = _reached(_INCLUDE.sub("", text), [piece for _, piece in flat])
    used = {(name, code) for at, (name, (_, code)) in enumerate(flat) if at in kept}

    def expand(found: re.Match[str]) -> str:
        header, pieces = included[found.group(1)]
        codes = [code for _, code in pieces if (found.group(1), code) in used]
        return "\n".join([header, *codes])

    return _INCLUDE.sub(lambda found: expand(found).rstrip("\n"), text)


_Piece = tuple[frozenset[str], str]


def _pieces(code: str) -> tuple[str, list[_Piece]]:
    """Split a fragment into its header comment and its top-level definitions.

    A definition starts at a ``local`` line in column 0 and carries the comment lines right
    above it (except the first, whose comments are the fragment's header); it runs to the
    next definition's comments.
    """
    lines = code.split("\n")
    starts = [i for i, line in enumerate(lines) if _DEFINES.match(line)]
    if not starts:
        return code, []
    bounds = [starts[0]]
    for start in starts[1:]:
        begin = start
        while begin - 1 > bounds[-1] and lines[begin - 1].startswith("--"):
            begin -= 1
        bounds.append(begin)
    pieces: list[_Piece] = []
    for begin, end in zip(bounds, [*bounds[1:], len(lines)], strict=True):
        found = _DEFINES.match(lines[starts[len(pieces)]])
        assert found is not None
        defined = found.group(1) or found.group(2)
        names = frozenset(part.strip() for part in defined.split(","))
        pieces.append((names, "\n".join(lines[begin:end])))
    return "\n".join(lines[: starts[0]]), pieces


def _reached(body: str, pieces: list[_Piece]) -> set[int]:
    """The positions of the pieces ``body`` uses, directly or through a used piece."""
    kept: set[int] = set()
    users = [body]
    while users:
        user = users.pop()
        for at, (names, code) in enumerate(pieces):
            if at not in kept and any(re.search(rf"\b{re.escape(w)}\b", user) for w in names):
                kept.add(at)
                users.append(code)
    return kept


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
