"""`python -m agents explore`: a read-only web explorer of a deployment (agents/explore/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agents.cli.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    from agents.explore.config import DEFAULT_PORT
    from agents.roles.config import DEFAULT_DEPLOYMENT

    p = sub.add_parser(
        "explore",
        help="serve a read-only web explorer: jobs, loss curves, "
        "disputes down to the element, nodes (no key)",
    )
    p.add_argument("--rpc-url", help="the chain's JSON-RPC URL (default: the deployment's)")
    p.add_argument(
        "--deployment",
        default=DEFAULT_DEPLOYMENT,
        help="deployment file written by `deploy` (default: %(default)s)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="default: %(default)s")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    p.add_argument(
        "--spec-store",
        action="append",
        default=[],
        metavar="URL",
        help="a blob store holding jobs' specs and models (tried first)",
    )
    p.add_argument(
        "--allow-local-locators",
        action="store_true",
        help="dev chains only: also read a commitment's blobs from a local folder it names",
    )
    p.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        help="seconds between reads of new events (default: %(default)s)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.explore.config import ExploreConfig, ExploreError
    from agents.explore.server import run as serve

    cfg = ExploreConfig(
        rpc_url=args.rpc_url,
        deployment=Path(args.deployment),
        port=args.port,
        host=args.host,
        allow_local_locators=args.allow_local_locators,
        spec_stores=tuple(args.spec_store),
        poll_interval=args.poll_interval,
    )
    try:
        return serve(cfg)
    except ExploreError as exc:
        raise UserError(str(exc)) from None
