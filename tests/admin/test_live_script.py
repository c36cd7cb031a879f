"""The live-refresh script survives failed polls: run in Node with a small fake page.

Issue 28: after one failed poll (a 6 s Redis stall) the script stopped for good
and said "stopped (the server answered 200)". It must keep the tables, mark them
stale, retry with a growing delay and come back by itself. The real browser walk
needs Chromium (tests/admin/test_browser*.py); this drives the same script, taken
from the template, with a fake DOM, fake timers and a scripted ``fetch``, so the
sequence of states is checked wherever Node is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

TEMPLATE = (
    Path(__file__).parents[2] / "django_redislock/templates/admin/django_redislock/_live.html"
)
NODE = shutil.which("node")

HARNESS = r"""
const log = [];
const timers = [];
const replies = REPLIES;
function element(extra) {
  const classes = new Set();
  return Object.assign({
    textContent: "", innerHTML: "old", value: "", dataset: {}, listeners: {},
    classList: {toggle(name, on) { on ? classes.add(name) : classes.delete(name); },
                contains(name) { return classes.has(name); }},
    addEventListener(type, fn) { this.listeners[type] = fn; }, blur() {},
  }, extra);
}
const elements = {
  "live-status": element({dataset: {interval: "5", regions: "rows"}}),
  "live-every": element({}),
  "rows": element({}),
};
globalThis.document = {
  hidden: false, activeElement: null,
  getElementById: (id) => elements[id] || null,
  querySelector: () => null,
  addEventListener() {},
};
globalThis.window = {location: {href: "http://testserver/admin/page/"}, localStorage: null};
globalThis.setTimeout = (fn, ms) => { timers.push({fn, ms}); return timers.length; };
globalThis.clearTimeout = () => {};
globalThis.fetch = async (target) => {
  const reply = replies.shift();
  if (reply.throws) throw new TypeError("network");
  return {
    ok: reply.status < 400, status: reply.status,
    headers: {get: () => reply.type},
    json: async () => reply.body,
  };
};
SCRIPT
(async () => {
  for (let step = 0; step < STEPS; step++) {
    const timer = timers.pop();
    if (!timer) { log.push({status: elements["live-status"].textContent, delay: null}); break; }
    timers.length = 0;
    await timer.fn();
    await new Promise((done) => setImmediate(done));
    log.push({
      delay: timers.length ? timers[timers.length - 1].ms : null,
      status: elements["live-status"].textContent,
      stale: elements["rows"].classList.contains("stale"),
      rows: elements["rows"].innerHTML,
    });
  }
  console.log(JSON.stringify(log));
})();
"""


def run_script(replies: list[dict[str, object]]) -> list[dict[str, object]]:
    assert NODE is not None
    html = TEMPLATE.read_text()
    script = html.split("<script>", 1)[1].split("</script>", 1)[0]
    source = (
        HARNESS.replace("REPLIES", json.dumps(replies))
        .replace("STEPS", str(len(replies)))
        .replace("SCRIPT", script)
    )
    done = subprocess.run(
        [NODE, "-e", source], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    log: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return log


JSON = "application/json"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_failed_polls_are_retried_with_back_off_and_recover() -> None:
    log = run_script(
        [
            {"status": 503, "type": JSON, "body": {"error": "Redis did not answer"}},
            {"throws": True},
            {"status": 200, "type": "text/html; charset=utf-8", "body": None},
            {"status": 200, "type": JSON, "body": {"regions": {"rows": "fresh"}}},
        ]
    )
    first, second, third, back = log
    assert "the server answered 503: Redis did not answer" in str(first["status"])
    assert "retrying in 10 s" in str(first["status"]) and "stale since" in str(first["status"])
    assert first["stale"] is True and first["rows"] == "old" and first["delay"] == 10_000
    assert "no answer" in str(second["status"]) and second["delay"] == 20_000
    assert "a page, not data" in str(third["status"]) and third["delay"] == 40_000
    assert "stopped" not in " ".join(str(entry["status"]) for entry in log)
    assert back["rows"] == "fresh" and back["stale"] is False
    assert "updated" in str(back["status"]) and back["delay"] == 5_000  # the usual pace again


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_back_off_is_capped_at_a_minute() -> None:
    failing = {"status": 503, "type": JSON, "body": {"error": "down"}}
    log = run_script([failing] * 6)
    assert [entry["delay"] for entry in log] == [10_000, 20_000, 40_000, 60_000, 60_000, 60_000]
