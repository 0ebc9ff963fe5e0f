"""A user-space delaying TCP proxy: the latency half of an emulated link (this kernel has no
`netem`; `tc ... tbf` gives the rate). Each byte read from one side is written to the other
`delay_s` later, in order, without holding back the bytes behind it: a stream keeps its
throughput and gains `delay_s` each way (a request and its reply: one round trip of 2 delay_s).

    python -m tools.delayproxy LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT:DELAY_MS [...]

listens on 127.0.0.1 for each mapping (run it inside the network namespace of the client).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    listen_port: int
    host: str
    port: int
    delay_s: float

    @staticmethod
    def parse(text: str) -> Route:
        listen, host, port, delay_ms = text.rsplit(":", 3)
        return Route(int(listen), host, int(port), float(delay_ms) / 1e3)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float
                ) -> None:  # fmt: skip
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    try:
        while chunk := await reader.read(1 << 16):
            queue.put_nowait((loop.time() + delay_s, chunk))
    except ConnectionError:
        pass
    queue.put_nowait((loop.time() + delay_s, b""))  # the close, delayed like the data
    with contextlib.suppress(ConnectionError):
        await sender


def handler(route: Route):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(route.host, route.port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer, route.delay_s),
                             _pipe(up_reader, writer, route.delay_s))  # fmt: skip

    return handle


async def start(routes: list[Route]) -> list[asyncio.Server]:
    """Listen for each route (port 0: any free port, `sockets[0]` says which)."""
    return [await asyncio.start_server(handler(r), "127.0.0.1", r.listen_port) for r in routes]


async def serve(routes: list[Route]) -> None:
    servers = await start(routes)
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: list[str]) -> int:
    try:
        routes = [Route.parse(a) for a in argv]
    except ValueError:
        print("usage: python -m tools.delayproxy PORT:HOST:PORT:DELAY_MS ...", file=sys.stderr)
        return 2
    asyncio.run(serve(routes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
