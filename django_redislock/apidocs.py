"""The API reference, generated as plain Markdown from the docstrings.

``python -m django_redislock.docs api`` prints it; it is ``docs/api.md`` of the repository (a
test keeps the two equal). Plain Markdown rather than Sphinx ``automodule`` directives, so the
reference reads on GitHub and on disk, where the other pages link to it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: ``(section, [(target, members)])``. A target is a module, or ``module:Object`` for one
#: class or function. ``members``: None for every public member, ``()`` for the module's
#: docstring alone, or the names to show (a class's methods, a module's members).
SECTIONS: list[tuple[str, list[tuple[str, tuple[str, ...] | None]]]] = [
    (
        "Handlers",
        [("django_redislock.handlers", ("LockHandler", "QueueHandler", "BackendHandler"))],
    ),
    ("Backend contract", [("django_redislock.backends.base", None)]),
    (
        "Locks",
        [
            ("django_redislock.locking.base", ("BaseLock",)),
            ("django_redislock.locking.calls", ()),
            ("django_redislock.locking.holding", ()),
            ("django_redislock.locking.mutex", ("Lock",)),
            ("django_redislock.locking.readwrite", ("ReadWriteLock", "ReadLock", "WriteLock")),
            ("django_redislock.locking.fair", ("FairLock",)),
            ("django_redislock.locking.latch", ("CountDownLatch",)),
            ("django_redislock.locking.fencing", ("fenced_update",)),
            ("django_redislock.locking.index", ("HeldLock", "LockPage")),
            ("django_redislock.locking.watchdog", ("Watchdog",)),
            ("django_redislock.decorators", ("distributed_lock",)),
        ],
    ),
    (
        "Rate limits",
        [
            ("django_redislock.locking.limiter", ("RateLimiter", "Admission")),
            ("django_redislock.decorators.rate", ("rate_limited",)),
        ],
    ),
    (
        "Coordination",
        [
            ("django_redislock.locking.semaphore", ("Semaphore", "Permit")),
        ],
    ),
    (
        "Queue",
        [
            ("django_redislock.queue:Queue", None),
            ("django_redislock.queue:Task", None),
            ("django_redislock.queue:Claim", None),
            ("django_redislock.validation:parse_rate", None),
            ("django_redislock.queue.registry:task", None),
            (
                "django_redislock.queue.registry:TaskFunction",
                (
                    "delay",
                    "enqueue",
                    "enqueue_many",
                    "queue",
                    "run",
                    "check_call",
                    "result_of",
                    "s",
                ),
            ),
            ("django_redislock.queue.registry:Enqueued", ()),
            (
                "django_redislock.queue.handles:ResultHandle",
                ("status", "status_async", "result", "result_async", "task_id"),
            ),
            ("django_redislock.queue.results:ResultStatus", ()),
            ("django_redislock.queue.canvas:Signature", ("delay",)),
            ("django_redislock.queue.canvas:chain", ("delay",)),
            ("django_redislock.queue.canvas:group", ("delay",)),
            ("django_redislock.queue.canvas:chord", ("delay",)),
            (
                "django_redislock.queue.canvas:WorkflowHandle",
                ("state", "failed_id", "error", "info", "result"),
            ),
            ("django_redislock.queue.registry:task_modules", None),
            ("django_redislock.queue.worker:Worker", ("run", "stop", "current")),
            ("django_redislock.queue.pool_thread", ()),
            ("django_redislock.queue.pool_async", ()),
            ("django_redislock.queue.limits", ("limits_of", "keep_for", "LimitWatch", "alarm")),
            ("django_redislock.validation:check_limits", None),
        ],
    ),
    (
        "Workers registry",
        [
            (
                "django_redislock.queue.workers",
                (
                    "list_workers",
                    "list_workers_async",
                    "WorkerList",
                    "WorkerInfo",
                    "CurrentTask",
                    "beat",
                    "leave",
                ),
            ),
            ("django_redislock.queue.heartbeat", ("Registration", "register")),
        ],
    ),
    (
        "Inventory",
        [
            ("django_redislock.inventory.stock", ("Stock",)),
            (
                "django_redislock.inventory.records",
                ("TakeResult", "Take", "Reservation", "StockStats"),
            ),
        ],
    ),
    ("Redis backends", [("django_redislock.backends.redis", None)]),
    (
        "Redlock backend",
        [
            ("django_redislock.backends.redlock", ("RedlockBackend",)),
            ("django_redislock.redlock.lock", ("RedlockLock",)),
            ("django_redislock.redlock.quorum", ("QuorumMutex", "as_lock_backend")),
            ("django_redislock.redlock.masters", ("Master",)),
            ("django_redislock.locking.replicas", ()),
        ],
    ),
    (
        "The direct request path",
        [
            ("django_redislock.calls.direct", ("DirectSender", "direct_pool", "direct_sender")),
            ("django_redislock.locking.transport", ()),
        ],
    ),
    ("Lua scripts", [("django_redislock.scripts", ("source", "fragment", "names"))]),
    ("Exceptions", [("django_redislock.exceptions", None)]),
    ("Signals", [("django_redislock.signals", None)]),
    (
        "Connections and the embedded server",
        [
            (
                "django_redislock.connections",
                ("create_client", "create_async_client", "location_errors", "ClientCache"),
            ),
            (
                "django_redislock.embedded",
                ("ensure_server", "stop_server", "server_pid", "users", "find_binary"),
            ),
        ],
    ),
    (
        "Django tasks backend",
        [
            ("django_redislock.contrib.tasks.backend", ("RedisTaskBackend",)),
            ("django_redislock.contrib.tasks.runner", ("django_task_function", "find_task")),
        ],
    ),
    ("Celery", [("django_redislock.contrib.celery", None)]),
    (
        "Metrics",
        [
            ("django_redislock.metrics.collect", ("collect",)),
            ("django_redislock.metrics.views", ("metrics", "metrics_json", "denied")),
            ("django_redislock.metrics.histograms", ("LockTimings", "Histogram", "BUCKETS")),
        ],
    ),
    (
        "Periodic tasks",
        [
            (
                "django_redislock.periodic.registry",
                ("periodic_task", "entry_schedule", "settings_schedules"),
            ),
            ("django_redislock.periodic.schedules", ("Schedule", "schedule")),
            ("django_redislock.periodic.scheduler", ("Scheduler", "redis_clock")),
        ],
    ),
]

HEADER = """\
# API reference

