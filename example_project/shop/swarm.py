"""Concurrent buyers over real HTTP (the demo and the end-to-end benchmark use it).

Each thread keeps one keep-alive connection to the server on 127.0.0.1 and
posts to the buy endpoint; the CSRF cookie is fetched once and shared, as a
browser tab would share it.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.cookies import SimpleCookie


@dataclass
class Answer:
    """One buy request: who, the HTTP status, the take result and how long it took."""

    buyer: str
    status: int
    result: str
    order: str | None
    seconds: float


@dataclass
class Swarm:
    """Buyers of one sale against ``http://127.0.0.1:<port>``."""

    port: int
    sale_id: int
    concurrency: int = 32
    timeout: float = 30.0
    csrf: str = ""
    _local: threading.local = field(default_factory=threading.local)

    def fetch_csrf(self) -> None:
        """GET the sale page once for the CSRF cookie every buyer then sends."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request("GET", f"/sale/{self.sale_id}/")
            response = conn.getresponse()
            response.read()
            cookie = SimpleCookie(response.getheader("Set-Cookie") or "")
        finally:
            conn.close()
        if "csrftoken" not in cookie:
            raise RuntimeError(f"the sale page set no CSRF cookie (HTTP {response.status})")
        self.csrf = cookie["csrftoken"].value

    def warm_up(self, requests: int) -> None:
        """Concurrent GETs of the stock endpoint, so every worker has loaded Django and Redis."""
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="warm") as pool:
            list(pool.map(self._get_stock, range(requests), timeout=self.timeout * 4))

    def _get_stock(self, _: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request("GET", f"/sale/{self.sale_id}/stock.json")
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def buy(self, buyer: str) -> Answer:
        """One POST to the buy endpoint (a connection error counts as status 0)."""
        body = urllib.parse.urlencode({"buyer": buyer, "qty": 1})
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"csrftoken={self.csrf}",
            "X-CSRFToken": self.csrf,
        }
        start = time.perf_counter()
        try:
            conn = self._connection()
            conn.request("POST", f"/sale/{self.sale_id}/buy", body, headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._local.conn = None
            return Answer(buyer, 0, type(exc).__name__, None, time.perf_counter() - start)
        seconds = time.perf_counter() - start
        return Answer(buyer, response.status, *parse(data), seconds)

    def run(self, buyers: list[str]) -> list[Answer]:
        """Every buyer's request, ``concurrency`` at a time; answers in buyer order."""
        if not self.csrf:
            self.fetch_csrf()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="buyer") as pool:
            return list(pool.map(self.buy, buyers, timeout=self.timeout * 4 + len(buyers)))


def parse(data: bytes) -> tuple[str, str | None]:
    """``(result, order)`` from a buy response body."""
    import json

    try:
        body = json.loads(data)
    except ValueError:
        return "not-json", None
    return str(body.get("result") or body.get("error") or "?"), body.get("order")


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (0.0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]
