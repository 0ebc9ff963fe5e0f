"""Bad inputs for the reliability bench: malformed job specs and flags given to the CLI, and
malformed parameters, proofs-by-wrong-caller and non-canonical calldata sent to the contracts.

A CLI case is *clear* when the process exits 2 within its timeout with exactly one line on
stderr, starting "error: ", and no traceback. A chain case is *clear* when the call reverts
with a custom error the project's ABIs decode (`ErrorDecoder`), or, for calldata the ABI
decoder itself rejects (non-canonical encodings: there is no custom error to give, Solidity
reverts before any code runs), when it reverts with empty data and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eth_abi import encode
from web3 import Web3
from web3.exceptions import ContractLogicError

from agents.core.tx import ErrorDecoder, _revert_data

REPO = Path(__file__).resolve().parents[1]
SPEC = json.loads((REPO / "examples" / "digits-mlp.json").read_text())
CLI_TIMEOUT_S = 60.0


def _spec(**changes: Any) -> dict:
    obj = json.loads(json.dumps(SPEC))
    for key, value in changes.items():
        if value is _DROP:
            obj.pop(key, None)
        else:
            obj[key] = value
    return obj


_DROP = object()

#: (name, file content) of malformed specs; each must be refused with one line.
SPEC_CASES: list[tuple[str, str]] = [
    ("not JSON", "{steps: 400"),
    ("empty file", ""),
    ("JSON array", "[1, 2, 3]"),
    ("steps as string", json.dumps(_spec(steps="400"))),
    ("steps as float", json.dumps(_spec(steps=400.5))),
    ("steps as bool", json.dumps(_spec(steps=True))),
    ("steps zero", json.dumps(_spec(steps=0))),
    ("steps negative", json.dumps(_spec(steps=-40))),
    ("steps huge", json.dumps(_spec(steps=2**70))),
    ("checkpoint_every zero", json.dumps(_spec(checkpoint_every=0))),
    ("k does not divide T", json.dumps(_spec(checkpoint_every=7))),
    ("batch zero", json.dumps(_spec(batch=0))),
    ("batch huge", json.dumps(_spec(batch=10**9))),
    ("unknown field", json.dumps(_spec(extra_field=1))),
    ("missing field", json.dumps(_spec(model=_DROP))),
    ("model not an object", json.dumps(_spec(model=[64, 10]))),
    ("huge model", json.dumps(_spec(model={"arch": "mlp", "widths": [64, 100000, 10]}))),
    ("unknown arch", json.dumps(_spec(model={"arch": "cnn", "widths": [64, 10]}))),
    ("lr not canonical hex", json.dumps(_spec(lr="0X3D4CCCCD"))),
    ("lr as decimal", json.dumps(_spec(lr=0.1))),
    ("lr NaN bits", json.dumps(_spec(lr="0x7fc00000"))),
    ("dataset root short", json.dumps(_spec(dataset={**SPEC["dataset"], "root": "0x12"}))),
    (
        "dataset root wrong",
        json.dumps(_spec(dataset={**SPEC["dataset"], "root": "0x" + "ab" * 32})),
    ),  # noqa: E501
    ("unknown version", json.dumps(_spec(version=99))),
    ("NaN literal", json.dumps(_spec()).replace('"seed": 1', '"seed": NaN')),
]

#: (name, extra CLI arguments, role) of malformed flags.
FLAG_CASES: list[tuple[str, list[str], str, str]] = [
    ("negative reward", ["--reward", "-5"], "submitter", "--reward"),
    ("fee above reward", ["--reward", "10", "--verification-fee", "20"], "submitter", "fee"),
    ("reward not a number", ["--reward", "lots"], "submitter", "--reward"),
    ("manager not an address", ["--manager", "0x1234"], "solver", "--manager"),
    ("unknown key source", ["--key", "vault:abc"], "solver", "vault"),
    ("negative poll interval", ["--poll-interval", "-1"], "verifier", "poll"),
    ("rpc url scheme", ["--rpc-url", "ftp://127.0.0.1:1"], "verifier", "rpc"),
    ("zero stake", ["--stake", "0"], "solver", "--stake"),
    ("bad cheat", ["--cheat", "element:step=x"], "solver", "--cheat"),
    ("bad serve-blobs", ["--serve-blobs", "nohostport"], "solver", "--serve-blobs"),
    ("unknown flag", ["--frobnicate"], "verifier", "--frobnicate"),
]


def _cli(args: list[str]) -> subprocess.CompletedProcess | None:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    try:
        return subprocess.run(
            [sys.executable, "-m", "agents", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None


def _judge_cli(name: str, must: str, proc: subprocess.CompletedProcess | None) -> dict[str, Any]:
    if proc is None:
        return {"where": "cli", "case": name, "clear": False, "got": "hang (timeout)"}
    lines = proc.stderr.strip().splitlines()
    clear = (
        proc.returncode == 2
        and len(lines) == 1
        and lines[0].startswith("error: ")
        and must in lines[0]  # it names what is wrong
        and "Traceback" not in proc.stderr + proc.stdout
    )
    got = lines[-1][:200] if lines else f"(no stderr, exit {proc.returncode})"
    return {"where": "cli", "case": name, "clear": clear, "got": got}


def cli_cases(work: Path, url: str, manager: str, every: int = 1) -> list[dict[str, Any]]:
    """Every spec and flag case, run as separate processes (a few at a time), against a live
    node and JobManager so that each reaches the check it is about."""
    work.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[str, str, list[str]]] = []
    for i, (name, content) in enumerate(SPEC_CASES):
        path = work / f"spec-{i}.json"
        path.write_text(content)
        jobs.append(
            (
                f"spec: {name}",
                "spec",
                ["submitter", "--rpc-url", url, "--key", "dev:1", "--data-dir",
                 str(work / f"d{i}"), "--manager", manager, "--spec", str(path)],
            )
        )  # fmt: skip
    for i, (name, extra, role, must) in enumerate(FLAG_CASES):
        base = {"--rpc-url": url, "--key": "dev:3", "--data-dir": str(work / f"f{i}"),
                "--manager": manager}  # fmt: skip
        if role == "submitter":
            base["--spec"] = str(REPO / "examples" / "digits-mlp.json")
        for flag in extra[::2]:
            base.pop(flag, None)
        args = [role, *(x for kv in base.items() for x in kv), *extra]
        jobs.append((f"flag: {name}", must, args))
    jobs = jobs[:: max(1, every)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        procs = list(pool.map(lambda j: _cli(j[2]), jobs))
    return [_judge_cli(n, m, p) for (n, m, _), p in zip(jobs, procs, strict=True)]


# --- on chain -----------------------------------------------------------------------------------


def _job_params(manager: Any, w3: Web3, **changes: Any) -> tuple:
    """A valid JobParams tuple built from the ABI's component names, with `changes` applied."""
    fn = manager.get_function_by_name("postJob")
    comps = fn.abi["inputs"][0]["components"]
    now = w3.eth.get_block("latest")["timestamp"]
    good = {
        "specHash": b"\x01" * 32,
        "datasetRoot": b"\x02" * 32,
        "initialStateRoot": b"\x03" * 32,
        "steps": 400,
        "checkpointInterval": 40,
        "reward": 100 * 10**18,
        "verificationFee": 10 * 10**18,
        "claimDeadline": now + 3600,
        "computeTime": 3600,
        "configHash": b"\x04" * 32,
    }
    good.update(changes)
    out = []
    for c in comps:
        if c["type"] == "tuple":
            out.append(tuple(0 for _ in c["components"]))
        else:
            out.append(good.get(c["name"], 0))
    return tuple(out)