<!-- Generated by `python -m django_redislock.docs api > docs/api.md` from the docstrings,
     on Python {python} with Django {django} (signatures and inherited docstrings may differ
     on others); tests/test_docs.py checks that it is current there. -->

The public modules, classes and functions, with their signatures and docstrings. The other
pages say how to use them; this page is what `help()` would print, in one place.
"""

#: reST inline markup of the docstrings, shown as Markdown code.
ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")
ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def markdown(doc: str | None) -> str:
    """A docstring as Markdown: ````x```` and ``:role:`x``` become `` `x` ``."""
    if not doc:
        return ""
    text = ROLE.sub(r"`\1`", inspect.cleandoc(doc)).replace("``", "`")
    return text.strip() + "\n"


def signature(obj: Any) -> str:
    """``(a, b=1) -> T`` without ``self``, stable across runs (no object addresses)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    params = [
        p.replace(annotation=unquoted(p.annotation))
        for name, p in sig.parameters.items()
        if name not in ("self", "cls")
    ]
    sig = sig.replace(parameters=params, return_annotation=unquoted(sig.return_annotation))
    return ADDRESS.sub("", str(sig))


def unquoted(annotation: Any) -> Any:
    """A string annotation (``from __future__ import annotations``) shown without quotes."""
    if not isinstance(annotation, str):
        return annotation
    return type(annotation, (), {"__module__": "builtins", "__qualname__": annotation})


