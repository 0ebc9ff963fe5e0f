"""Helpers of the dispute-game tests (conftest.py has the fixtures): example counts per
profile and provider, time travel, ape artifacts; the rest is agents/dispute/harness.py.

Runs on Anvil (`--network ethereum:local:foundry`) and on ape's py-evm chain
(`--network ethereum:local:test`): only ape's provider-neutral chain API (snapshot, restore,
mine) and web3.py with locally signed transactions are used.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from eth_abi import decode
from web3 import Web3
from web3.contract import Contract

from agents.dispute.client import MoveRejected
from agents.dispute.harness import (  # noqa: F401 - re-exported for the tests
    CLOCK_BUDGET,
    Deployment,
    Job,
    deploy_game,
    make_job,
    open_game,
    open_segment_game,
)
from agents.dispute.player import DEFENDER_PHASES

EXAMPLES = {"ci": 1, "fuzz": 10}  # multiplier of each property test's CI example count
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(ci: int, provider: str = "foundry") -> int:
    """Examples of a property test: its CI count (x10 under `make fuzz`); on ape's in-process
    py-evm chain, which runs a game ~8x slower than Anvil, a quarter of that."""
    n = ci * EXAMPLES.get(PROFILE, 1)
    return n if provider != "test" else max(3, n // 4)


def ape_artifacts(project):
    """Contract name -> (abi, creation bytecode) from ape's compiled project."""

    def get(name: str) -> tuple[list, str]:
        ct = getattr(project, name).contract_type
        abi = ct.model_dump(mode="json", by_alias=True)["abi"]
        return abi, ct.deployment_bytecode.bytecode

    return get


def advance(chain):
    def _advance(seconds: int) -> None:
        chain.mine(1, deltatime=int(seconds))

    return _advance


def rpc_advance(dep: Deployment):
    """Time travel on a game deployed on an Anvil of its own (not ape's chain): raw RPC."""

    def go(seconds: int) -> None:
        dep.w3.provider.make_request("evm_increaseTime", [int(seconds)])
        dep.w3.provider.make_request("evm_mine", [])

    return go


class JobHandle:
    """What the harness's open_game reads of a job: its spec, dataset and graph."""

    def __init__(self, job: Any, jg: Any) -> None:
        self.spec, self.data, self.jg = job.spec, job.data, jg


# -- asserting a custom error -------------------------------------------------------------------


def _revert_data(exc: BaseException) -> bytes:
    """The revert data behind a rejected move or a failed call: web3 keeps it as hex on Anvil;
    py-evm's TransactionFailed has only its repr in the message."""
    err = exc.__cause__ if isinstance(exc, MoveRejected) and exc.__cause__ else exc
    data = getattr(err, "data", None)
    if isinstance(data, str) and data.startswith("0x"):
        return bytes.fromhex(data[2:])
    tail = str(err).rsplit("execution reverted: ", 1)[-1]
    if type(err).__name__ == "TransactionFailed" and tail[:2] in ("b'", 'b"'):
        return ast.literal_eval(tail)
    raise AssertionError(f"no revert data in {type(err).__name__}: {err}")


@contextmanager
def reverts(contract: Contract, name: str, **inputs: Any) -> Iterator[None]:
    """Asserts the block reverts with custom error `name` declared in `contract`'s ABI: the
    selector must be that error's (so an error bubbling up from a called contract counts) and
    every given input must equal the decoded argument."""
    abi = [e for e in contract.abi if e["type"] == "error" and e["name"] == name]
    assert len(abi) == 1, f"{name} is not an error of this contract"
    types = [i["type"] for i in abi[0]["inputs"]]  # all elementary (enums are uint8)
    names = [i["name"] for i in abi[0]["inputs"]]
    selector = Web3.keccak(text=f"{name}({','.join(types)})")[:4]
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - MoveRejected, or web3's errors on a plain call
        data = _revert_data(exc)
        assert data[:4] == selector, f"expected {name}, got revert data 0x{data.hex()}"
        actual = dict(zip(names, decode(types, data[4:]), strict=True))
        for key, want in inputs.items():
            got = actual[key]
            if isinstance(want, str) and isinstance(got, str):
                got, want = got.lower(), want.lower()
            assert got == want, f"{name}.{key}: {got!r} != {want!r}"
    else:
        raise AssertionError(f"did not revert (expected {name})")


def what(label: str) -> bytes:
    """The bytes32 `what` of InvalidProof: a short string literal, right-padded with zeros."""
    return label.encode().ljust(32, b"\x00")


def play_to(dep, gid: int, phase: int, defender, challenger):
    """Plays both players' moves until the game expects `phase`; returns the view there."""
    for _ in range(64):
        v = dep.defender.view(gid)
        if v.phase == phase:
            return v
        if v.phase in DEFENDER_PHASES:
            dep.defender.play(defender.next_move(v), gid)
        else:
            dep.challenger.play(challenger.next_move(v), gid)
    raise AssertionError(f"the game never reached phase {phase}")


# -- version-3 example jobs ---------------------------------------------------------------------

MODEL_JOBS = {
    "cnn": ("digits_cnn.py:make_model", "sklearn-digits/train"),
    "gpt": ("char_gpt.py:make_model", "shakespeare-char/train"),
    # the smallest models with every layer type of the LLaMA-style and ResNet examples (RMSNorm,
    # SwiGLU, RoPE, GQA, tied embeddings; BatchNorm, strided residual blocks, dropout)
    "llama": ("llama.py:make_tiny", "shakespeare-char/train"),
    "resnet": ("resnet.py:make_tiny", "sklearn-digits/train"),
}
# their recipes' parts that add nodes to the step: a schedule's table, parameter groups
MODEL_FLAGS = {"llama": ["--warmup", "1", "--decay", "cosine", "--no-decay-bias-norm"]}


def build_model_job(tmp, name: str, steps: int = 2, every: int = 1):
    """(ModelJob, S_0) of an example model (MODEL_JOBS), batch 2, AdamW, built with `job build`."""
    from pathlib import Path

    from agents.__main__ import main
    from agents.cli.job import load_job

    models = Path(__file__).resolve().parents[2] / "examples" / "models"
    model, dataset = MODEL_JOBS[name]
    out = Path(tmp) / f"{name}.json"
    argv = ["job", "build", "--model", f"{models}/{model}", "--dataset", dataset,
            "--optimizer", "adamw", "--lr", "0.003", "--batch", "2", "--steps", str(steps),
            "--checkpoint-every", str(every), "--seed", "5", "--out", str(out),
            *MODEL_FLAGS.get(name, [])]  # fmt: skip
    if main(argv) != 0:
        raise RuntimeError(f"job build of {name} failed")
    return load_job(str(out), None)
