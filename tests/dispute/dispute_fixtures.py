"""Helpers of the dispute-game tests (conftest.py has the fixtures): the game deployed behind a
recording job manager, funded local accounts, small training jobs, opening games.

Runs on Anvil (`--network ethereum:local:foundry`) and on ape's py-evm chain
(`--network ethereum:local:test`): only ape's provider-neutral chain API (snapshot, restore,
mine) and web3.py with locally signed transactions are used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from eth_account import Account
from web3 import Web3
from web3.contract import Contract

from agents.dispute.client import GameClient
from agents.dispute.graph import JobGraph, job_graph
from agents.dispute.trace import Computation, Fault
from agents.training.data import Dataset, synthetic
from agents.training.engine import Engine
from agents.training.spec import JobSpec

MNEMONIC = "test test test test test test test test test test test junk"
CLOCK_BUDGET = 3600  # seconds per side
EXAMPLES = {"ci": 1, "fuzz": 10}  # multiplier of each property test's CI example count
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(ci: int, provider: str = "foundry") -> int:
    """Examples of a property test: its CI count (x10 under `make fuzz`); on ape's in-process
    py-evm chain, which runs a game ~8x slower than Anvil, a quarter of that."""
    n = ci * EXAMPLES.get(PROFILE, 1)
    return n if provider != "test" else max(3, n // 4)


Account.enable_unaudited_hdwallet_features()


def key(i: int) -> str:
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


def _deploy(w3: Web3, artifact, k: str, *args) -> Contract:
    abi = artifact.contract_type.model_dump(mode="json", by_alias=True)["abi"]
    code = artifact.contract_type.deployment_bytecode.bytecode
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
    assert rc["status"] == 1, f"deploying {artifact.contract_type.name} failed"
    return w3.eth.contract(address=rc["contractAddress"], abi=abi)


def deploy_game(w3: Web3, project, clock_budget: int = CLOCK_BUDGET) -> Deployment:
    keys = [key(i) for i in range(4)]
    prover = _deploy(w3, project.OneStepProver, keys[0])
    manager = _deploy(w3, project.RecordingManager, keys[0])
    game = _deploy(w3, project.DisputeGame, keys[0], manager.address, prover.address, clock_budget)
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


def advance(chain):
    def _advance(seconds: int) -> None:
        chain.mine(1, deltatime=int(seconds))

    return _advance


# -- jobs -------------------------------------------------------------------------------------


@dataclass
class Job:
    spec: JobSpec
    data: Dataset
    engine: Engine
    jg: JobGraph

    def honest(self, steps: int, interval: int) -> Computation:
        return Computation(self.engine, steps, interval)

    def party(self, steps: int, interval: int, fault: Fault | None) -> Computation:
        return Computation(self.engine, steps, interval, fault=fault)


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


def open_game(dep: Deployment, job: Job, claim: Computation, honest: Computation) -> int:
    """Registers the job's dispute config (if new) and opens a game over `claim` as the job
    manager would, with the defender = account 1 and the challenger = account 2."""
    spec_hash = job.spec.spec_hash()
    if dep.game.functions.configOf(spec_hash).call() == bytes(32):
        dep.deployer_game().transact("registerConfig", spec_hash, job.jg.config.hash())
    request = (
        1,  # unitId
        dep.defender.address,
        dep.challenger.address,
        spec_hash,
        job.data.root(),
        honest.claimed_root(0),
        claim.steps,
        claim.interval,
        claim.checkpoint_commit(),
        claim.segments + 1,
        claim.final_root(),
        honest.checkpoint_commit(),
    )
    before = dep.game.functions.gameCount().call()
    dep.deployer.transact("open", request)
    gid = dep.game.functions.gameCount().call()
    assert gid == before + 1
    return gid
