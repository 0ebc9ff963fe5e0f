"""`make explore`: the GPT demo (scripts/demo_gpt.py) on a local chain, watched live in the
explorer (`python -m agents explore`).

Starts an Anvil that outlives the demo, runs the demo against it in the background (its output
in build/demo/gpt/explore-demo.log), and serves the explorer on http://127.0.0.1:8600/ as soon
as the demo has deployed: the job appears, is claimed by the cheater, disputed down to one
element of the attention softmax, the cheater slashed, the job retrained and completed, each
page following the chain as it goes. Ctrl-C stops the explorer, the demo and the chain.

`--screenshot PATH` waits for the demo to finish, saves the dispute page as a PNG (Debian's
chromium, tools/browser.py) and exits: the README's picture. Other arguments go to the demo
(`--steps 4 --batch 2 --checkpoint-every 2`: the smallest job with a cheat to catch).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from agents.core.chain import AnvilConfig, local_anvil
from scripts import demo_gpt
from tools.browser import chromium, explorer

REPO = Path(__file__).resolve().parents[1]
DEPLOYMENT = demo_gpt.REPORT_DIR / "deployment.json"
LOG = demo_gpt.REPORT_DIR / "explore-demo.log"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make explore", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8600, help="the explorer's (default 8600)")
    parser.add_argument("--screenshot", type=Path, help="save the dispute page here and exit")
    args, demo_args = parser.parse_known_args(argv)
    demo_gpt.REPORT_DIR.mkdir(parents=True, exist_ok=True)
    DEPLOYMENT.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with local_anvil(AnvilConfig()) as url, open(LOG, "wb") as log:
        cmd = [sys.executable, "-m", "scripts.demo_gpt", "--rpc-url", url, *demo_args]
        demo = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            while not DEPLOYMENT.exists():
                if demo.poll() is not None:
                    print(
                        f"error: the demo exited with {demo.returncode} (see {LOG})",
                        file=sys.stderr,
                    )
                    return 1
                time.sleep(0.5)
            extra = ("--allow-local-locators", "--poll-interval", "0.5")
            server_log = demo_gpt.REPORT_DIR / "explorer.log"
            with explorer(url, DEPLOYMENT, server_log, *extra, port=args.port) as e:
                print(
                    f"explorer: {e.url}/ — the GPT demo runs on {url} (its output: {LOG}); "
                    "Ctrl-C stops everything",
                    flush=True,
                )
                code = demo.wait()
                print(
                    f"the demo finished ({'ok' if code == 0 else f'exit {code}'}); the chain "
                    "and the explorer keep running",
                    flush=True,
                )
                if args.screenshot is not None:
                    return _screenshot(e.url, args.screenshot)
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            return 130
        finally:
            if demo.poll() is None:
                demo.terminate()
                demo.wait(timeout=30)


def _screenshot(base: str, path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with chromium(width=1100, height=900) as page:
        page.goto(f"{base}/dispute/1")
        page.wait_for_timeout(1500)
        page.screenshot(path=str(path), full_page=True)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
