"""The README's journey, run as written (issue #28): from an empty folder and a fresh Anvil, only
the documented commands — `deploy`, one solver, two verifiers and a whistleblower, `job build`
of the CNN example, `submit`, `job status`, `job fetch`, and the weights loaded into the plain
PyTorch module and scored.

The commands are the README's own: its "The whole journey, on a local chain" section's two `sh`
blocks, the first (the chain) started in the background, the second run by bash in an empty
folder. The test changes only what the README says it changes: the checkout's path (`VTP=`)
and the port 8545 (a free one). Then, from the chain: both verifiers (the README's stake) were
drawn and attested, and the job completed; from the output: `job fetch`'s test accuracy is the
one plain PyTorch measures on the fetched weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from eth_account import Account

from agents.core.chain import connect, dev_private_key, free_port
from agents.core.deploy import load_artifact
from tools.readme_commands import README, sections, sh_blocks

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
JOURNEY = "The whole journey, on a local chain"
README_PORT = "8545"
#: Generous: the journey's own waits (claim window, verify window) are chain time, a block a
#: second; this only stops a journey that hangs.
JOURNEY_TIMEOUT_S = 780


def journey_scripts(port: int) -> tuple[str, str]:
    """(the chain's block, the journey's block), with the checkout's path and `port` put in."""
    blocks = sh_blocks(sections(README.read_text())[JOURNEY])
    assert len(blocks) == 2, f"{JOURNEY}: expected two sh blocks, found {len(blocks)}"

    def fill(block: str) -> str:
        block, n = re.subn(r"^VTP=\S+", f"VTP={REPO}", block, flags=re.M)
        assert n == 1, "each block sets VTP= once"
        assert README_PORT in block
        return block.replace(README_PORT, str(port))

    return fill(blocks[0]), fill(blocks[1])


@contextlib.contextmanager
def session(script: str, cwd: Path, log: Path):
    """`script` run by bash in its own session (so its background jobs too), all of it stopped
    on exit. `python -m agents` is this checkout's package: a venv shared between checkouts
    (git worktrees) may hold an editable install of another."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield proc
        finally:
            stop_group(proc)


def stop_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM to the session's process group (bash, the roles it started with `&`, Anvil),
    then SIGKILL to whatever is left of it after `grace_s`. The group outlives bash: a finished
    journey leaves its roles running in it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reap bash, so that a zombie leader does not count as left
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(path: Path, n: int = 2500) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


def test_the_readme_journey_runs_as_written(tmp_path):
    port = free_port()
    chain_script, journey_script = journey_scripts(port)
    folder = tmp_path / "journey"
    folder.mkdir()  # the empty folder the README starts from
    chain_log, journey_log = tmp_path / "chain.log", tmp_path / "journey.log"
    with session(chain_script, tmp_path, chain_log):
        w3 = connect(f"http://127.0.0.1:{port}", attempts=8)
        with session(journey_script, folder, journey_log) as journey:
            try:
                code = journey.wait(timeout=JOURNEY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            logs = "\n".join(
                f"--- {p.name}\n{_tail(p, 1500)}" for p in sorted(folder.glob("*.log"))
            )
            assert code == 0, f"journey exit {code}:\n{_tail(journey_log)}\n{logs}"
        out = journey_log.read_text()
        manager_address = _deployment_manager(folder)
        manager = w3.eth.contract(manager_address, abi=load_artifact("JobManager")["abi"])
        attested = {e["args"]["verifier"] for e in manager.events.Attested().get_logs(from_block=0)}
        verifiers = {Account.from_key(dev_private_key(i)).address for i in (3, 4)}
        # the README's stake covers the job's lock: both verifiers were drawn, both attested
        assert verifiers <= attested, (attested, out[-2000:])
    assert re.search(r"^job 1: completed", out, re.M), out[-3000:]
    # job fetch's line names the accuracy among other things; the PyTorch snippet prints only it
    fetched = [m for m in re.findall(r"^(.+test accuracy (\d\.\d+).*)$", out, re.M)
               if "wrote model.safetensors" in m[0]]  # fmt: skip
    scored = re.findall(r"^test accuracy (\d\.\d+)$", out, re.M)
    assert fetched and scored, out[-3000:]
    # plain PyTorch's float sums against the protocol's bit-exact ones: within a test example
    assert abs(float(scored[-1]) - float(fetched[-1][1])) <= 0.01
    assert float(scored[-1]) > 0.8


def _deployment_manager(folder: Path) -> str:
    return json.loads((folder / "deployment.json").read_text())["contracts"]["JobManager"]
