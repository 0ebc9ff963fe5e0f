"""Deploy and wire the protocol from the exported ABI/bytecode JSON (build/abi) with web3.py.

Integrators and agents need only these artifacts; no ape at run time. `deploy_all` deploys the
payment token (a mintable TestToken on dev chains, unless an existing token address is given),
the NodeRegistry and the JobManager, authorises the JobManager as the registry's only slasher and
wires the dispute arbiter: a given address, or a MockArbiter when `mock_arbiter` is asked for
(tests and demos only: anyone can resolve its games). Every transaction is signed locally, sent,
and waited for; a reverted one raises `DeploymentError` naming the step.

With a `Journal` the deployment is resumable: each step's signed transaction hash is recorded
before it is sent and its result (an address, or "done") once mined, so a deployment cut off at
any point is finished by running it again with the same journal — a mined step is never sent
twice (a one-shot call such as `setSlashers` would revert if it were), and a step whose
transaction never reached the chain is sent again (`python -m agents deploy`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract.contract import ContractFunction

DEFAULT_ABI_DIR = Path(__file__).resolve().parents[2] / "build" / "abi"

TOKEN_UNIT = 10**18
HOUR = 3600
DAY = 24 * HOUR
#: The attestation court's window: how long after a unit's challenge deadline its attestations
#: can be taken to court, so how long verifiers keep what they need to defend them (§6.8).
COURT_WINDOW = 7 * DAY

#: NodeRegistry.Config defaults (docs/PROTOCOL.md §6.4 gives the reasons).
DEFAULT_REGISTRY_CONFIG: dict[str, int] = {
    "minSolverStake": 100 * TOKEN_UNIT,
    "minVerifierStake": 50 * TOKEN_UNIT,
    "minWhistleblowerStake": 10 * TOKEN_UNIT,
    "unbondingDelay": 7 * DAY,
    "heartbeatTtl": 1 * HOUR,
}

#: JobManager.Config defaults (docs/PROTOCOL.md §6.4 gives the reasons).
DEFAULT_MANAGER_CONFIG: dict[str, int] = {
    "claimWindow": 1 * HOUR,
    "verifyWindow": 1 * DAY,
    "disputeGrace": 1 * HOUR,
    "taxBps": 200,
    "challengerRewardBps": 5_000,
    "collateralBps": 10_000,
    "verifiersPerUnit": 2,
    "segmentsPerVerifier": 2,
    "verifierLock": 10 * TOKEN_UNIT,
    "challengeBond": 10 * TOKEN_UNIT,
    "forcedErrorBps": 500,
    # the per-unit verifier lock S = max(verifierLock, solverPay (2m' - 1) factor / n): 68 =
    # ceil(1.25 e / p) at p = 5 % (docs/INCENTIVES.md §3.2); 0 leaves the flat verifierLock
    "lazySlashFactor": 68,
    # drawn verifiers open their sealed attestations within this after the challenge window
    # (at once if every drawn verifier sealed): an online node (heartbeatTtl) answers in time
    "revealWindow": 1 * HOUR,
    # a settled job's record takes a new job only this long after its deadline (PROTOCOL §6.10):
    # longer than the attestation court's window, within which the court's first case over the
    # unit reads it (and then keeps it)
    "recordRetention": COURT_WINDOW + 1 * DAY,
}

#: RoundManager.Config defaults (docs/PROTOCOL.md §6.9 gives the reasons).
DEFAULT_ROUND_CONFIG: dict[str, int] = {
    "aggregationWindow": 1 * HOUR,
    "aggregatorBond": 50 * TOKEN_UNIT,
    "challengerRewardBps": 5_000,
}

#: AttestationCourt constructor defaults (PROTOCOL §7.1): a challenge's bond floor, the penalty
#: floor, the whistleblower's share of a penalty, and the window after a unit's challenge deadline.
DEFAULT_COURT: dict[str, int] = {
    "bond": 10 * TOKEN_UNIT,
    "penalty": 20 * TOKEN_UNIT,
    "reward_bps": 5_000,
    "window": COURT_WINDOW,
}

REGISTRY_FIELDS = tuple(DEFAULT_REGISTRY_CONFIG)
MANAGER_FIELDS = tuple(DEFAULT_MANAGER_CONFIG)


class DeploymentError(RuntimeError):
    """A deployment or wiring step failed; the message names the step."""


def load_artifact(name: str, abi_dir: Path = DEFAULT_ABI_DIR) -> dict[str, Any]:
    path = Path(abi_dir) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run `make compile` first")
    return json.loads(path.read_text())


@dataclass
class Journal:
    """What a deployment has done, step by step: `sent[step]` is the hash of the transaction
    signed for it (recorded before sending), `done[step]` its result once mined (the deployed
    address, or "done" for a call). `save` is called after every change (the CLI writes the
    deployment file there), so a crash between any two lines leaves a journal to resume from."""

    sent: dict[str, str] = field(default_factory=dict)
    done: dict[str, str] = field(default_factory=dict)
    save: Callable[[Journal], None] = lambda journal: None


class _Sender:
    """Signs and sends one account's transactions in order, tracking the nonce locally; with a
    journal, skips the steps it records as done and recovers the ones it records as sent."""

    def __init__(self, w3: Web3, private_key: str, journal: Journal | None = None) -> None:
        self.w3 = w3
        self.account: LocalAccount = Account.from_key(private_key)
        self.nonce = w3.eth.get_transaction_count(self.account.address, "pending")
        self.chain_id = w3.eth.chain_id
        self.journal = journal or Journal()

    def _recovered(self, step: str) -> dict[str, Any] | None:
        """The receipt of a step's transaction sent before a crash, if it was mined."""
        tx_hash = self.journal.sent.get(step)
        if tx_hash is None:
            return None
        try:
            self.w3.eth.get_transaction(tx_hash)
        except Exception:  # noqa: BLE001 - unknown to the node: it never got out, send again
            return None
        # Mined, or still pending (then waiting for it, not sending a second transaction).
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120)
        if receipt["status"] != 1:
            raise DeploymentError(f"{step}: transaction {tx_hash} reverted")
        return receipt

    def _send(self, tx: dict[str, Any], step: str) -> dict[str, Any]:
        signed = self.account.sign_transaction(tx)
        # INVARIANT: the hash is on record before the transaction can reach the chain.
        self.journal.sent[step] = "0x" + bytes(signed.hash).hex()
        self.journal.save(self.journal)
        try:
            tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        except Exception as exc:
            raise DeploymentError(f"{step}: transaction rejected: {exc}") from exc
        self.nonce += 1
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120)
        if receipt["status"] != 1:
            raise DeploymentError(f"{step}: transaction {tx_hash.hex()} reverted")
        return receipt

    def _base(self) -> dict[str, Any]:
        return {"from": self.account.address, "nonce": self.nonce, "chainId": self.chain_id}

    def _finish(self, step: str, result: str) -> str:
        self.journal.done[step] = result
        self.journal.save(self.journal)
        return result

    def deploy(self, artifact: Mapping[str, Any], *args: Any, step: str) -> str:
        if step in self.journal.done:
            address = self.journal.done[step]
            if not self.w3.eth.get_code(address):
                raise DeploymentError(f"{step}: the journal's {address} has no code on this chain")
            return address
        receipt = self._recovered(step)
        if receipt is None:
            factory = self.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
            try:
                tx = factory.constructor(*args).build_transaction(self._base())
            except Exception as exc:  # gas estimation runs the constructor: a revert lands here
                raise DeploymentError(f"{step}: constructor would fail: {exc}") from exc
            receipt = self._send(tx, step)
        return self._finish(step, Web3.to_checksum_address(receipt["contractAddress"]))

    def call(self, fn: ContractFunction, step: str) -> None:
        if step in self.journal.done:
            return
        if self._recovered(step) is None:
            try:
                tx = fn.build_transaction(self._base())
            except Exception as exc:
                raise DeploymentError(f"{step}: call would fail: {exc}") from exc
            self._send(tx, step)
        self._finish(step, "done")


