"""`make demo`: start a fresh local chain (or use --rpc-url), deploy every contract, report.

Exit codes: 0 success, 2 a user error (unreachable RPC, missing build) printed as one line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from agents.core.chain import ChainUnavailable, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all

REPORT_DIR = Path("build/demo")


@contextlib.contextmanager
def chain_url(rpc_url: str | None) -> Iterator[tuple[str, bool]]:
    """Yield (url, is_private_dev_chain): the given RPC, or a private Anvil we stop afterwards."""
    if rpc_url:
        yield rpc_url, False
        return
    with local_anvil() as url:
        yield url, True


def run(rpc_url: str | None, deployer_key: str | None) -> dict:
    started = time.monotonic()
    with chain_url(rpc_url) as (url, private_chain):
        w3 = connect(url)
        key = deployer_key or dev_private_key(0)
        addresses = deploy_all(w3, key, DEFAULT_ABI_DIR)
        report = {
            "rpc_url": url,
            "private_chain": private_chain,
            "chain_id": w3.eth.chain_id,
            "block": w3.eth.block_number,
            "contracts": addresses,
            "wall_time_s": round(time.monotonic() - started, 2),
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--rpc-url", help="use this chain instead of starting a private Anvil")
    parser.add_argument("--key", help="deployer private key (default: Anvil dev account 0)")
    args = parser.parse_args(argv)
    try:
        report = run(args.rpc_url, args.key)
    except (ChainUnavailable, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"chain {report['chain_id']} at block {report['block']}")
    for name, address in report["contracts"].items():
        print(f"  {name:<24} {address}")
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / "deployment.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {REPORT_DIR / 'deployment.json'} in {report['wall_time_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
