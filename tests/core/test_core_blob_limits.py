"""Every blob read is bounded: a remote read ends by its deadline however slowly the server
sends (status line, headers or body), and a blob above the read's size cap is refused, before
reading when its size is announced. Local stores are opened without touching the disk."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.core.blobs import (
    BlobStore,
    BlobTimeout,
    BlobTooLarge,
    HttpBackend,
    LocalDirBackend,
    keccak_address,
    open_blob_store,
)

ADDRESS = keccak_address(b"x")


@contextlib.contextmanager
def http_server(handle: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """A threaded HTTP server whose every GET runs `handle`; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):  # noqa: N802 - http.server's naming
            with contextlib.suppress(OSError):
                handle(self)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def trickle_body(h) -> None:
    """A 20-byte body, one byte every 0.2 s: never idle for a 0.5 s socket timeout."""
    h.send_response(200)
    h.send_header("Content-Length", "20")
    h.end_headers()
    for _ in range(20):
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(0.2)


def trickle_headers(h) -> None:
    """The status line, then a header one byte every 0.2 s, for 8 s."""
    h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(40):
        h.wfile.write(b"a")
        h.wfile.flush()
        time.sleep(0.2)


def timed(fn: Callable[[], object]) -> tuple[float, BaseException | None]:
    start = time.monotonic()
    try:
        fn()
    except Exception as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def test_http_read_of_a_trickling_body_ends_by_its_deadline():
    with http_server(trickle_body) as url:
        took, exc = timed(lambda: HttpBackend(url, timeout_s=0.5).read(ADDRESS))
    assert isinstance(exc, BlobTimeout), exc
    assert took <= 2 * 0.5, f"a read with timeout_s=0.5 took {took:.1f} s"


def test_http_read_of_trickling_headers_ends_by_its_deadline():
    with http_server(trickle_headers) as url:
        took, exc = timed(lambda: HttpBackend(url, timeout_s=0.5).read(ADDRESS, max_bytes=0))
    assert isinstance(exc, BlobTimeout), exc
    assert took <= 2 * 0.5, f"headers held a read with timeout_s=0.5 for {took:.1f} s"


def test_http_read_refuses_an_announced_size_above_the_cap_before_reading():
    def huge(h) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(1 << 40))
        h.end_headers()
        time.sleep(3)  # sends nothing: only the announcement can refuse it in time

    with http_server(huge) as url:
        took, exc = timed(lambda: open_blob_store(url, timeout_s=5).get(ADDRESS))
    assert isinstance(exc, BlobTooLarge), exc
    assert "1099511627776 bytes announced" in str(exc)
    assert took < 2


def test_http_read_stops_at_the_cap_when_the_size_is_not_announced():
    sent: list[int] = []

    def endless(h) -> None:  # no Content-Length: the body ends when the connection closes
        h.send_response(200)
        h.send_header("Connection", "close")
        h.end_headers()
        for _ in range(1000):
            h.wfile.write(b"y" * 4096)
            sent.append(4096)

    with http_server(endless) as url:
        took, exc = timed(lambda: HttpBackend(url, timeout_s=5).read(ADDRESS, max_bytes=10_000))
    assert isinstance(exc, BlobTooLarge), exc
    assert took < 5


def test_http_error_reply_is_read_only_in_part():
    def error(h) -> None:
        h.send_response(500)
        h.send_header("Content-Length", str(1 << 30))
        h.end_headers()
        h.wfile.write(b"e" * 4096)

    with http_server(error) as url:
        took, exc = timed(lambda: HttpBackend(url, timeout_s=2).read(ADDRESS))
    assert "HTTP 500" in str(exc)
    assert took < 2


def test_http_read_of_a_fast_server_is_unchanged():
    data = bytes(range(256)) * 4096  # 1 MiB, more than one chunk

    def fast(h) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    with http_server(fast) as url:
        assert HttpBackend(url, timeout_s=5).read(ADDRESS, max_bytes=len(data)) == data
        with pytest.raises(BlobTooLarge):
            HttpBackend(url, timeout_s=5).read(ADDRESS, max_bytes=len(data) - 1)


def test_a_server_that_never_answers_is_still_a_timeout():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        took, exc = timed(lambda: HttpBackend(url, timeout_s=0.3).read(ADDRESS))
    finally:
        sock.close()
    assert isinstance(exc, BlobTimeout) and "no answer within 0.3 s" in str(exc)
    assert took < 2


def test_local_read_refuses_a_file_above_the_cap(tmp_path: Path):
    store = BlobStore(LocalDirBackend(tmp_path / "blobs"))
    address = store.put(b"z" * 1000)
    assert store.get(address, max_bytes=1000) == b"z" * 1000
    with pytest.raises(BlobTooLarge, match="1000 bytes"):
        store.get(address, max_bytes=999)
    capped = BlobStore(LocalDirBackend(tmp_path / "blobs"), max_bytes=10)
    with pytest.raises(BlobTooLarge):
        capped.get(address)


def test_opening_a_local_store_creates_no_directory(tmp_path: Path):
    target = tmp_path / "a" / "b"
    store = open_blob_store(str(target))
    assert not store.has(keccak_address(b"q"))
    assert not (tmp_path / "a").exists()
    store.put(b"q")  # the first write makes it
    assert store.get(keccak_address(b"q")) == b"q"
