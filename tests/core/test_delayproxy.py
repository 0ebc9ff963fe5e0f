"""tools/delayproxy.py, the latency half of the pipeline bench's emulated links: a blob fetched
through it arrives intact and whole (a stream of many chunks each way), and no sooner than one
round trip of the delay (a lower bound only: never a timed upper bound)."""

from __future__ import annotations

import asyncio
import threading
import time
from urllib.parse import urlsplit

from agents.core.blobs import BlobStore, HttpBackend, serving
from tools.delayproxy import Route, main, start


def test_a_fetch_through_the_proxy_is_intact_and_a_round_trip_late(tmp_path):
    blob = bytes(range(256)) * 2048  # 512 KiB
    with serving(tmp_path) as server:
        address = BlobStore(server.backend).put(blob)
        route = Route.parse(f"0:127.0.0.1:{urlsplit(server.url).port}:60")
        assert route.delay_s == 0.06
        loop = asyncio.new_event_loop()
        servers = loop.run_until_complete(start([route]))
        port = servers[0].sockets[0].getsockname()[1]
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            store = BlobStore(HttpBackend(f"http://127.0.0.1:{port}", timeout_s=30))
            t0 = time.monotonic()
            assert store.get(address) == blob  # and checked against its address
            assert time.monotonic() - t0 >= 2 * 0.06
        finally:
            asyncio.run_coroutine_threadsafe(_shutdown(servers), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


async def _shutdown(servers: list[asyncio.Server]) -> None:
    for s in servers:
        s.close()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def test_bad_routes_are_refused_with_usage(capsys):
    assert main(["9000:host:80"]) == 2
    assert "usage" in capsys.readouterr().err