def deploy_contract(
    w3: Web3, private_key: str, name: str, *args: Any, abi_dir: Path = DEFAULT_ABI_DIR
) -> str:
    """Deploy artifact `name` with constructor `args`; return its checksummed address."""
    return _Sender(w3, private_key).deploy(load_artifact(name, abi_dir), *args, step=name)


def _config_tuple(defaults: Mapping[str, int], overrides: Mapping[str, int] | None) -> tuple:
    merged = dict(defaults)
    for key, value in (overrides or {}).items():
        if key not in merged:
            raise DeploymentError(f"unknown config field {key!r}; expected one of {list(merged)}")
        merged[key] = int(value)
    return tuple(merged[key] for key in defaults)


def deploy_all(
    w3: Web3,
    deployer_private_key: str,
    abi_dir: Path = DEFAULT_ABI_DIR,
    params: dict[str, Any] | None = None,
    journal: Journal | None = None,
) -> dict[str, str]:
    """Deploy every protocol contract and wire them; return contract name -> address. With a
    `journal`, resumable: the steps it records are not sent again (module docstring).

    Keys: ``Token`` (the payment token; also ``TestToken`` when one was deployed),
    ``NodeRegistry``, ``JobManager``, ``Arbiter`` (when wired), ``MockArbiter`` (when deployed)
    and ``JobLens`` (the agents' one-call view of a unit, PROTOCOL §6.12; always).

    `params` (all optional):
      - ``token``: address of an existing ERC-20 payment token (default: deploy a TestToken);
      - ``registry_config`` / ``manager_config``: overrides of DEFAULT_REGISTRY_CONFIG /
        DEFAULT_MANAGER_CONFIG fields;
      - ``arbiter``: address of the dispute arbiter to wire into the JobManager;
      - ``mock_arbiter``: True to deploy and wire a MockArbiter (tests, demos) when no
        ``arbiter`` is given;
      - ``dispute_game``: True to deploy the real dispute game (``OneStepProver``, then
        ``DisputeGame(manager, prover, clock_budget, False)``, PROTOCOL §7.9) and wire it as the
        arbiter when no ``arbiter`` is given; ``clock_budget`` (seconds per side, default 3600);
      - ``attestation_court``: True (or a dict of ``bond``, ``penalty``, ``reward_bps``,
        ``window``: seconds after a unit's challenge deadline to take an attestation to court) to
        deploy an AttestationCourt (a second registry slasher) with its own DisputeGame, through
        which whistleblowers dispute verifiers' attestations (needs ``dispute_game``;
        ``court_clock_budget``: that game's seconds per side, default ``clock_budget``);
      - ``round_manager``: True to deploy a RoundManager (decomposed jobs, PROTOCOL §6.9) over
        the JobManager, wired into it (``JobManager.setRoundManager``: its units follow the
        placement rule); ``round_config``: overrides of DEFAULT_ROUND_CONFIG fields. With
        ``dispute_game`` too, its aggregation game (``DisputeGame(roundManager, prover,
        clock_budget, True)``, after the JobLens) is wired with ``RoundManager.setGame``, so
        version-3 decomposed jobs can be posted; without it only version-2 ones.
    Without an arbiter the JobManager is deployed unwired: the deployer must call
    ``setArbiter(address)`` once before any job can be posted.
    """
    params = dict(params or {})
    abi_dir = Path(abi_dir)
    sender = _Sender(w3, deployer_private_key, journal)
    out: dict[str, str] = {}

    token = params.get("token")
    if token:
        token = Web3.to_checksum_address(token)
        if not w3.eth.get_code(token):
            raise DeploymentError(f"token: no contract at {token}")
    else:
        token = sender.deploy(load_artifact("TestToken", abi_dir), step="TestToken")
        out["TestToken"] = token
    out["Token"] = token

    reg_art = load_artifact("NodeRegistry", abi_dir)
    reg_cfg = _config_tuple(DEFAULT_REGISTRY_CONFIG, params.get("registry_config"))
    registry = sender.deploy(reg_art, token, reg_cfg, step="NodeRegistry")
    out["NodeRegistry"] = registry

    mgr_art = load_artifact("JobManager", abi_dir)
    mgr_cfg = _config_tuple(DEFAULT_MANAGER_CONFIG, params.get("manager_config"))
    manager = sender.deploy(mgr_art, registry, mgr_cfg, step="JobManager")
    out["JobManager"] = manager
    # the rare paths' code, deployed for this manager and wired at once (PROTOCOL §6.12)
    extension = sender.deploy(load_artifact("JobManagerExtension", abi_dir), manager,
                              step="JobManagerExtension")  # fmt: skip
    mgr = w3.eth.contract(address=manager, abi=mgr_art["abi"])
    sender.call(mgr.functions.setExtension(extension), step="JobManager.setExtension")
    out["JobManagerExtension"] = extension

    slashers = [manager]
    court_params = params.get("attestation_court")
    if court_params:
        court_params = {**DEFAULT_COURT,
                        **(court_params if isinstance(court_params, dict) else {})}  # fmt: skip
        court = sender.deploy(
            load_artifact("AttestationCourt", abi_dir), manager, registry,
            int(court_params["bond"]), int(court_params["penalty"]),
            int(court_params["reward_bps"]), int(court_params["window"]), step="AttestationCourt",
        )  # fmt: skip
        out["AttestationCourt"] = court
        slashers.append(court)
    reg = w3.eth.contract(address=registry, abi=reg_art["abi"])
    sender.call(reg.functions.setSlashers(slashers), step="NodeRegistry.setSlashers")

    arbiter = params.get("arbiter")
    if not arbiter and params.get("dispute_game"):
        prover = sender.deploy(load_artifact("OneStepProver", abi_dir), step="OneStepProver")
        budget = int(params.get("clock_budget", HOUR))
        game_art = load_artifact("DisputeGame", abi_dir)
        arbiter = sender.deploy(game_art, manager, prover, budget, False, step="DisputeGame")
        out["OneStepProver"] = prover
        out["DisputeGame"] = arbiter
        if court_params:
            court_budget = int(params.get("court_clock_budget", budget))
            # managerRegistersOnly: the court copies each job's config from the job manager's
            # game; a submitter cannot register one there after the attestations (§6.8)
            court_game = sender.deploy(game_art, out["AttestationCourt"], prover, court_budget,
                                       True, step="DisputeGame (court)")  # fmt: skip
            court_art = load_artifact("AttestationCourt", abi_dir)
            court_c = w3.eth.contract(address=out["AttestationCourt"], abi=court_art["abi"])
            sender.call(court_c.functions.setGame(court_game), step="AttestationCourt.setGame")
            out["CourtGame"] = court_game
    if not arbiter and params.get("mock_arbiter"):
        mock_art = load_artifact("MockArbiter", abi_dir)
        arbiter = sender.deploy(mock_art, step="MockArbiter")
        mock = w3.eth.contract(address=arbiter, abi=mock_art["abi"])
        sender.call(mock.functions.wire(manager), step="MockArbiter.wire")
        out["MockArbiter"] = arbiter
    if arbiter:
        arbiter = Web3.to_checksum_address(arbiter)
        sender.call(mgr.functions.setArbiter(arbiter), step="JobManager.setArbiter")
        out["Arbiter"] = arbiter
    if params.get("round_manager"):
        rm_cfg = _config_tuple(DEFAULT_ROUND_CONFIG, params.get("round_config"))
        rm_art = load_artifact("RoundManager", abi_dir)
        out["RoundManager"] = sender.deploy(rm_art, manager, rm_cfg, step="RoundManager")
        sender.call(mgr.functions.setRoundManager(out["RoundManager"]),
                    step="JobManager.setRoundManager")  # fmt: skip
    # Last, so that the other contracts' addresses (the deployer's nonces) are as before it.
    out["JobLens"] = sender.deploy(load_artifact("JobLens", abi_dir), manager, step="JobLens")
    if params.get("round_manager") and out.get("OneStepProver"):
        # the aggregation game: managed by the round manager, which alone registers its configs
        game_art = load_artifact("DisputeGame", abi_dir)
        budget = int(params.get("clock_budget", HOUR))
        out["RoundGame"] = sender.deploy(game_art, out["RoundManager"], out["OneStepProver"],
                                         budget, True, step="DisputeGame (rounds)")  # fmt: skip
        rm_c = w3.eth.contract(address=out["RoundManager"], abi=rm_art["abi"])
        sender.call(rm_c.functions.setGame(out["RoundGame"]), step="RoundManager.setGame")
    return out
