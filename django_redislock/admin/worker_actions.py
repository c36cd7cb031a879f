"""Worker control from the Workers page: quiet, resume, stop, through the workers registry.

The command is left in the registry's control hash
(:func:`~django_redislock.queue.workers.send_command`) and the worker takes it with
its next heartbeat, so it acts within one ``WORKER_HEARTBEAT``: "quiet" claims
nothing more and lets running tasks finish, "resume" claims again, "stop" stops it
gracefully (as SIGTERM). Like the other actions: ``manage_tasks``, a confirmation
page on GET, the command on POST (CSRF-checked by the admin), a ``LogEntry``, a
message, a redirect. A worker that is gone (not in the registry) is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from ..backends.redis import RedisQueueBackend
from ..handlers import queues
from ..models import MANAGE_TASKS
from ..queue.workers import COMMANDS, WorkerInfo, list_workers, send_command
from .common import REDIS_ERRORS, log, read, render, require, unquote, url
from .data import supports_scripts

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

VERBS = {"quiet": "Quiet", "resume": "Resume", "stop": "Stop"}
EXPLAIN = {
    "quiet": "It claims no more tasks; the ones it is running finish. Resume undoes it.",
    "resume": "It claims tasks again.",
    "stop": "It stops as on SIGTERM: running tasks finish, unstarted ones go back to the queue, "
    "and the process exits (whatever supervises it may start it again).",
}


def find_worker(backend: RedisQueueBackend, worker_id: str) -> WorkerInfo | None:
    for worker in list_workers(backend).workers:
        if worker.id == worker_id:
            return worker
    return None


def worker_action(
    model_admin: ModelAdmin[Any], request: HttpRequest, *, alias: str, worker_id: str, command: str
) -> HttpResponse:
    """Quiet / resume / stop one worker: a confirmation page on GET, the command on POST."""
    require(request, MANAGE_TASKS)
    alias, worker_id = unquote(alias), unquote(worker_id)
    if command not in COMMANDS:
        raise Http404(f"no worker command {command!r}")
    backend = queues[alias] if alias in queues else None  # noqa: SIM401 (no .get on the handler)
    if not supports_scripts(backend):
        raise Http404(f"REDISLOCK_QUEUES has no Redis alias {alias!r}")
    back = url("workers")
    verb = VERBS[command]
    try:
        worker = read(lambda: find_worker(backend, worker_id), key=f"admin-workers:{alias}")
        if worker is None:
            messages.warning(request, f"Worker {worker_id} is not running any more.")
            return HttpResponseRedirect(back)
        name = f"{worker.host}:{worker.pid}"
        if request.method != "POST":
            return render(
                model_admin,
                request,
                "worker_confirm.html",
                f"{verb} worker {name}",
                crumbs=[("Workers", back), (f"{verb} {name}", "")],
                worker=worker,
                name=name,
                command=command,
                verb=verb,
                explain=EXPLAIN[command],
                back_url=back,
            )
        send_command(backend, worker_id, command)
    except REDIS_ERRORS as exc:
        messages.error(request, f"{verb} worker {worker_id} failed: {exc}")
        return HttpResponseRedirect(back)
    log(
        request,
        CHANGE,
        [(f"worker:{alias}:{worker_id}", f"worker {name}")],
        f"{verb} worker {name} ({worker_id}) on alias {alias!r}.",
    )
    messages.success(request, f"{verb}: sent to worker {name}; it acts at its next heartbeat.")
    return HttpResponseRedirect(back)
