"""Serve the explorer: open the chain reads, start the live index, run uvicorn until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys

import uvicorn

from agents.explore.app import Explorer, build_app
from agents.explore.config import Deployment, ExploreConfig, ExploreError
from agents.explore.index import Index
from agents.explore.published import Published
from agents.explore.reads import ChainReads


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ExploreError(
                f"--port {port}: cannot listen on {host}:{port} ({exc.strerror})"
            ) from None


async def serve(cfg: ExploreConfig) -> None:
    """Serve until interrupted; ExploreError (one line) when it cannot start."""
    if not 0 < cfg.port < 65536:
        raise ExploreError(f"--port {cfg.port}: not a TCP port")
    _check_port(cfg.host, cfg.port)
    deployment = Deployment.load(cfg.deployment)
    reads = await ChainReads.open(cfg, deployment)
    published = Published(cfg)
    index = Index(reads, published, cfg.poll_interval)
    explorer = Explorer(cfg, reads, published, index)
    stop = asyncio.Event()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(index.run(stop))
        print(
            f"explorer: http://{cfg.host}:{cfg.port}/ (chain {reads.chain_id}, JobManager "
            f"{reads.manager.address}); Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        try:
            yield
        finally:
            stop.set()
            await task
            await reads.close()
            index.close()

    app = build_app(explorer, lifespan)
    config = uvicorn.Config(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level="warning",
        # the live feeds end within a second of the signal (app.events)
        timeout_graceful_shutdown=5,
        lifespan="on",
    )
    await uvicorn.Server(config).serve()


def run(cfg: ExploreConfig) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(cfg))
    return 0
