"""A seeded fault-injecting HTTP JSON-RPC proxy for reliability tests (loopback only).

Agents talk to the proxy instead of the node. Each request draws one outcome from a seeded
random stream: forwarded unchanged, forwarded after extra latency, answered with HTTP 503 or 429
(what an overloaded provider returns), the connection dropped before forwarding, the connection
dropped *after* forwarding (the node acted, e.g. took a transaction, but the client never hears
so: the case that tempts a naive sender to send twice), or held past the client's timeout.
`counts` records what was injected, so a trial can report it.
"""

from __future__ import annotations

import random
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("http_503", "http_429", "drop_before", "drop_after", "hang", "latency")


@dataclass
class FaultRates:
    """Probability of each fault per request (the rest are forwarded untouched)."""

    http_503: float = 0.03
    http_429: float = 0.03
    drop_before: float = 0.03
    drop_after: float = 0.02
    hang: float = 0.005
    latency: float = 0.15
    max_latency_s: float = 0.4
    hang_s: float = 11.0  # longer than the agents' 10 s HTTP timeout


@dataclass
class FaultProxy:
    upstream: str
    seed: int
    rates: FaultRates = field(default_factory=FaultRates)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.enabled = True

    def draw(self) -> str:
        """The next outcome of the seeded stream (thread-safe)."""
        with self._lock:
            x = self._rng.random()
            outcome = "forward"
            if self.enabled:
                acc = 0.0
                for name in FAULTS:
                    acc += getattr(self.rates, name)
                    if x < acc:
                        outcome = name
                        break
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            return outcome

    def latency(self) -> float:
        with self._lock:
            return self._rng.uniform(0.0, self.rates.max_latency_s)

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outcome = proxy.draw()
                if outcome == "drop_before":
                    self.close_connection = True
                    return
                if outcome == "hang":
                    time.sleep(proxy.rates.hang_s)
                    self.close_connection = True
                    return
                if outcome in ("http_503", "http_429"):
                    self._reply(int(outcome[-3:]), b"injected fault", "text/plain")
                    return
                if outcome == "latency":
                    time.sleep(proxy.latency())
                try:
                    status, data = proxy.forward(body)
                except OSError:
                    self.close_connection = True
                    return
                if outcome == "drop_after":
                    self.close_connection = True
                    return
                self._reply(status, data, "application/json")

            def _reply(self, status: int, data: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def forward(self, body: bytes) -> tuple[int, bytes]:
        req = urllib.request.Request(
            self.upstream, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class SilentServer:
    """A loopback TCP server that accepts every connection and never answers: what a withholding
    solver puts behind its blob URL (a read of it ends only by the reader's own timeout).
    Accepted sockets are held open, unread, until `stop`; `accepted` counts them."""

    def __init__(self) -> None:
        import socket

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(256)
        self._held: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self.accepted = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:  # the accept timeout, or the socket closed by stop
                continue
            self._held.append(conn)
            self.accepted += 1

    def start(self) -> SilentServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._sock.close()

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
