"""The explorer as a user meets it: `python -m agents explore` as a process (`explorer`) and
Debian's headless Chromium driven by Playwright (`chromium`).

Shared by the explorer's browser test, its bench and `make explore`'s screenshot, so that none
of them imports another's script. Playwright's own browser download is never used: the browser
is the `chromium` Debian package (`make browser` installs it), at CHROMIUM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from agents.core.chain import free_port

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("VTP_CHROMIUM", "/usr/bin/chromium"))
#: Flags that work in this project's sandboxed, GPU-less machines (headless, no sandbox, no
#: network besides the page's own).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class BrowserMissing(RuntimeError):
    """Debian's chromium is not installed (`make browser` installs it, as root)."""


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator:
    """A Playwright page in a fresh headless Chromium; closed on exit."""
    if not CHROMIUM.exists():
        raise BrowserMissing(
            f"{CHROMIUM} not found: run `make browser` as root (Debian's chromium)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=list(FLAGS))
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


class Explorer:
    """A running `python -m agents explore` process: its base URL and its log."""

    def __init__(self, proc: subprocess.Popen, url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, str]:
        """(status, body) of GET `path`; an HTTP error status is returned, not raised."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as res:
                return res.status, res.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def explorer(
    rpc_url: str,
    deployment: Path,
    log: Path,
    *extra: str,
    port: int | None = None,
    ready_s: float = 60.0,
) -> Iterator[Explorer]:
    """Start the explorer on `port` (default: a free one) against `rpc_url` and `deployment`
    (its output to `log`), wait until its jobs page answers, stop it (SIGINT, as Ctrl-C) on
    exit."""
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "agents",
        "explore",
        "--rpc-url",
        rpc_url,
        "--deployment",
        str(deployment),
        "--port",
        str(port),
        *extra,
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "wb")  # noqa: SIM115 - closed below
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    e = Explorer(proc, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"explore exited with {proc.returncode}: {e.output()[-800:]}")
            with contextlib.suppress(OSError):
                if e.get("/", timeout=2)[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"explore did not answer in {ready_s:.0f} s: {e.output()[-800:]}"
                )
            time.sleep(0.2)
        yield e
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        out.close()
