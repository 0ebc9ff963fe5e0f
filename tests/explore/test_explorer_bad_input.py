"""The explorer (`python -m agents explore`) on bad input: each is a clear message, never a stack
trace, and the server keeps serving.

On a private Anvil with the protocol deployed and one job posted (no agents): unknown job, node
and game ids, ids that are not numbers or addresses, an unknown status filter; the chain going
down while the explorer serves (the pages say so, the server stays up); and the command's own
mistakes (no chain at start, no deployment file, a port in use), each one line, exit 2. The
browser test on a real scenario (the tampered blob among its checks) is
tests/roles/explorer_checks.py. Plus the live feed's bound and the descriptor decoding the
dispute page reads the chain's proof with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from web3 import Web3

from agents.core.chain import AnvilConfig, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, deploy_all
from agents.dispute.encoding import KIND_NODE, KIND_WORD, GraphNode, TensorInput
from agents.explore.dispute import Value, decode_node
from agents.explore.index import QUEUE, Hub
from agents.training.registry import OPS
from tools.browser import explorer
from tools.devnet import TOKEN, Party, fund, post_job

REPO = Path(__file__).resolve().parents[2]


def _explore(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "agents", "explore", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def chain(tmp_path):
    """(stack that owns the Anvil, rpc url, deployment file, the posted job's id)."""
    stack = contextlib.ExitStack()
    url = stack.enter_context(local_anvil(AnvilConfig()))
    w3 = Web3(Web3.HTTPProvider(url))
    addresses = deploy_all(w3, dev_private_key(0), DEFAULT_ABI_DIR, {"mock_arbiter": True})
    deployment = tmp_path / "deployment.json"
    deployment.write_text(json.dumps({"rpc_url": url, "block": 0, "contracts": addresses}))
    fund(w3, addresses["Token"], dev_private_key(0), [Party("submitter", "submitter", 1)])
    now = int(w3.eth.get_block("latest")["timestamp"])
    params = (
        b"\x01" * 32,
        b"\x02" * 32,
        b"\x03" * 32,
        10,
        5,
        (0, 0, 0),
        100 * TOKEN,
        10 * TOKEN,
        now + 600,
        300,
        b"\x04" * 32,  # the dispute config, posted with the job (PROTOCOL §7.2)
    )
    job_id = post_job(w3, addresses, 1, params)
    with stack:
        yield stack, url, deployment, job_id


def test_bad_ids_and_a_chain_gone_down_are_messages_and_the_server_keeps_serving(chain, tmp_path):
    stack, url, deployment, job_id = chain
    with explorer(url, deployment, tmp_path / "explore.log", "--poll-interval", "0.2") as e:
        status, body = e.get("/")
        assert status == 200 and f'data-job="{job_id}"' in body and "open" in body
        # the spec of a job nobody committed to is nowhere: said in its row, not guessed
        deadline = time.monotonic() + 20
        while "no blob store to read its spec from" not in e.get("/")[1]:
            assert time.monotonic() < deadline, e.get("/")[1][-2000:]
            time.sleep(0.2)
        assert "no completed job" in e.get("/?status=completed")[1]
        for path, code, words in (
            (f"/job/{job_id + 1}", 404, f"no job {job_id + 1} on JobManager"),
            ("/job/0", 404, "ids are positive integers"),
            ("/job/12x", 404, "is not a number"),
            ("/job/99999999999999999999999999", 404, "job ids are positive integers"),
            ("/node/0x000000000000000000000000000000000000dEaD", 404, "no node"),
            ("/node/0xnothex", 404, "is not an address"),
            ("/dispute/3", 404, "this deployment has no dispute game"),
            ("/decomposed/1", 404, "no RoundManager"),
            ("/?status=lost", 400, "one of open, disputed, completed, cancelled"),
            ("/no/such/page", 404, "no page at /no/such/page"),
        ):
            status, body = e.get(path)
            assert status == code, (path, status, body[-500:])
            assert words in body, (path, body[-1500:])
            assert "Traceback" not in body
        assert e.get(f"/job/{job_id}")[0] == 200
        # the chain goes away while the explorer serves
        stack.close()
        deadline = time.monotonic() + 60
        while "Chain unreachable" not in (body := e.get("/")[1]):
            assert time.monotonic() < deadline, body[-1500:]
            time.sleep(0.3)
        assert "the chain does not answer" in body
        status, body = e.get(f"/job/{job_id}")
        assert status == 503 and "The chain does not answer" in body and "Traceback" not in body
        status, body = e.get("/")
        assert status == 200 and f'data-job="{job_id}"' in body  # what it last read
        assert e.proc.poll() is None, "the server stopped"
    assert "Traceback" not in e.output(), e.output()[-3000:]


def test_the_command_s_own_mistakes_are_one_line_exit_2(chain, tmp_path):
    _, url, deployment, _ = chain
    cases = [
        (["--rpc-url", "http://127.0.0.1:9", "--deployment", str(deployment)], "no chain there"),
        (["--rpc-url", url, "--deployment", str(tmp_path / "none.json")], "no such file"),
        (["--rpc-url", "localhost:8545", "--deployment", str(deployment)], "unsupported RPC URL"),
        (["--rpc-url", url, "--deployment", str(deployment), "--port", "0"], "not a TCP port"),
    ]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    cases.append((["--rpc-url", url, "--deployment", str(bad)], "not a deployment file"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases.append(
            (
                ["--rpc-url", url, "--deployment", str(deployment), "--port", str(port)],
                f"--port {port}: cannot listen",
            )
        )
        for args, words in cases:
            proc = _explore(*args)
            assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and words in lines[0], (args, proc.stderr)


def test_a_slow_page_falls_behind_by_a_bounded_number_of_messages():
    async def run() -> tuple[int, dict]:
        hub = Hub()
        async with hub.subscribe() as q:
            for i in range(QUEUE * 3):
                hub.publish({"kind": "job", "id": i})
            return q.qsize(), q.get_nowait()

    size, oldest = asyncio.run(run())
    assert size == QUEUE and oldest["id"] == QUEUE * 2  # the oldest dropped, the newest kept


def test_node_descriptors_decode_as_the_chain_committed_them():
    ins = (
        TensorInput(KIND_NODE, 61, bytes(32), 1, (2, 2, 32, 32)),
        TensorInput(KIND_WORD, 0, (0x3F800000).to_bytes(32, "big"), 1, ()),
    )
    node = GraphNode(OPS["div"].code, 1, (2, 2, 32, 32), (), ins)
    got = decode_node(node.encode())
    assert (got.version, got.operator, got.shape) == (3, "div", (2, 2, 32, 32))
    assert [i[0] for i in got.inputs] == [KIND_NODE, KIND_WORD] and got.inputs[0][1] == 61
    assert Value(0x3F800000, 1).text == "1" and Value(7, 2).text == "7"
    assert Value(0x3EA9EFA1, 1).hex == "0x3ea9efa1"