def attribute_comments(module: Any) -> dict[str, str]:
    """``#:`` comments above module-level assignments, by name (Sphinx's convention)."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        comment: list[str] = []
        index = node.lineno - 2
        while index >= 0 and lines[index].strip().startswith("#:"):
            comment.insert(0, lines[index].strip()[2:].strip())
            index -= 1
        for target in targets:
            if isinstance(target, ast.Name) and comment:
                found[target.id] = " ".join(comment)
    return found


def public_names(module: Any) -> list[str]:
    """``__all__``, or the public classes and functions defined in the module, in source order."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    own = [
        (inspect.getsourcelines(value)[1], name)
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == module.__name__
    ]
    names = [name for _, name in sorted(own)]
    return names + [name for name in attribute_comments(module) if name not in names]


def class_members(cls: type) -> list[str]:
    """Public methods and properties the class (or a base of this package) defines."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("django_redislock"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in names:
                continue
            routine = callable(value) and not isinstance(value, type)
            if routine or isinstance(value, (property, classmethod, staticmethod)):
                names.append(name)
    return names


def render_member(owner: type, name: str) -> str:
    raw = inspect.getattr_static(owner, name)
    value = getattr(owner, name)
    if isinstance(raw, property):
        return f"**`{owner.__name__}.{name}`** (property)\n\n{markdown(raw.__doc__)}"
    return f"**`{owner.__name__}.{name}{signature(value)}`**\n\n{markdown(inspect.getdoc(value))}"


def render_object(
    name: str, value: Any, members: tuple[str, ...] | None, note: str, level: int = 4
) -> str:
    """One class (with its members), function or documented value, under a ``level`` heading."""
    mark = "#" * level
    if inspect.isclass(value):
        bases = ", ".join(
            b.__name__ for b in value.__bases__ if b is not object and b.__name__ != "Generic"
        )
        head = f"{mark} class `{name}`" + (f" ({bases})" if bases else "")
        sig = signature(value) if "__init__" in vars(value) or "__new__" in vars(value) else ""
        parts = [head, f"`{name}{sig}`" if sig else "", markdown(inspect.getdoc(value))]
        chosen = class_members(value) if members is None else list(members)
        parts += [render_member(value, member) for member in chosen]
    elif callable(value) and not hasattr(value, "send"):
        parts = [f"{mark} `{name}{signature(value)}`", markdown(inspect.getdoc(value))]
    else:
        kind = type(value).__name__
        parts = [f"{mark} `{name}` ({kind})", markdown(note)]
    return "\n".join(part.rstrip("\n") + "\n" for part in parts if part)


def render_target(target: str, members: tuple[str, ...] | None) -> Iterator[str]:
    module_name, _, object_name = target.partition(":")
    module = importlib.import_module(module_name)
    if object_name:
        yield render_object(object_name, getattr(module, object_name), members, "", level=3)
        return
    yield f"### `{module_name}`\n\n{markdown(module.__doc__)}"
    comments = attribute_comments(module)
    names = public_names(module) if members is None else list(members)
    for name in names:
        yield render_object(name, getattr(module, name), None, comments.get(name, ""))


def api_page() -> str:
    """The API reference as Markdown (the content of ``docs/api.md``)."""
    import django

    python = ".".join(map(str, sys.version_info[:2]))
    chunks = [HEADER.format(python=python, django=".".join(map(str, django.VERSION[:2])))]
    for section, targets in SECTIONS:
        chunks.append(f"## {section}\n")
        for target, members in targets:
            chunks.extend(render_target(target, members))
    text = "\n".join(chunk.rstrip("\n") + "\n" for chunk in chunks)
    return re.sub(r"\n{3,}", "\n\n", text)


def configured() -> Callable[[], str]:
    """``api_page``, after a minimal Django set-up when none was made (``python -m ...``)."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            INSTALLED_APPS=[
                "django.contrib.contenttypes",
                "django.contrib.auth",
                "django.contrib.admin",
                "django_redislock",
            ]
        )
        django.setup()
    return api_page