def _judge_call(name: str, w3: Web3, decoder: ErrorDecoder, call: dict) -> dict[str, Any]:
    try:
        w3.eth.call(call)
    except ContractLogicError as exc:
        data = _revert_data(exc)
        decoded = decoder.decode(data) if data else None
        if decoded is not None and decoded[0] not in ("Error", "Panic"):
            return {"where": "chain", "case": name, "clear": True, "got": decoded[0]}
        if not data and name.startswith("calldata:"):
            got = "reverted before any code ran"
            return {"where": "chain", "case": name, "clear": True, "got": got}
        return {"where": "chain", "case": name, "clear": False, "got": f"revert {data.hex()[:40]}"}
    except Exception as exc:  # noqa: BLE001 - anything else is not a clear refusal
        return {"where": "chain", "case": name, "clear": False, "got": str(exc)[:200]}
    return {"where": "chain", "case": name, "clear": False, "got": "accepted"}


def chain_cases(w3: Web3, addrs: dict[str, str]) -> list[dict[str, Any]]:
    from agents.core.deploy import load_artifact

    def c(name: str) -> Any:
        return w3.eth.contract(address=addrs[name], abi=load_artifact(name)["abi"])

    manager, game, registry = c("JobManager"), c("DisputeGame"), c("NodeRegistry")
    decoder = ErrorDecoder.from_artifacts()
    user = w3.eth.accounts[3]
    now = w3.eth.get_block("latest")["timestamp"]

    def tx(fn: Any) -> dict:
        return {"from": user, "to": fn.address, "data": fn._encode_transaction_data()}

    cases: list[tuple[str, dict]] = [
        ("postJob: zero steps", tx(manager.functions.postJob(_job_params(manager, w3, steps=0)))),
        (
            "postJob: zero interval",
            tx(manager.functions.postJob(_job_params(manager, w3, checkpointInterval=0))),
        ),
        (
            "postJob: k does not divide T",
            tx(manager.functions.postJob(_job_params(manager, w3, checkpointInterval=7))),
        ),
        (
            "postJob: zero commitment",
            tx(manager.functions.postJob(_job_params(manager, w3, specHash=b"\0" * 32))),
        ),
        (
            "postJob: deadline in the past",
            tx(manager.functions.postJob(_job_params(manager, w3, claimDeadline=now - 10))),
        ),
        (
            "postJob: zero compute time",
            tx(manager.functions.postJob(_job_params(manager, w3, computeTime=0))),
        ),
        (
            "postJob: fee above reward",
            tx(manager.functions.postJob(_job_params(manager, w3, reward=10, verificationFee=20))),
        ),
        ("claim: unknown unit", tx(manager.functions.claim(99 << 32, b"\x01" * 32))),
        ("withdraw: nothing credited", tx(manager.functions.withdraw())),
        ("challenge: not a verifier", tx(manager.functions.challenge(1 << 32, b"\x05" * 32))),
        (
            "sealAttestation: unknown unit",
            tx(manager.functions.sealAttestation(99 << 32, b"\1" * 32)),
        ),
        (
            "attest: unknown unit",
            tx(manager.functions.attest(99 << 32, [b"\1" * 32], b"\2" * 32)),
        ),
        ("registry: unbond unregistered", tx(registry.functions.requestUnbond(1))),
        ("game: checkpoints for unknown game", tx(game.functions.postCheckpoints(7, [b"\1" * 32]))),
        ("game: timeout of unknown game", tx(game.functions.claimTimeout(7))),
        (
            "game: config by a non-submitter",
            tx(game.functions.registerConfig(1, b"\x09" * 32)),
        ),
    ]
    sel_withdraw = manager.functions.withdraw()._encode_transaction_data()[:10]
    sel_claim = manager.functions.claim(1, b"\x01" * 32)._encode_transaction_data()[:10]
    # Non-canonical encodings: truncated arguments, a bool with a dirty high byte, a dynamic
    # array whose offset points outside the calldata.
    timeout_sel = game.functions.claimTimeout(1)._encode_transaction_data()[:10]
    post_sel = game.functions.postCheckpoints(1, [])._encode_transaction_data()[:10]
    bad_offset = encode(["uint256", "uint256"], [1, 2**64]).hex()
    cases += [
        ("calldata: truncated uint256", {"from": user, "to": manager.address,
                                         "data": sel_claim + "00" * 16}),
        ("calldata: claimTimeout without its argument", {"from": user, "to": game.address,
                                                         "data": timeout_sel}),
        ("calldata: array offset out of range", {"from": user, "to": game.address,
                                                 "data": post_sel + bad_offset}),
        ("calldata: unknown selector", {"from": user, "to": manager.address,
                                        "data": "0xdeadbeef"}),
        ("calldata: value sent to a non-payable withdraw", {"from": user, "to": manager.address,
                                                            "data": sel_withdraw, "value": 1}),
    ]  # fmt: skip
    return [_judge_call(name, w3, decoder, call) for name, call in cases]
