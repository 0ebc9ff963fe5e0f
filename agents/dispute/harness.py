"""Stand a dispute game up on a local chain and play it: deployment behind a recording job
manager, small training jobs, opening a game over a claim. Used by tests/dispute, the dispute
bench and demos; production wiring (the real job manager) is agents/core/deploy.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eth_account import Account
from web3 import Web3
from web3.contract import Contract

from agents.data.builtin import Dataset, synthetic
from agents.dispute.client import GameClient
from agents.dispute.graph import JobGraph, job_graph
from agents.dispute.trace import Computation
from agents.training.engine import Engine
from agents.training.spec import JobSpec

MNEMONIC = "test test test test test test test test test test test junk"
CLOCK_BUDGET = 3600  # seconds per side

Account.enable_unaudited_hdwallet_features()


def key(i: int) -> str:
    """Private key of dev account i of the test mnemonic (local chains only)."""
    acct = Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}")
    return acct.key.hex()


@dataclass
class Deployment:
    w3: Web3
    game: Contract
    manager: Contract
    prover: Contract
    deployer: GameClient  # a client on the manager (account 0)
    defender: GameClient  # account 1
    challenger: GameClient  # account 2
    keys: list[str]

    def deployer_game(self) -> GameClient:
        """A client on the game contract from account 0 (anyone may register configs)."""
        return GameClient(self.w3, self.game, self.keys[0])


Artifacts = Callable[[str], tuple[list, str]]  # contract name -> (abi, creation bytecode)


def _deploy(w3: Web3, artifacts: Artifacts, name: str, k: str, *args) -> Contract:
    abi, code = artifacts(name)
    acct = Account.from_key(k)
    factory = w3.eth.contract(abi=abi, bytecode=code)
    tx = factory.constructor(*args).build_transaction(
        {
            "from": acct.address,
            "nonce": w3.eth.get_transaction_count(acct.address, "pending"),
            "gasPrice": w3.eth.gas_price,
            "gas": 15_000_000,
            "chainId": w3.eth.chain_id,
        }
    )
    rc = w3.eth.wait_for_transaction_receipt(
        w3.eth.send_raw_transaction(Account.sign_transaction(tx, k).raw_transaction)
    )
    if rc["status"] != 1:
        raise RuntimeError(f"deploying {name} failed")
    return w3.eth.contract(address=rc["contractAddress"], abi=abi)


def deploy_game(
    w3: Web3,
    artifacts: Artifacts,
    clock_budget: int = CLOCK_BUDGET,
    manager_registers_only: bool = False,
) -> Deployment:
    """OneStepProver, a RecordingManager (test stand-in for the job manager) and the game
    (`manager_registers_only`: as the attestation court's game, PROTOCOL §6.8)."""
    keys = [key(i) for i in range(4)]
    prover = _deploy(w3, artifacts, "OneStepProver", keys[0])
    manager = _deploy(w3, artifacts, "RecordingManager", keys[0])
    game = _deploy(
        w3,
        artifacts,
        "DisputeGame",
        keys[0],
        manager.address,
        prover.address,
        clock_budget,
        manager_registers_only,
    )
    mgr_client = GameClient(w3, manager, keys[0])
    mgr_client.transact("setArbiter", game.address)
    return Deployment(
        w3,
        game,
        manager,
        prover,
        mgr_client,
        GameClient(w3, game, keys[1]),
        GameClient(w3, game, keys[2]),
        keys,
    )


# -- jobs -------------------------------------------------------------------------------------


@dataclass
class Job:
    spec: JobSpec
    data: Dataset
    engine: Engine
    jg: JobGraph

    def honest(self, steps: int, interval: int) -> Computation:
        return Computation(self.engine, steps, interval)


def make_job(
    widths: tuple[int, ...],
    batch: int,
    n: int,
    seed: int,
    steps: int,
    interval: int,
    data: Dataset | None = None,
) -> Job:
    data = data or synthetic(n, widths[0], widths[-1], seed)
    spec = JobSpec(
        widths=widths,
        dataset_name=data.name,
        dataset_root="0x" + data.root().hex(),
        lr_bits=0x3DCCCCCD,  # 0.1
        momentum_bits=0x3F666666,  # 0.9
        batch=batch,
        seed=seed,
        steps=steps,
        checkpoint_every=interval,
    )
    eng = Engine(spec, data)
    return Job(spec, data, eng, job_graph(spec, data.n))


def register_job(dep: Deployment, job: Job, placement: tuple[int, int, int] | None = None) -> int:
    """Posts a fresh job id on the manager stand-in (submitter = account 0), registers the job's
    dispute config as its submitter and returns the job id (unit 0 of it is disputed). With a
    `placement` (t0, S, s) the job is a unit of a decomposed job (`registerUnitConfig`)."""
    job_id = dep.game.functions.gameCount().call() + 1
    while dep.manager.functions.submitterOf(job_id).call() != "0x" + "00" * 20:
        job_id += 1
    submitter = dep.deployer_game()
    dep.deployer.transact("setSubmitter", job_id, submitter.address)
    if placement is None:
        submitter.transact("registerConfig", job_id, job.jg.config.hash())
    else:
        submitter.transact("registerUnitConfig", job_id, job.jg.config.hash(), placement)
    return job_id


def open_game(
    dep: Deployment,
    job: Job,
    claim: Computation,
    honest: Computation,
    placement: tuple[int, int, int] | None = None,
) -> int:
    """Opens a game over `claim` as the job manager would, with the defender = account 1 and
    the challenger = account 2, on a freshly registered job (a unit job with `placement`)."""
    job_id = register_job(dep, job, placement)
    request = (
        job_id << 32,  # unitId: unit 0 of the job
        dep.defender.address,
        dep.challenger.address,
        job.spec.spec_hash(),
        job.data.root(),
        honest.claimed_root(0),
        claim.steps,
        claim.interval,
        claim.checkpoint_commit(),
        claim.segments + 1,
        claim.final_root(),
        honest.checkpoint_commit(),
        b"\x00" * 32,  # configHash: none posted with the job, the one registered above is read
    )
    before = dep.game.functions.gameCount().call()
    dep.deployer.transact("open", request)
    gid = dep.game.functions.gameCount().call()
    if gid != before + 1:
        raise RuntimeError("the game was not opened")
    return gid


def open_segment_game(dep: Deployment, job: Job, claim: Computation) -> int:
    """Opens an attestation game over `claim` (one segment: S_{t0} -> S_{t0+steps}) as the job
    manager would, defended by account 1 (the verifier) against account 2 (whistleblower)."""
    job_id = register_job(dep, job)
    roots = [claim.claimed_root(claim.t0), claim.final_root()]
    dep.deployer.transact(
        "openSegment",
        job_id << 32,
        dep.defender.address,
        dep.challenger.address,
        job.data.root(),
        claim.t0,
        claim.steps,
        roots,
    )
    return dep.game.functions.gameCount().call()
