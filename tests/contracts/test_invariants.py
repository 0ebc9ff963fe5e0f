"""Stateful property test: random sequences of protocol actions by several accounts, with time
jumps, never break conservation of money nor let anyone withdraw more than it is owed.

Transactions go through web3.py with locally signed transactions (ape costs ~12 RPC calls per
transaction); the chain is reverted to a snapshot before each example, so Anvil's chain stays
short. After every step the test checks, against the contracts' views and against its own
independent ledger (a Python model of every payout rule in docs/PROTOCOL.md §6):

- registry token balance == Σ stake + Σ unbonding;
- a unit's verifiers are drawn by the keeper's drawVerifiers or by the first drawn verifier's
  seal (PROTOCOL §6.5), the same draw its simulation at the pending block showed; a solver
  that finalizes its own unit is paid in that transaction, anyone else's finalize credits it;
- job-manager token balance == Σ job escrow + Σ open dispute bonds + Σ open data-request bonds
  + Σ credits + jackpot (data requests, PROTOCOL §6.11: requested by a drawn verifier or the
  submitter, answered on chain from real small states, expired, or voided by a forced reveal);
- attestation-court token balance == Σ open case bonds + Σ court credits (PROTOCOL §7.1: a
  whistleblower's bond, and the penalty slashed from a verifier's registry stake when the
  whistleblower wins, end up credited or, through `fundJackpot`, in the manager's jackpot);
- every credit, escrow, stake, unbonding amount and the jackpot equal the model's;
- `withdraw` / `withdrawUnbonded` succeed exactly when the model says something is owed and
  transfer exactly that amount (the court's `withdraw` too);
- every role pool's live entries are exactly the registered nodes, each on the entry its
  poolSlot names; entries never move or lose their addedBlock; the pool grows only when no dead
  entry is left to take (PROTOCOL §6.2, the verifier draw's basis);
- every job gets the id (record and generation) the model's allocator predicts: a settled job's
  record takes a new job once `recordRetention` is past its deadline, unless the court kept it
  (PROTOCOL §6.10); a job whose record was recycled reads as unknown, and no action on its id
  succeeds (every rule checks the model's status against what the chain accepted).

A CI run must also reach every money-moving flow (REQUIRED_OUTCOMES), taking up to TOP_UPS
extra batches of fresh sequences when the chain's randomness kept its first batch from one.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from eth_account import Account
from eth_utils import keccak
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from web3.exceptions import ContractLogicError
from web3.logs import DISCARD

from agents.core.deploy import deploy_all
from agents.dispute.availability import DATA_SAMPLES, StateOpening
from agents.economics.detection import chain_sample
from agents.roles.forced_reveal import forced_reveal, judged_checkpoints
from agents.training.merkle import CHECKPOINT_DOMAIN, checkpoint_root, list_proof, state_root

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
EXAMPLES = int(
    os.environ.get("VTP_INVARIANT_EXAMPLES", {"ci": 200, "fuzz": 3_000}.get(PROFILE, 200))
)
STEPS = {"ci": 8, "fuzz": 20}.get(PROFILE, 8)

E18 = 10**18
MNEMONIC = "test test test test test test test test test test test junk"
GAS = 3_000_000
DEBUG = bool(os.environ.get("VTP_INVARIANT_DEBUG"))

REG_CFG = {
    "minSolverStake": 100 * E18,
    "minVerifierStake": 50 * E18,
    "minWhistleblowerStake": 10 * E18,
    "unbondingDelay": 7_200,
    "heartbeatTtl": 5_000,
}
MGR_CFG = {
    "claimWindow": 600,
    "verifyWindow": 3_600,
    "disputeGrace": 300,
    "taxBps": 200,
    "challengerRewardBps": 5_000,
    "collateralBps": 10_000,
    "verifiersPerUnit": 2,
    "segmentsPerVerifier": 2,
    "verifierLock": 10 * E18,
    # the floor of challengeBondOf: half the collateral (the reward) equals it for the 20-token
    # job and is above it for the others, so a flat bond breaks the books (the floor strictly
    # above the share is tested in test_job_manager.py)
    "challengeBond": 10 * E18,
    # every round forced (jobs have 4 segments), so reveals, jackpot payouts and lazy slashes
    # happen often, and whether a round is forced never depends on the chain's randomness (a
    # hypothesis example must draw the same data when it is replayed)
    "forcedErrorBps": 10_000,
    # the per-unit verifier lock S = max(verifierLock, payout (2m' - 1) factor / n) (PROTOCOL §8):
    # at factor 1 it varies with the job (14.55 / 73.35 / 110.1 / 183.6 tokens for the rewards
    # posted) and is above the 10-token floor, so a slash or release of the floor instead of S
    # breaks the books; the verifiers stake enough to hold every lock an example can ask for
    "lazySlashFactor": 1,
    # sealed attestations are opened within this after the challenge window
    "revealWindow": 600,
    # a settled job's record takes a new job this long after its deadline (PROTOCOL §6.10):
    # longer than the court's window (the court refuses a shorter retention), which is long so
    # that a settled unit's attestations stay open to the court through an example's time jumps
    # (with a 1-hour window and 1.5-hour retention the court's flows came 2-7 times in 200
    # examples); records are recycled by `recycle_under_the_cursor`, which waits this out
    "recordRetention": 90_000,
}
SALT = b"\x5a" * 32  # the verifiers' attestation salt (the seal binds the verifier anyway)
COURT_CFG = {"bond": 10 * E18, "penalty": 20 * E18, "reward_bps": 5_000, "window": 86_400}
BPS = 10_000
ROLES = {"solver": 1, "verifier": 2, "whistleblower": 3}
# account index -> (role, initial stake)
NODES = {
    3: ("solver", 200 * E18),
    4: ("solver", 200 * E18),
    5: ("solver", 150 * E18),
    6: ("verifier", 3_000 * E18),
    7: ("verifier", 3_000 * E18),
    8: ("whistleblower", 20 * E18),
}
SUBMITTERS = (1, 2)
ACCOUNTS = (1, 2, 3, 4, 5, 6, 7, 8)
UNIT_SHIFT = 32

# Unit statuses (IJobManager.UnitStatus)
OPEN, SELECTING, ASSIGNED, COMMITTED, VERIFYING, DISPUTED, FINAL, CANCELLED = range(1, 9)
# Every solver's forced-error secret (PROTOCOL §8). Jobs have T/k = 4 segments; the true
# checkpoint list is TRUE; a forced round publishes it with its perturbed checkpoints replaced
# (the anchor, and each other one of 1..3 with probability 1/3).
SECRET = b"\x5e" * 32
SEGMENTS = 4
# The true checkpoints are real small states (two tensors, 3 + 1 chunks), so that a data
# request over one (PROTOCOL §6.11) can be answered on chain; a perturbed checkpoint's
# published value (LAZY_END) is no state's root, and a request over it cannot be answered.
# An answer's samples go in batches of SAMPLE_BATCH (two calls): a partial answer stops between.
STATES = [
    {
        "w0": torch.arange(130, dtype=torch.float32).reshape(1, 130) * (i + 1),
        "b0": torch.full((1, 3), float(i), dtype=torch.float32),
    }
    for i in range(SEGMENTS + 1)
]
TRUE = [state_root(list(st_.items())) for st_ in STATES]
OPENINGS = [StateOpening(st_) for st_ in STATES]
SAMPLE_BATCH = DATA_SAMPLES // 2
TRUE_ROOT = checkpoint_root(TRUE)
SEAL = keccak(TRUE_ROOT + SECRET)
LAZY_END = b"\xee" * 32  # the perturbed value a forced round publishes
REPLAYED = b"\xdd" * 32  # an honest replay's end root from a perturbed start state


def published(perturbed: tuple[int, ...]) -> list[bytes]:
    """The checkpoint list a round publishes: TRUE, with the `perturbed` checkpoints replaced."""
    return [LAZY_END if i in perturbed else r for i, r in enumerate(TRUE)]


def _keys() -> list[str]:
    Account.enable_unaudited_hdwallet_features()
    return [
        Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}").key.hex()
        for i in range(10)
    ]


ARTIFACTS = (
    "TestToken",
    "NodeRegistry",
    "JobManager",
    "JobManagerExtension",
    "MockArbiter",
    "LedgerLens",
    "ForcedErrorJudge",
    "AttestationCourt",
    "MockSegmentGame",
    "JobLens",
)


def _export_artifacts(project: Any, out: Path, names: tuple[str, ...] = ARTIFACTS) -> None:
    """Write build/abi-style artifacts from ape's compiled contract types (no export step)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        ct = getattr(project, name).contract_type
        artifact = {
            "contractName": name,
            "abi": [item.model_dump(by_alias=True, mode="json") for item in ct.abi],
            "bytecode": ct.deployment_bytecode.bytecode,
        }
        (out / f"{name}.json").write_text(json.dumps(artifact))


class World:
    """One deployment with registered nodes, shared by every example (reverted in between)."""

    def __init__(self, chain: Any, project: Any, tmp: Path) -> None:
        self.chain = chain
        self.w3 = chain.provider.web3
        keys = _keys()
        self.keys = keys
        self.addr = [Account.from_key(k).address for k in keys]
        _export_artifacts(project, tmp)
        addrs = deploy_all(
            self.w3,
            keys[0],
            tmp,
            {
                "mock_arbiter": True,
                "registry_config": REG_CFG,
                "manager_config": MGR_CFG,
                "attestation_court": COURT_CFG,
            },
        )
        abi = {n: json.loads((tmp / f"{n}.json").read_text())["abi"] for n in ("TestToken",)}
        load = lambda n: json.loads((tmp / f"{n}.json").read_text())["abi"]  # noqa: E731
        self.token = self.w3.eth.contract(address=addrs["Token"], abi=abi["TestToken"])
        self.registry = self.w3.eth.contract(
            address=addrs["NodeRegistry"], abi=load("NodeRegistry")
        )
        self.manager = self.w3.eth.contract(address=addrs["JobManager"], abi=load("JobManager"))
        self.arbiter = self.w3.eth.contract(address=addrs["MockArbiter"], abi=load("MockArbiter"))
        self.judge = self.w3.eth.contract(
            address=self.manager.functions.forcedErrorJudge().call(), abi=load("ForcedErrorJudge")
        )
        lens_abi = load("LedgerLens")
        lens_bytecode = json.loads((tmp / "LedgerLens.json").read_text())["bytecode"]
        factory = self.w3.eth.contract(abi=lens_abi, bytecode=lens_bytecode)
        tx_hash = factory.constructor().transact({"from": self.addr[0]})
        lens_address = self.w3.eth.wait_for_transaction_receipt(tx_hash)["contractAddress"]
        self.lens = self.w3.eth.contract(address=lens_address, abi=lens_abi)
        # the court plays its games against a mock segment game (its outcome is the test's pick)
        self.court = self.w3.eth.contract(
            address=addrs["AttestationCourt"], abi=load("AttestationCourt")
        )
        game_abi = load("MockSegmentGame")
        game_bytecode = json.loads((tmp / "MockSegmentGame.json").read_text())["bytecode"]
        factory = self.w3.eth.contract(abi=game_abi, bytecode=game_bytecode)
        tx_hash = factory.constructor().transact({"from": self.addr[0]})
        game_address = self.w3.eth.wait_for_transaction_receipt(tx_hash)["contractAddress"]
        self.court_game = self.w3.eth.contract(address=game_address, abi=game_abi)
        self.chain_id = self.w3.eth.chain_id
        self.gas_price = max(self.w3.eth.gas_price, 1) * 2
        self.nonces: dict[int, int] = {}
        self.reset_nonces()
        self.clock = self.now()  # see `now`: from here on every block's timestamp comes from it
        assert self.send(0, self.court_game.functions.wire(self.court.address))
        assert self.send(0, self.court.functions.setGame(self.court_game.address))
        for i in ACCOUNTS:
            self.send(0, self.token.functions.mint(self.addr[i], 10_000 * E18))
            for spender in (self.registry.address, self.manager.address, self.court.address):
                self.send(i, self.token.functions.approve(spender, 2**256 - 1))
        for i, (role, stake) in NODES.items():
            ok = self.send(
                i, self.registry.functions.register(ROLES[role], (1, 16_384, 100), stake)
            )
            assert ok
        self.seed_jackpot()
        self.snapshot = chain.snapshot()

    def seed_jackpot(self) -> None:
        """Every example starts with 100 tokens in the jackpot, as a deployer seeds it (PROTOCOL
        §8): account 9 (outside the model) claims a job of the deployer's and misses its commit
        deadline (its collateral goes to the jackpot) and leaves with the rest of its stake; the
        deployer cancels the job and withdraws the refund, so the manager holds the jackpot only
        and the registry the model's nodes' stake only. Without it a forced round revealed before
        any other slash or tax pays its catchers nothing."""
        for i, amount in ((0, 100 * E18), (9, 200 * E18)):
            assert self.send(0, self.token.functions.mint(self.addr[i], amount))
            for spender in (self.registry.address, self.manager.address):
                assert self.send(i, self.token.functions.approve(spender, 2**256 - 1))
        reg, mgr = self.registry.functions, self.manager.functions
        assert self.send(9, reg.register(ROLES["solver"], (1, 16_384, 100), 200 * E18))
        job = (b"\x01" * 32, b"\x02" * 32, b"\x03" * 32, 8, 2, (1, 8_192, 50))
        job += (100 * E18, E18 // 5, self.pending_now() + 600, 60, b"\x04" * 32)
        assert self.send(0, mgr.postJob(job))
        unit = mgr.unitIdOf(mgr.jobCount().call(), 0).call()
        assert self.send(9, mgr.claim(unit, keccak(SECRET)))
        self.jump(601)
        assert self.send(0, mgr.closeClaims(unit))
        self.jump(1)
        assert self.send(0, mgr.selectAssignee(unit))
        self.jump(61)
        assert self.send(0, mgr.expireAssignment(unit))
        assert self.send(0, mgr.cancelJob(mgr.jobIdOf(unit).call()))
        # the seed job's record (record 1) takes a new job recordRetention after this deadline
        self.seed_deadline = mgr.getUnit(unit).call()[4]
        assert self.send(0, mgr.withdraw())
        assert self.send(9, reg.requestUnbond(100 * E18))
        self.jump(REG_CFG["unbondingDelay"])
        assert self.send(9, reg.withdrawUnbonded())
        self.jackpot = mgr.jackpot().call()
        assert self.jackpot == 100 * E18

    def reset_nonces(self) -> None:
        for i in range(10):
            self.nonces[i] = self.w3.eth.get_transaction_count(self.addr[i])

    def restore(self) -> None:
        self.chain.restore(self.snapshot)
        self.snapshot = self.chain.snapshot()
        self.reset_nonces()
        self.clock = self.now()

    def send(self, who: int, fn: Any) -> bool:
        """Send `fn` from account `who` with a fixed gas limit; True when it did not revert."""
        tx = {
            "to": fn.address,
            "data": fn._encode_transaction_data(),
            "gas": GAS,
            "gasPrice": self.gas_price,
            "nonce": self.nonces[who],
            "chainId": self.chain_id,
            "value": 0,
        }
        signed = Account.sign_transaction(tx, self.keys[who])
        self.clock += 1
        self.chain.pending_timestamp = self.clock
        tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        self.nonces[who] += 1
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
        self.last_receipt = receipt
        if DEBUG:
            print(f"  {who} {fn.fn_name}{tuple(fn.args)} -> {receipt['status']}")
        return receipt["status"] == 1

    # Every block of an example gets its timestamp from `clock` (one second per transaction,
    # `jump` for time travel), never from the wall clock: with a zero base fee the blocks, and
    # so the block hashes the contracts draw their randomness from, are then the same each
    # time hypothesis replays an example, which it requires (else FlakyStrategyDefinition).

    def now(self) -> int:
        """Timestamp of the latest block (the one the last transaction landed in)."""
        return self.w3.eth.get_block("latest")["timestamp"]

    def pending_now(self) -> int:
        """Timestamp the next transaction's block will have."""
        return self.clock + 1

    def jump(self, seconds: int) -> None:
        self.clock += seconds
        self.chain.mine(1, timestamp=self.clock)


@dataclass
class UnitModel:
    job_id: int
    submitter: int
    reward: int
    fee: int
    escrow: int
    status: int = OPEN
    assignee: int | None = None
    verifiers: list[int] = field(default_factory=list)
    sealed: set[int] = field(default_factory=set)  # sealed (opened or not)
    attested: set[int] = field(default_factory=set)  # opened its seal
    game: int | None = None  # the dispute's running game (None: none, or its result is held)
    challenger: int | None = None
    bond: int = 0
    # a challenger's win held for the forced round's reveal: settleable after this (0: none)
    held_until: int = 0
    perturbed: tuple[int, ...] = ()  # the perturbed checkpoints of a forced round (): not forced
    revealed: bool = False
    ends: dict[int, list[bytes]] = field(default_factory=dict)  # sealed end roots
    slashed: set[int] = field(default_factory=set)  # attested wrong at the forced checkpoint
    catchers: list[int] = field(default_factory=list)  # attested right there: paid at finalize
    court: set[tuple[int, int]] = field(default_factory=set)  # (verifier, entry): open or slashed
    stood: dict[tuple[int, int], int] = field(default_factory=dict)  # entry -> its case ended at
    # the record the job lives in and its generation there (PROTOCOL §6.10)
    record: int = 0
    generation: int = 0
    settled_deadline: int = 0  # the unit's deadline once it settled: the record is free after it
    kept: bool = False  # a court case was opened over it: its record is never recycled
    recycled: bool = False  # its record took another job: every view reads it as unknown
    # an open data request (PROTOCOL §6.11): its requester (None: none open), checkpoint and
    # answer deadline, whether its state and its headers were opened and how many samples were
    # proved; its bond is `bond` (a unit has a game's dispute or a data request, never both)
    data_requester: int | None = None
    data_checkpoint: int = 0
    data_deadline: int = 0
    data_opened: bool = False
    data_headers: bool = False
    data_samples: int = 0
    data_requested: set[int] = field(default_factory=set)  # requesters of this attempt


_WORLD: World | None = None
#: How often each outcome happened over the run (printed, and checked for coverage).
SEEN: Counter[str] = Counter()
# the same outcomes with their details ("revealed forced (2 catchers, 0 slashed)"), printed so a
# run that misses an outcome shows how near it came
DETAILS: Counter[str] = Counter()


@pytest.fixture(scope="module")
def world(chain, project, tmp_path_factory) -> World:
    global _WORLD
    _WORLD = World(chain, project, tmp_path_factory.mktemp("abi"))
    yield _WORLD
    _WORLD = None


class ProtocolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert _WORLD is not None
        self.w = _WORLD
        self.w.restore()
        self.units: dict[int, UnitModel] = {}
        self.credits: dict[int, int] = dict.fromkeys(ACCOUNTS, 0)
        self.jackpot = self.w.jackpot  # seeded by the world
        self.stake = {i: s for i, (_, s) in NODES.items()}
        self.unbonding = dict.fromkeys(NODES, 0)
        self.unbond_ready = dict.fromkeys(NODES, 0)
        # stake the court recalled from the unbonding of a node with no role (lockAnswerable),
        # locked for its open cases: such a node is still gone
        self.held_gone = dict.fromkeys(NODES, 0)
        self.index = {a.lower(): i for i, a in enumerate(self.w.addr)}
        # the attestation court's books: game id -> (unit, verifier, open bond, locked penalty) of
        # each case ever opened
        self.cases: dict[int, tuple[int, int, int, int]] = {}
        self.court_credits: dict[int, int] = dict.fromkeys(ACCOUNTS, 0)
        # each role pool as last read: [(node, addedBlock, joinedBlock, live)], dead entries
        self.pools: dict[int, tuple[list[tuple[int, int, int, bool]], int]] = {}
        self.rejoined: set[int] = set()  # nodes that registered again since the last check
        # the job manager's records (PROTOCOL §6.10) as the model allocates them: record 1 holds
        # the world's seed job (cancelled), and the cursor waits on it
        seed = UnitModel(0, 0, 0, 0, 0, status=CANCELLED, record=1)
        seed.settled_deadline = self.w.seed_deadline
        self.records: dict[int, UnitModel] = {1: seed}
        self.cursor, self.record_count = 1, 1

    # ------------------------------------------------------------------ helpers
    def _seen(self, what: str) -> None:
        event(what)
        SEEN[what.split(" (")[0]] += 1
        DETAILS[what] += 1

    @property
    def m(self) -> Any:
        return self.w.manager.functions

    @property
    def r(self) -> Any:
        return self.w.registry.functions

    def _unit(self, data: st.DataObject) -> tuple[int, UnitModel] | None:
        if not self.units:
            return None
        uid = data.draw(st.sampled_from(sorted(self.units)))
        return uid, self.units[uid]

    def _who(self, address: str) -> int:
        return self.index[address.lower()]

    def _collateral(self, u: UnitModel) -> int:
        return u.reward * MGR_CFG["collateralBps"] // BPS

    def lock(self, u: UnitModel) -> int:
        """The unit's verifier lock S, computed independently of the contract."""
        pay = u.reward - u.fee - u.reward * MGR_CFG["taxBps"] // BPS
        m = min(MGR_CFG["segmentsPerVerifier"], SEGMENTS)
        lazy = pay * (2 * m - 1) * MGR_CFG["lazySlashFactor"] // SEGMENTS
        return max(MGR_CFG["verifierLock"], lazy)

    def _reopen(self, u: UnitModel) -> None:
        u.status, u.assignee = OPEN, None
        u.game, u.challenger, u.bond, u.held_until = None, None, 0, 0
        u.verifiers, u.sealed, u.attested = [], set(), set()
        u.perturbed, u.revealed, u.ends, u.slashed = (), False, {}, set()
        u.catchers = []  # C was overturned (or never revealed): no catcher is paid
        u.court = set()  # a new attempt: its attestations can be taken to court afresh
        u.stood = {}
        u.data_requester, u.data_requested = None, set()

    # ------------------------------------------------------------------ rules
    @rule(
        who=st.sampled_from(SUBMITTERS),
        reward=st.sampled_from([20 * E18, 100 * E18, 150 * E18, 250 * E18]),
        window=st.sampled_from([60, 600, 3_000]),
        valid=st.sampled_from([True, True, True, False]),
    )
    def post(self, who: int, reward: int, window: int, valid: bool) -> None:
        fee = E18 // 5  # within the jackpot cap: fee * forcedErrorBps <= reward * taxBps
        steps = 8 if valid else 7
        params = (
            b"\x01" * 32,
            b"\x02" * 32,
            b"\x03" * 32,
            steps,
            2,
            (1, 8_192, 50),
            reward,
            fee,
            self.w.pending_now() + window,
            1_800,
            b"\x04" * 32,  # the dispute config, posted with the job
        )
        t = self.w.pending_now()
        ok = self.w.send(who, self.m.postJob(params))
        assert ok == valid
        if ok:
            record, generation = self.allocate(t)
            job_id = generation << 32 | record
            posted = self.w.manager.events.JobPosted().process_receipt(
                self.w.last_receipt, errors=DISCARD
            )
            assert posted[0]["args"]["jobId"] == job_id, (
                f"job id {posted[0]['args']['jobId']:#x}, model {job_id:#x}"
            )
            u = UnitModel(job_id, who, reward, fee, reward, record=record, generation=generation)
            self.units[job_id << UNIT_SHIFT] = u
            self.records[record] = u

    @rule(who=st.sampled_from(SUBMITTERS))
    def recycle_under_the_cursor(self, who: int) -> None:
        """Settle the job under the cursor if it can be at once (cancel it while Open), wait
        until its record is free and post: the new job must take it (PROTOCOL §6.10), and the
        old job's id must then read as unknown and move nothing (`recycled_jobs_read_unknown`,
        every random action on it)."""
        u = self.records[self.cursor]
        if u.job_id and u.status in (OPEN, SELECTING):
            self.cancel_job(u.job_id << UNIT_SHIFT, u.submitter)
        if u.status not in (FINAL, CANCELLED) or u.kept:
            return
        wait = u.settled_deadline + MGR_CFG["recordRetention"] + 1 - self.w.pending_now()
        if wait > 0:
            self.w.jump(wait)
        self.post(who, 100 * E18, 600, True)

    def allocate(self, t: int) -> tuple[int, int]:
        """The record and generation a job posted (by an account) at time `t` gets: the record
        under the cursor if its job settled, is not kept and its deadline is recordRetention past,
        else a new one; the cursor waits on a settled record not yet free and otherwise moves
        on, around the records allocated before this post (JobManager._allocate)."""
        old = self.records[self.cursor]
        settled = old.status in (FINAL, CANCELLED) and not old.kept and old.generation < 255
        free = settled and t > old.settled_deadline + MGR_CFG["recordRetention"]
        if not settled or free:
            moved = 1 if self.cursor == self.record_count else self.cursor + 1
        if free:
            record, generation = self.cursor, old.generation + 1
            old.recycled = True
            self._seen("record recycled" if old.job_id else "seed record recycled")
        else:
            self.record_count += 1
            record, generation = self.record_count, 0
        if not settled or free:
            self.cursor = moved
        return record, generation

    def claim(self, data: st.DataObject, solver: int) -> None:
        picked = self._unit(data)
        if picked:
            self.claim_unit(picked[0], solver)

    def claim_unit(self, uid: int, solver: int) -> None:
        if self.w.send(solver, self.m.claim(uid, keccak(SECRET))):
            assert self.units[uid].status == OPEN
            self._seen("claimed")

    @rule(
        data=st.data(),
        kind=st.sampled_from(
            ["claim", "close", "commit", "draw", "attest", "challenge", "finalize", "expire"]
        ),
    )
    def random_action(self, data: st.DataObject, kind: str) -> None:
        """One action on a random unit by a random (often wrong) actor."""
        if kind == "claim":
            self.claim(data, data.draw(st.sampled_from([3, 4, 5])))
        elif kind == "close":
            self.close_and_select(data)
        elif kind == "commit":
            self.commit(data, data.draw(st.booleans()))
        elif kind == "draw":
            self.draw_verifiers(data)
        elif kind == "attest":
            self.attest(data, data.draw(st.sampled_from([6, 7])), data.draw(st.booleans()))
        elif kind == "challenge":
            self.challenge(data, data.draw(st.sampled_from([6, 7, 8, 3])))
        elif kind == "finalize":
            self.finalize(data)
        else:
            self.expire(data)

    @rule(data=st.data(), moves=st.integers(2, 8))
    def advance_more(self, data: st.DataObject, moves: int) -> None:
        self.advance(data, moves)

    @rule(data=st.data(), moves=st.integers(2, 8))
    def advance_again(self, data: st.DataObject, moves: int) -> None:
        self.advance(data, moves)

    @rule(node=st.sampled_from(sorted(NODES)))
    def heartbeat_rule(self, node: int) -> None:
        self.heartbeat(node)

    def registered(self, node: int) -> bool:
        """The node has a role: stake beyond what the court holds of a gone node's unbonding."""
        return self.stake[node] > self.held_gone[node]

    def heartbeat(self, node: int) -> None:
        assert self.w.send(node, self.r.heartbeat()) == self.registered(node)

    def close_and_select(self, data: st.DataObject) -> None:
        picked = self._unit(data)
        if picked:
            self.close_select_unit(picked[0], data.draw(st.booleans()))

    def close_select_unit(self, uid: int, select: bool) -> None:
        u = self.units[uid]
        if self.w.send(8, self.m.closeClaims(uid)):
            assert u.status == OPEN
            if self.m.getUnit(uid).call()[0] == SELECTING:
                u.status = SELECTING
        if u.status == SELECTING and select:
            self.w.jump(1)
            if self.w.send(1, self.m.selectAssignee(uid)):
                unit = self.m.getUnit(uid).call()
                u.status, u.assignee = ASSIGNED, self._who(unit[9])
                self._seen("assigned")

    def commit(self, data: st.DataObject, honest: bool) -> None:
        picked = self._unit(data)
        if not picked:
            return
        uid, u = picked
        who = u.assignee
        if not honest or who is None:
            who = data.draw(st.sampled_from([3, 4, 5]))
        elif data.draw(st.booleans()):
            # the assignee's honest list with an earlier checkpoint's root as the result (#38)
            self.commit_unit(uid, who, final=data.draw(st.integers(0, SEGMENTS - 1)))
        self.commit_unit(uid, who)

    def commit_unit(self, uid: int, who: int, final: int = SEGMENTS) -> None:
        """`who` commits the unit's list (perturbed as its round draws) with checkpoint `final`'s
        root as the final state root and its own list proof: refused unless it is the last."""
        u = self.units[uid]
        # the assignee knows from its secret and the assignment seed whether the round is forced
        seed = self.m.getUnit(uid).call()[11]
        perturbed = tuple(
            self.w.judge.functions.perturbedCheckpoints(SECRET, seed, SEGMENTS).call()
        )
        roots = published(perturbed)
        proof = list_proof(CHECKPOINT_DOMAIN, roots, final).siblings
        commit = self.m.commitCheckpoints(
            uid, checkpoint_root(roots), 5, roots[final], proof, "b://x", SEAL
        )
        ok = self.w.send(who, commit)
        assert ok <= (final == SEGMENTS), f"unit {uid} committed checkpoint {final} as its result"
        if final != SEGMENTS and who == u.assignee and u.status == ASSIGNED:
            self._seen("wrong final root refused")
        if ok:
            assert u.status == ASSIGNED and who == u.assignee
            u.status = COMMITTED
            u.perturbed = perturbed
            self._seen(
                f"committed (forced, {len(perturbed)} perturbed)" if perturbed else "committed"
            )

    def draw_verifiers(self, data: st.DataObject) -> None:
        picked = self._unit(data)
        if picked:
            self.draw_unit(picked[0], data.draw(st.booleans()))

    def draw_unit(self, uid: int, by_seal: bool = False) -> None:
        """The keeper's drawVerifiers, or (`by_seal`) the first drawn verifier's seal, which draws
        the verifiers in its own transaction (PROTOCOL §6.5): the verifier knows it is drawn,
        and its segments, from a simulation of drawVerifiers at the pending block."""
        u = self.units[uid]
        self.w.jump(1)
        if by_seal:
            self.draw_by_seal_unit(uid)
            return
        if self.w.send(2, self.m.drawVerifiers(uid)) and self.m.getUnit(uid).call()[0] == VERIFYING:
            assert u.status == COMMITTED
            self.drawn(u, uid)

    def drawn(self, u: UnitModel, uid: int) -> None:
        u.status = VERIFYING
        u.verifiers = [self._who(a) for a in self.m.getVerifiers(uid).call()]
        assert self.m.verifierLockOf(u.job_id).call() == self.lock(u)
        self._seen(f"drew {len(u.verifiers)} verifiers")

    def draw_by_seal_unit(self, uid: int) -> None:
        try:
            simulated, seed = self.m.drawVerifiers(uid).call(block_identifier="pending")
        except ContractLogicError:  # not Committed, or its seed re-arms
            return
        if not simulated:
            return
        first = self._who(simulated[0])
        segments = chain_sample(seed, simulated[0], MGR_CFG["segmentsPerVerifier"], SEGMENTS)
        if self.seal_unit(uid, first, segments=segments, drawing=True):
            assert list(self.m.getVerifiers(uid).call()) == list(simulated), "simulated draw"
            self._seen("drew by the first seal")

    def attest(self, data: st.DataObject, verifier: int, open_seal: bool) -> None:
        picked = self._unit(data)
        if picked:
            if open_seal:
                self.open_unit(picked[0], verifier)
            else:
                self.seal_unit(picked[0], verifier, data.draw(st.booleans()))

    def attest_unit(
        self, uid: int, verifiers: list[int], lazy: bool = False, opening: bool = True
    ) -> None:
        """Each verifier seals, then (with `opening`) each opens its seal (at once when all drawn
        sealed); without, the seals stay closed (silence, once the reveal window is over)."""
        for v in verifiers:
            self.seal_unit(uid, v, lazy)
        for v in verifiers if opening else []:
            self.open_unit(uid, v)

    def seal_unit(
        self,
        uid: int,
        verifier: int,
        lazy: bool = False,
        segments: list[int] | None = None,
        drawing: bool = False,
    ) -> bool:
        """An honest verifier seals the true end roots of its segments, a lazy one the published
        ones (different at a forced round's perturbed checkpoint). `drawing`: the unit is
        Committed and this seal draws the verifiers first (its `segments` known from the
        simulated draw). True when it was sealed."""
        u = self.units[uid]
        if segments is None:
            segments = self.m.sampledSegments(uid, self.w.addr[verifier]).call()
        if lazy:
            ends = [published(u.perturbed)[s + 1] for s in segments]
        else:
            ends = [REPLAYED if s in u.perturbed else TRUE[s + 1] for s in segments]
        attempt = self.m.getUnit(uid).call()[10]
        seal = self.m.sealOf(uid, attempt, self.w.addr[verifier], ends, SALT).call()
        if not self.w.send(verifier, self.m.sealAttestation(uid, seal)):
            return False
        if drawing:
            assert u.status == COMMITTED, f"a seal drew the verifiers of a unit not Committed: {u}"
            self.drawn(u, uid)
        self._seen("sealed")
        assert verifier in u.verifiers and verifier not in u.sealed and not u.revealed
        # nor once a seal was opened: its end roots are public (a lost dispute's grace)
        assert not u.attested, f"sealed after an opening: {u}"
        u.sealed.add(verifier)
        u.ends[verifier] = ends
        return True

    def open_unit(self, uid: int, verifier: int) -> None:
        u = self.units[uid]
        ends = u.ends.get(verifier, [TRUE[1], TRUE[2]])
        if self.w.send(verifier, self.m.attest(uid, ends, SALT)):
            self._seen("attested")
            assert verifier in u.sealed and verifier not in u.attested
            u.attested.add(verifier)

    def challenge(self, data: st.DataObject, challenger: int) -> None:
        picked = self._unit(data)
        if picked:
            self.challenge_unit(picked[0], challenger)

    def challenge_unit(self, uid: int, challenger: int) -> None:
        u = self.units[uid]
        if self.w.send(challenger, self.m.challenge(uid, b"\x55" * 32)):
            assert u.status == VERIFYING and challenger != 3
            u.status = DISPUTED
            self._seen("challenged")
            u.game = self.w.arbiter.functions.gameCount().call()
            u.challenger = challenger
            # the bond: what a winning challenger is paid on top of it, at least the flat floor
            share = self._collateral(u) * MGR_CFG["challengerRewardBps"] // BPS
            u.bond = max(MGR_CFG["challengeBond"], share)
            assert self.m.getDispute(uid).call()[2] == u.bond, "challenge bond"
            scaled = share > MGR_CFG["challengeBond"]
            self._seen("challenge bond scaled" if scaled else "challenge bond at the floor")

    @rule(data=st.data(), challenger_won=st.booleans())
    def resolve(self, data: st.DataObject, challenger_won: bool) -> None:
        disputed = [uid for uid, u in self.units.items() if u.game is not None]
        if not disputed:
            return
        self.resolve_unit(data.draw(st.sampled_from(disputed)), challenger_won)

    def resolve_unit(self, uid: int, challenger_won: bool) -> None:
        u = self.units[uid]
        assert self.w.send(8, self.w.arbiter.functions.resolve(u.game, challenger_won))
        assert u.challenger is not None and u.assignee is not None
        # every round here may be forced (forcedErrorBps 10 000): a win before the end of the
        # reveal's slot, with no forced error revealed, is held (PROTOCOL §6.6) and moves nothing;
        # one revealWindow from the win if the reveal phase is open already, else to the slot's end
        deadline, now = self.m.getUnit(uid).call()[4], self.w.now()
        until = deadline + 2 * MGR_CFG["revealWindow"]
        if challenger_won and not u.revealed and now <= until:
            if self._reveal_phase_open(u, now, deadline):
                until = min(until, now + MGR_CFG["revealWindow"])
                self._seen("result held one revealWindow")
            assert self.m.heldUntil(uid).call() == until, "held until"
            u.game, u.held_until = None, until
            self._seen("result held")
            return
        if challenger_won:
            self._challenger_won(u)
        else:
            self._solver_won(u)
        self._seen(f"resolved challengerWon={challenger_won}")

    @staticmethod
    def _reveal_phase_open(u: UnitModel, now: int, deadline: int) -> bool:
        """ForcedErrorJudge.revealPhaseOpen: no drawn verifier may still seal (unsealed while
        the challenge window runs and no seal is open) or open its seal (sealed, not opened,
        while the reveal window runs)."""
        may_seal = now <= deadline and not u.attested
        for v in u.verifiers:
            if v not in u.sealed and may_seal:
                return False
            if v in u.sealed and v not in u.attested and now <= deadline + MGR_CFG["revealWindow"]:
                return False
        return True

    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        held = sorted(uid for uid, u in self.units.items() if u.held_until)
        if held:
            self.settle_unit(data.draw(st.sampled_from(held)))

    def settle_unit(self, uid: int) -> None:
        """Anyone applies a held win once the reveal's slot is over (none is due: refused)."""
        u = self.units[uid]
        t = self.w.pending_now()
        ok = self.w.send(5, self.m.settleDispute(uid))
        due = u.status == DISPUTED and u.held_until != 0 and t > u.held_until
        assert ok == due, f"settleDispute of unit {uid} at {t}: {ok} {u}"
        if not ok:
            self._seen("settle refused")
            return
        self._challenger_won(u)
        self._seen("held result settled")
        self._seen("resolved challengerWon=True")

    def _challenger_won(self, u: UnitModel) -> None:
        """The solver's collateral is slashed (the challenger gets its bond and its reward, the
        jackpot the rest) and the unit re-opens."""
        assert u.challenger is not None and u.assignee is not None
        collateral = self._collateral(u)
        reward = collateral * MGR_CFG["challengerRewardBps"] // BPS
        self.credits[u.challenger] += u.bond + reward
        self.jackpot += collateral - reward
        self.stake[u.assignee] -= collateral
        if u.slashed:
            # C was overturned: the WRONG verdicts fall with it, their locks are released
            self._seen("wrong verdict released (C overturned)")
        if u.catchers:
            self._seen("catcher unpaid (C overturned)")
        self._reopen(u)  # verifier locks are released, nothing is paid to verifiers

    def _solver_won(self, u: UnitModel) -> None:
        bond, bps = u.bond, MGR_CFG["challengerRewardBps"]
        assert u.assignee is not None
        to_solver = bond * bps // BPS
        self.credits[u.assignee] += to_solver
        self.jackpot += bond - to_solver
        u.status = VERIFYING
        u.game, u.challenger, u.bond = None, None, 0

    @rule(data=st.data())
    def reveal(self, data: st.DataObject) -> None:
        picked = self._unit(data)
        if picked:
            self.reveal_unit(picked[0], data.draw(st.booleans()), data.draw(st.booleans()))

    def reveal_unit(self, uid: int, resolve_voided: bool, challenger_won: bool) -> None:
        """The assignee proves its forced error: verifiers that attested the true end root at the
        perturbed checkpoint are catchers (paid from the jackpot at finalize), those that attested
        a wrong one are judged WRONG (their lock is slashed at finalize); if the unit re-opens
        first (C overturned), no catcher is paid and every lock is released."""
        u = self.units[uid]
        perturbed = u.perturbed or (1,)  # (an unforced unit's reveal must be refused anyway)
        states = published(perturbed)
        samples = [self.m.sampledSegments(uid, self.w.addr[v]).call() for v in u.verifiers]
        checkpoints = judged_checkpoints(samples, perturbed)
        ends = [u.ends.get(v, []) for v in u.verifiers]
        reveal = forced_reveal(SECRET, states, TRUE, checkpoints, ends)
        who = u.assignee if u.assignee is not None else 3
        ok = self.w.send(who, self.w.judge.functions.revealForced(uid, reveal))
        live = u.perturbed and not u.revealed and u.status in (VERIFYING, DISPUTED)
        responded = all(v in u.attested for v in u.verifiers)
        assert ok <= bool(live), f"reveal of unit {uid} accepted: {u}"
        if live and responded:
            assert ok, f"reveal of unit {uid} refused though every verifier responded"
        if not ok:
            return
        right, wrong = [], []
        for v in sorted(u.attested - u.slashed):
            # judged on the segments that start at a perturbed checkpoint (must not give the
            # published next root) or else end at one (must give the truth)
            segs = self.m.sampledSegments(uid, self.w.addr[v]).call()
            oks = [
                e != states[s + 1] if s in perturbed else e == TRUE[s + 1]
                for s, e in zip(segs, u.ends[v], strict=True)
                if s in perturbed or s + 1 in perturbed
            ]
            if oks:
                (right if all(oks) else wrong).append(v)
        # nothing moves yet for either: the verdicts trust C, which can still be disputed
        u.slashed.update(wrong)
        u.catchers = right  # a voided dispute's challenger gets its bond back, no share
        voided = None
        if u.status == DISPUTED and u.data_requester is not None:
            # an open data request is voided: its bond back, and its requester may ask again
            self.credits[u.data_requester] += u.bond
            u.data_requested.discard(u.data_requester)
            u.data_requester, u.bond = None, 0
            self._seen("data request voided by the reveal")
        elif u.status == DISPUTED:
            assert u.challenger is not None
            self.credits[u.challenger] += u.bond
            if u.held_until:
                self._seen("held result voided by the reveal")
            voided, u.game, u.challenger, u.bond = u.game, None, None, 0
            u.held_until = 0  # a held result's game is gone: no VoidedGameEnded to come
        u.status, u.revealed = VERIFYING, True
        self._seen(f"revealed forced ({len(right)} catchers, {len(wrong)} slashed)")
        if voided is not None and resolve_voided:
            # the voided game's result moves no money
            assert self.w.send(8, self.w.arbiter.functions.resolve(voided, challenger_won))
            self._seen("voided game ended")

    @rule(
        data=st.data(),
        kind=st.sampled_from(["challenge", "challenge", "resolve", "withdraw"]),
        won=st.booleans(),
    )
    def court(self, data: st.DataObject, kind: str, won: bool) -> None:
        """The attestation court (PROTOCOL §7.1): a whistleblower takes an attested segment to
        court, the court's game rules, someone withdraws a court credit."""
        if kind == "challenge":
            # mostly a unit with a live attestation, else any unit (the court must refuse)
            attested = sorted(uid for uid, u in self.units.items() if u.attested - u.slashed)
            if attested or self.units:
                uid = data.draw(st.sampled_from(attested or sorted(self.units)))
                self.court_challenge(data, uid)
        elif kind == "resolve":
            open_games = sorted(g for g, case in self.cases.items() if case[2])
            if open_games:
                self.court_resolve(data.draw(st.sampled_from(open_games)), won)
        else:
            self.court_withdraw(data.draw(st.sampled_from(ACCOUNTS)))

    def court_challenge(self, data: st.DataObject, uid: int) -> None:
        u = self.units[uid]
        who = data.draw(st.sampled_from([8, 8, 8, 8, 6]))
        honest = [v for v in u.verifiers if v in u.attested - u.slashed]
        # a fixed draw (the drawn verifiers come from the chain's randomness)
        pool = honest or [6, 7]
        verifier = pool[data.draw(st.integers(0, 1)) % len(pool)]
        index = data.draw(st.sampled_from([0, 1, 0, 1, 2]))
        flaw = data.draw(st.sampled_from(["none"] * 5 + ["ends", "start"]))
        ends = list(u.ends.get(verifier, [TRUE[1], TRUE[2]]))
        if flaw == "ends":
            ends[0] = b"\x77" * 32
        if data.draw(st.integers(0, 2)) == 0:
            self.unbond_free(verifier)  # an attempt to put its stake out of the court's reach
        segments = self.m.sampledSegments(uid, self.w.addr[verifier]).call()
        # the court proves start roots against the published root, which the verifiers replayed
        # from, also after a reveal made C the unit's checkpoint root (publishedRootOf)
        states = published(u.perturbed)
        seg = segments[index] if index < len(segments) else 0
        proof = list_proof(CHECKPOINT_DOMAIN, states, seg).siblings
        start = b"\x78" * 32 if flaw == "start" else states[seg]
        fn = self.w.court.functions.challengeAttestation(
            uid, self.w.addr[verifier], index, ends, start, proof
        )
        node = self.r.getNode(self.w.addr[verifier]).call()
        free = node[8] - node[9]  # stake - locked
        # the court locks the job's verifier lock S, at least its floor, at most the answerable
        # stake: free, then unbonding (recalled into the stake, locked)
        answerable = free + self.unbonding[verifier]
        penalty = min(max(COURT_CFG["penalty"], self.lock(u)), answerable)
        ok = self.w.send(who, fn)
        valid = (
            who == 8
            and verifier in u.attested - u.slashed
            and index < len(segments)
            and flaw == "none"
            and (verifier, index) not in u.court
            # the court's window: after the unit's challenge deadline, or the last case it stood
            and self.w.pending_now()
            <= max(u.stood.get((verifier, index), 0), self.m.getUnit(uid).call()[4])
            + COURT_CFG["window"]
            and answerable > 0  # nothing to lock: NoAnswerableStake
            and not u.recycled  # its record holds another job: the court reads nothing of it
        )
        assert ok <= valid, f"court challenge accepted: {who} {verifier} {index} {flaw} {u}"
        if not ok:
            if valid and self.r.roleOf(self.w.addr[8]).call() == ROLES["whistleblower"]:
                try:
                    fn.call({"from": self.w.addr[8]})
                    why = "?"
                except Exception as e:  # noqa: BLE001
                    why = repr(e)
                raise AssertionError(f"valid court challenge refused: {why} {verifier} {index} {u}")
            self._seen("court challenge refused")
            return
        game = self.w.court_game.functions.gameCount().call()
        assert self.w.court.functions.cases(game).call()[4] == penalty, "court penalty"
        recalled = max(0, penalty - free)
        if recalled:
            if not self.registered(verifier):
                self.held_gone[verifier] += recalled
            self.stake[verifier] += recalled
            self.unbonding[verifier] -= recalled
            self._seen("court recalled unbonding stake")
        if penalty < max(COURT_CFG["penalty"], self.lock(u)):
            self._seen("court penalty capped by the free stake")
        # the bond: the reward at stake, at least the flat floor
        bond = max(COURT_CFG["bond"], penalty * COURT_CFG["reward_bps"] // BPS)
        assert self.w.court.functions.cases(game).call()[3] == bond, "court bond"
        if bond > COURT_CFG["bond"]:
            self._seen("court bond scaled with the penalty")
        self.cases[game] = (uid, verifier, bond, penalty, u, (verifier, index), u.court)
        u.court.add((verifier, index))
        u.kept = True  # the court kept the unit's record (keepRecord): later cases read it
        self._seen("court challenged")
        # for depth, the game mostly ends at once and the winner withdraws (hypothesis often draws
        # the simplest value, 0: let it mean "rule now")
        if data.draw(st.integers(0, 3)) < 3:
            # (not sampled_from([True, True, False]): in this spot it gave 25 wins, 0 losses)
            won = data.draw(st.booleans())
            self.court_resolve(game, won)
            # the party the ruling credited (withdrawals of nothing: the `court` rule's)
            self.court_withdraw(8 if won else verifier)

    def court_resolve(self, game: int, won: bool) -> None:
        _, verifier, bond, penalty, u, entry, court = self.cases[game]
        assert self.w.send(1, self.w.court_game.functions.resolve(game, won))
        if not won and self.held_gone[verifier]:
            # released stake of a node with no role goes back to unbonding (its one way out)
            self.held_gone[verifier] -= penalty
            self.stake[verifier] -= penalty
            self.unbonding[verifier] += penalty
            self._seen("court returned recalled stake to unbonding")
        if won:
            reward = penalty * COURT_CFG["reward_bps"] // BPS
            self.court_credits[8] += bond + reward
            self.jackpot += penalty - reward  # the court funds the manager's jackpot
            self.stake[verifier] -= penalty  # slashed from the verifier's registry stake
            if self.held_gone[verifier]:  # a gone verifier's recalled stake (all of it locked)
                self.held_gone[verifier] -= penalty
        else:
            # the failed bond: rewardBps of it to the verifier, the rest to the jackpot
            kept = bond * COURT_CFG["reward_bps"] // BPS
            self.court_credits[verifier] += kept
            self.jackpot += bond - kept
            if court is u.court:  # the attestation stood (and its attempt is still the unit's)
                court.discard(entry)  # it may be taken to court again
                u.stood[entry] = self.w.now()
        self.cases[game] = (self.cases[game][0], verifier, 0, 0, u, entry, court)
        self._seen(f"court ruled falseAttestation={won}")

    def court_withdraw(self, who: int) -> None:
        before = self.w.token.functions.balanceOf(self.w.addr[who]).call()
        ok = self.w.send(who, self.w.court.functions.withdraw())
        after = self.w.token.functions.balanceOf(self.w.addr[who]).call()
        owed = self.court_credits[who]
        assert ok == (owed > 0), f"court withdraw by {who}: ok={ok}, owed={owed}"
        assert after - before == owed
        self.court_credits[who] = 0
        if ok:
            self._seen("withdrew court credit")

    @rule(data=st.data(), reporter=st.sampled_from([1, 8]))
    def premature(self, data: st.DataObject, reporter: int) -> None:
        picked = self._unit(data)
        if picked:
            self.premature_unit(picked[0], reporter)

    def premature_unit(self, uid: int, reporter: int) -> None:
        """Someone shows the assignee's secret before the reveal phase: the solver is slashed.
        Not premature: past the commit deadline (expireAssignment takes it all), while Disputed
        (the game decides), after the reveal (its calldata shows the secret), or once no drawn
        verifier may still seal (all sealed, the window closed, or a seal already opened)."""
        u = self.units[uid]
        t, deadline = self.w.pending_now(), self.m.getUnit(uid).call()[4]
        ok = self.w.send(reporter, self.w.judge.functions.reportPrematureReveal(uid, SECRET))
        unsealed = not all(v in u.sealed for v in u.verifiers)
        may_seal = t <= deadline and not u.attested and not u.revealed
        before_draw = u.status == COMMITTED or (u.status == ASSIGNED and t <= deadline)
        early = before_draw or (u.status == VERIFYING and unsealed and may_seal)
        assert ok <= early, f"premature reveal of unit {uid} accepted: {u}"
        if before_draw:
            assert ok, f"premature reveal of unit {uid} refused before the draw"
        if not ok:
            return
        assert u.assignee is not None
        collateral = self._collateral(u)
        reward = collateral * MGR_CFG["challengerRewardBps"] // BPS
        self.credits[reporter] += reward
        self.jackpot += collateral - reward
        self.stake[u.assignee] -= collateral
        self._reopen(u)
        self._seen("premature reveal slashed")

    def finalize(self, data: st.DataObject) -> None:
        picked = self._unit(data)
        if picked:
            self.finalize_unit(picked[0], data.draw(st.booleans()))

    def finalize_unit(self, uid: int, by_solver: bool = True) -> None:
        """The assignee (or the job's submitter, as its keeper would) finalizes the unit. Anyone
        but the assignee waits one more revealWindow after the reveal window, unless a forced
        error was revealed: a forced round's reveal opens only when the last seal does. (The
        other finalizer is never a solver: a solver that happened to be the assignee would make
        "finalized by another" rare.)"""
        u = self.units[uid]
        who = u.assignee if by_solver and u.assignee is not None else u.submitter
        t, deadline = self.w.pending_now(), self.m.getUnit(uid).call()[4]
        wallet = self.w.token.functions.balanceOf(self.w.addr[who]).call()
        if not self.w.send(who, self.m.finalize(uid)):
            return
        assert u.status == VERIFYING and u.assignee is not None
        u.settled_deadline = deadline
        reveal_slot_end = deadline + 2 * MGR_CFG["revealWindow"]
        waived = who == u.assignee or u.revealed
        assert waived or t > reveal_slot_end, f"finalized by {who} in the reveal's slot: {u}"
        self._seen("finalized by the solver" if who == u.assignee else "finalized by another")
        tax = u.reward * MGR_CFG["taxBps"] // BPS
        pay = u.reward - u.fee - tax
        paid_out = self.w.token.functions.balanceOf(self.w.addr[who]).call() - wallet
        if who == u.assignee:
            # the solver finalizing its own unit is paid in that transaction, not credited
            assert paid_out == pay, f"solver paid {paid_out}, owed {pay}"
        else:
            assert paid_out == 0
            self.credits[u.assignee] += pay
        paid = u.attested - u.slashed
        n = len(paid)
        share = u.fee // n if n else 0
        for v in paid:
            self.credits[v] += share
        # silent: never sealed, or never opened its seal
        pending = [v for v in u.verifiers if v not in u.attested]
        if any(v in u.sealed for v in pending):
            self._seen("unopened seal penalised")
        lock = self.lock(u)
        # penalised: the silent ones, and those a forced reveal judged WRONG (C stood)
        penalised = pending + sorted(u.slashed)
        for v in penalised:
            self.stake[v] -= lock
        if u.slashed:
            self._seen("wrong verdict slashed at finalize")
        self.jackpot += tax + u.fee - share * n + lock * len(penalised)
        # C stood: the catchers get J / 2^(k-1) each, at most an equal share of the jackpot, which
        # now holds this unit's tax and penalised locks
        k = len(u.catchers)
        catcher_share = min(u.fee >> (k - 1), self.jackpot // k) if k else 0
        for c in u.catchers:
            self.credits[c] += catcher_share
        self.jackpot -= catcher_share * k
        if catcher_share:
            self._seen("jackpot paid")
        u.escrow -= u.reward
        u.status = FINAL
        self._seen(f"finalized ({n} attested, {len(pending)} penalised)")

    def expire(self, data: st.DataObject) -> None:
        picked = self._unit(data)
        if picked:
            self.expire_unit(picked[0])

    def expire_unit(self, uid: int) -> None:
        u = self.units[uid]
        if self.w.send(4, self.m.expireAssignment(uid)):
            assert u.status == ASSIGNED and u.assignee is not None
            collateral = self._collateral(u)
            self.stake[u.assignee] -= collateral
            self.jackpot += collateral
            self._reopen(u)
            self._seen("expired")

    @rule(data=st.data(), who=st.sampled_from(SUBMITTERS))
    def cancel(self, data: st.DataObject, who: int) -> None:
        picked = self._unit(data)
        if picked:
            self.cancel_job(picked[0], who)

    def cancel_job(self, uid: int, who: int) -> None:
        u = self.units[uid]
        if self.w.send(who, self.m.cancelJob(u.job_id)):
            assert who == u.submitter and u.status in (OPEN, SELECTING)
            self.credits[who] += u.escrow
            u.escrow = 0
            u.status = CANCELLED
            u.settled_deadline = self.m.getUnit(uid).call()[4]
            self._seen("cancelled")

    @rule(who=st.sampled_from(ACCOUNTS))
    def withdraw(self, who: int) -> None:
        before = self.w.token.functions.balanceOf(self.w.addr[who]).call()
        ok = self.w.send(who, self.m.withdraw())
        after = self.w.token.functions.balanceOf(self.w.addr[who]).call()
        owed = self.credits[who]
        assert ok == (owed > 0), f"withdraw by {who}: ok={ok}, owed={owed}"
        assert after - before == owed
        self.credits[who] = 0
        if ok:
            self._seen("withdrew credit")

    @rule(
        node=st.sampled_from(sorted(NODES)),
        fraction=st.sampled_from([1, 4, 2]),
        wait=st.booleans(),
    )
    def unbond(self, node: int, fraction: int, wait: bool) -> None:
        amount = self.stake[node] // fraction
        if amount and self.w.send(node, self.r.requestUnbond(amount)):
            self.stake[node] -= amount
            self.unbonding[node] += amount
            self.unbond_ready[node] = self.w.now() + REG_CFG["unbondingDelay"]
        if wait:
            self.w.jump(REG_CFG["unbondingDelay"])
            self.withdraw_unbonded(node)

    def unbond_free(self, node: int) -> None:
        """Unbond all the node's free stake (it leaves its role if nothing is locked); refused
        where the locked stake left would be under the role's minimum."""
        chain_node = self.r.getNode(self.w.addr[node]).call()
        free = chain_node[8] - chain_node[9]  # stake - locked
        if free and self.w.send(node, self.r.requestUnbond(free)):
            self.stake[node] -= free
            self.unbonding[node] += free
            self.unbond_ready[node] = self.w.now() + REG_CFG["unbondingDelay"]
            self._seen("unbonded free stake")

    @rule(node=st.sampled_from(sorted(NODES)))
    def withdraw_unbonded(self, node: int) -> None:
        before = self.w.token.functions.balanceOf(self.w.addr[node]).call()
        ok = self.w.send(node, self.r.withdrawUnbonded())
        after = self.w.token.functions.balanceOf(self.w.addr[node]).call()
        due = self.unbonding[node] > 0 and self.w.now() >= self.unbond_ready[node]
        assert ok == due
        assert after - before == (self.unbonding[node] if due else 0)
        if due:
            self.unbonding[node] = 0
            self._seen("withdrew unbonded")

    @rule(data=st.data(), leave_first=st.booleans())
    def register_again(self, data: st.DataObject, leave_first: bool) -> None:
        """A node that left (unbonded or was slashed to zero) registers again; anyone else is
        refused. It takes the pool's most recently freed dead entry if there is one. With
        `leave_first` a node first tries to leave (unbond all: refused while stake is locked),
        so that exits and re-entries are common enough to exercise the pool."""
        if leave_first:
            self.unbond(data.draw(st.sampled_from(sorted(NODES))), 1, False)
        gone = [i for i in sorted(NODES) if not self.registered(i)]
        node = data.draw(st.sampled_from(gone or sorted(NODES)))
        role, stake = NODES[node]
        dead = self.r.deadPoolEntries(ROLES[role]).call()
        # (a node whose earlier stakes still wait in unbonding may lack the tokens for a new one)
        funded = self.w.token.functions.balanceOf(self.w.addr[node]).call() >= stake
        ok = self.w.send(node, self.r.register(ROLES[role], (1, 16_384, 100), stake))
        assert ok == (not self.registered(node) and funded)
        if ok:
            self.stake[node] += stake  # on top of stake recalled for open court cases, if any
            self.held_gone[node] = 0
            self.rejoined.add(node)
            self._seen("registered again" + (" into a dead entry" if dead else ""))

    @rule(node=st.sampled_from(sorted(NODES)))
    def add_stake(self, node: int) -> None:
        if self.w.send(node, self.r.addStake(5 * E18)):
            self.stake[node] += 5 * E18

    @rule(data=st.data(), moves=st.integers(1, 7))
    def advance(self, data: st.DataObject, moves: int) -> None:
        """Drive one unit `moves` steps along its path with the right actors (for depth)."""
        live = [uid for uid, u in self.units.items() if u.status not in (FINAL, CANCELLED)]
        if not live:
            self.post(1, 100 * E18, 600, True)
            live = [max(self.units)]
        uid = data.draw(st.sampled_from(sorted(live)))
        u = self.units[uid]
        for _ in range(moves):
            if u.status == OPEN and data.draw(st.integers(0, 9)) == 0:
                self.cancel_job(uid, u.submitter)
            elif u.status == OPEN:
                solver = data.draw(st.sampled_from([3, 4, 5]))
                if self.registered(solver):
                    self.heartbeat(solver)
                    self.claim_unit(uid, solver)
                self.w.jump(3_001)
                self.close_select_unit(uid, select=True)
            elif u.status == SELECTING:
                self.close_select_unit(uid, select=True)
            elif u.status == ASSIGNED:
                # mostly the assignee commits (the simplest draw); else the deadline passes, or
                # the secret leaks before the commit (a premature reveal that must be accepted),
                # or it first tries an earlier checkpoint's root as its result (refused, #38)
                step = data.draw(
                    st.sampled_from(["commit", "commit", "expire", "commit", "leak", "stale"])
                )
                if step == "expire":
                    self.w.jump(1_801)
                    self.expire_unit(uid)
                elif step == "leak":
                    self.premature_unit(uid, 8)
                else:
                    if step == "stale":
                        stale = data.draw(st.integers(0, SEGMENTS - 1))
                        self.commit_unit(uid, u.assignee, final=stale)
                    self.commit_unit(uid, u.assignee)
            elif u.status == COMMITTED:
                for v in (6, 7):
                    # (hypothesis often draws the simplest value, 0: let it mean "online")
                    if self.registered(v) and data.draw(st.integers(0, 3)) < 3:
                        self.heartbeat(v)
                self.draw_unit(uid, data.draw(st.booleans()))
                # often the drawn verifiers seal at once; their seals are opened (or not) later
                seal_now, lazy = data.draw(st.booleans()), data.draw(st.booleans())
                if seal_now and u.status == VERIFYING:
                    self.attest_unit(uid, u.verifiers, lazy, opening=False)
            elif u.status == VERIFYING:
                action = data.draw(
                    # (the reveal first: hypothesis often draws the first, and the reveal is the
                    # way to the forced-error payouts, checked only when the unit finalizes)
                    st.sampled_from(
                        ["reveal", "attest", "challenge", "finalize", "attest", "premature"]
                        + ["request data"]
                    )
                )
                # draw counts must not depend on the chain's randomness (the draw, the seed)
                lazy = data.draw(st.booleans())
                # a finalize may find the drawn verifiers' seals still closed
                unopened = data.draw(st.booleans())
                if action == "attest":
                    self.attest_unit(uid, u.verifiers, lazy, opening=not unopened)
                    if unopened:  # the seals stay closed through the reveal window: silence
                        self.w.jump(MGR_CFG["verifyWindow"] + MGR_CFG["revealWindow"] + 1)
                        self.finalize_unit(uid)
                    self.court_challenge(data, uid)  # a whistleblower disputes one entry (or not)
                elif action == "reveal":
                    # mostly after the drawn verifiers sealed and opened (the catchers are the
                    # RIGHT opened attestations), else with some still silent
                    if data.draw(st.sampled_from([True, True, False])):
                        self.attest_unit(uid, u.verifiers, lazy)
                    self.reveal_unit(uid, data.draw(st.booleans()), data.draw(st.booleans()))
                    # for depth, the revealed C mostly settles at once (the catchers are paid),
                    # or is disputed and the game ends (C overturned: the catchers are not paid)
                    then = data.draw(st.sampled_from(["finalize", "dispute", "finalize", "wait"]))
                    if u.revealed and then == "finalize":
                        self.w.jump(MGR_CFG["verifyWindow"] + MGR_CFG["revealWindow"] + 1)
                        self.finalize_unit(uid)
                    elif u.revealed and then == "dispute":
                        self.challenge_unit(uid, data.draw(st.sampled_from([6, 7, 8])))
                        if u.status == DISPUTED:
                            self.resolve_unit(uid, data.draw(st.booleans()))
                elif action == "premature":
                    self.premature_unit(uid, 8)
                elif action == "request data":
                    # a drawn verifier (any checkpoint) or the submitter (the final one)
                    slot = data.draw(st.sampled_from([0, 1, 2]))
                    if slot == 2:
                        who, checkpoint = u.submitter, SEGMENTS
                    else:
                        who = u.verifiers[slot] if slot < len(u.verifiers) else 6 + slot
                        checkpoint = data.draw(st.integers(0, SEGMENTS))
                    self.request_data_unit(uid, who, checkpoint)
                    if u.data_requester is not None:
                        self.follow_data_request(uid, data)
                elif action == "challenge":
                    self.challenge_unit(uid, data.draw(st.sampled_from([6, 7, 8])))
                    # for depth, the game mostly ends at once, either way
                    # (the win first: before the reveal's slot ends it is held, a rarer path)
                    if u.status == DISPUTED and data.draw(st.integers(0, 2)) < 2:
                        self.resolve_unit(uid, data.draw(st.sampled_from([True, False])))
                else:
                    if unopened:
                        self.attest_unit(uid, u.verifiers, lazy, opening=False)
                    # the assignee right after the challenge window, or (always with closed
                    # seals, which hold finalize until then) after the reveal window too, or
                    # after the reveal's slot; anyone else (the submitter's keeper) only after
                    # the slot, so it is always tried then (an own draw: "finalized by another"
                    # came 0 times in a 400-example CI run when it shared the late draw)
                    by_solver = data.draw(st.booleans())
                    late = max(data.draw(st.integers(0, 2)), int(unopened)) if by_solver else 2
                    self.w.jump(MGR_CFG["verifyWindow"] + 1 + late * MGR_CFG["revealWindow"])
                    self.finalize_unit(uid, by_solver)
                    self.court_challenge(data, uid)  # attestations stand after finalisation
                    if u.assignee is not None and data.draw(st.booleans()):
                        self.withdraw(u.assignee)
            elif u.status == DISPUTED and u.held_until:
                self.follow_held_win(uid, data)
            elif u.status == DISPUTED and u.data_requester is not None:
                self.follow_data_request(uid, data)
            elif u.status == DISPUTED:
                reveal, lazy, resolve_voided, won = (data.draw(st.booleans()) for _ in range(4))
                if reveal and u.perturbed:
                    self.attest_unit(uid, u.verifiers, lazy)
                    self.reveal_unit(uid, resolve_voided, won)
                else:
                    self.resolve_unit(uid, won)
            else:
                return

    def fresh_verifying_unit(
        self, solver: int, online: tuple[int, ...]
    ) -> tuple[int, UnitModel] | None:
        """A fresh job's unit claimed by `solver`, assigned, committed and drawn with the nodes
        `online` heartbeating: its id and model, or None where a step was refused."""
        self.post(1, 100 * E18, 600, True)
        uid = max(self.units)
        u = self.units[uid]
        if self.registered(solver):
            self.heartbeat(solver)
            self.claim_unit(uid, solver)
        self.w.jump(3_001)
        self.close_select_unit(uid, select=True)
        if u.status != ASSIGNED:
            return None
        self.commit_unit(uid, u.assignee)
        for v in online:
            if self.registered(v):
                self.heartbeat(v)
        self.draw_unit(uid)
        if u.status != VERIFYING:
            return None
        return uid, u

    @rule(data=st.data(), solver=st.sampled_from([3, 4, 5]), challenger=st.sampled_from([6, 7, 8]))
    def challenge_fresh_unit(self, data: st.DataObject, solver: int, challenger: int) -> None:
        """Drive a fresh unit with the right actors to a challenge and end its game, mostly with
        the challenger's win: before the reveal's slot ends it is held, and later steps reveal
        or settle it; or, a third of the time, to a data request and its answer, expiry or void.
        (A random sequence of 8 steps rarely took a unit that far: 100 random examples reached
        no held win at all.)"""
        picked = self.fresh_verifying_unit(solver, online=(6, 7))
        if picked is None:
            return
        uid, u = picked
        if data.draw(st.integers(0, 2)) == 0:
            # a data request instead (PROTOCOL §6.11): mostly by a drawn verifier
            by_submitter = data.draw(st.integers(0, 3)) == 0 or not u.verifiers
            who = u.submitter if by_submitter else u.verifiers[0]
            checkpoint = SEGMENTS if by_submitter else data.draw(st.integers(0, SEGMENTS))
            self.request_data_unit(uid, who, checkpoint)
            if u.data_requester is not None:
                self.follow_data_request(uid, data)
            return
        self.challenge_unit(uid, challenger)
        if u.status == DISPUTED:
            self.resolve_unit(uid, data.draw(st.sampled_from([True, True, False])))
        if u.held_until:
            self.follow_held_win(uid, data)

    @rule(data=st.data(), solver=st.sampled_from([3, 4, 5]))
    def attest_fresh_unit(self, data: st.DataObject, solver: int) -> None:
        """Drive a fresh unit with the right actors to its drawn verifiers' opened attestations,
        then either finalize it and take an attestation to the court (mostly), or have the
        submitter ask for the result and leave the request unanswered, so that its expiry finds
        attestors who held the result. (Random sequences reached the court 1 time in five
        batches of one CI run, and the withheld result's penalty 0 times in five of another: the
        court needs a finalized unit with unslashed attestors and a registered whistleblower.)"""
        picked = self.fresh_verifying_unit(solver, online=(6, 7, 8))
        if picked is None:
            return
        uid, u = picked
        if data.draw(st.integers(0, 3)) == 0:
            self.request_data_unit(uid, u.submitter, SEGMENTS)
            self.attest_unit(uid, u.verifiers, data.draw(st.booleans()))
            self.expire_data_unit(uid, wait=True)
            return
        self.attest_unit(uid, u.verifiers, data.draw(st.booleans()))
        self.w.jump(MGR_CFG["verifyWindow"] + 1 + 2 * MGR_CFG["revealWindow"])
        self.finalize_unit(uid, by_solver=data.draw(st.booleans()))
        self.court_challenge(data, uid)

    def follow_held_win(self, uid: int, data: st.DataObject) -> None:
        """A held win: the solver reveals its forced error (voiding the dispute), or the win is
        settled once due, or too early (refused); its own draw, so that each comes often (the
        reveal came 0 times in a 400-example run when it shared a draw; with the reveal first,
        the due settlement came once in 300 examples). After a reveal the unit mostly finalizes
        at once, so that a lazy verifier's WRONG verdict is slashed there (once in 300 examples
        when only the random rules finalized it)."""
        u = self.units[uid]
        step = data.draw(st.sampled_from(["settle", "reveal", "settle early"]))
        if step == "reveal":
            self.attest_unit(uid, u.verifiers, data.draw(st.booleans()))
            self.reveal_unit(uid, data.draw(st.booleans()), data.draw(st.booleans()))
            if u.revealed and u.status == VERIFYING and data.draw(st.integers(0, 3)) < 3:
                self.w.jump(MGR_CFG["verifyWindow"] + MGR_CFG["revealWindow"] + 1)
                # (a reveal waives the reveal's slot: anyone may finalize at once)
                self.finalize_unit(uid, by_solver=data.draw(st.booleans()))
        else:
            if step == "settle":
                self.w.jump(max(0, u.held_until - self.w.pending_now() + 1))
            self.settle_unit(uid)

    # ------------------------------------------------------------------ data requests (§6.11)
    @rule(
        data=st.data(),
        # answers outweigh expiries: an expiry re-opens the unit and drops its attestations,
        # and at one in three the court's flows (which need attested units) became too rare to
        # reach in a CI run
        kind=st.sampled_from(["request", "answer", "answer", "answer", "expire"]),
        who=st.sampled_from([6, 7, 1, 2, 8]),
        checkpoint=st.integers(0, SEGMENTS + 1),
    )
    def data_request(self, data: st.DataObject, kind: str, who: int, checkpoint: int) -> None:
        """A random data-request action: a request by a random account (drawn verifiers and the
        submitter may; the whistleblower, an undrawn verifier or another submitter may not), an
        answer or an expiry of a unit's open request (of any unit when none is open: refused)."""
        open_ = sorted(uid for uid, u in self.units.items() if u.data_requester is not None)
        verifying = sorted(uid for uid, u in self.units.items() if u.status == VERIFYING)
        if kind != "request" and open_:
            uid = data.draw(st.sampled_from(open_))
        elif kind == "request" and verifying:
            uid = data.draw(st.sampled_from(verifying))
        else:
            picked = self._unit(data)
            if not picked:
                return
            uid = picked[0]
        if kind == "request":
            self.request_data_unit(uid, who, checkpoint)
        elif kind == "answer":
            self.answer_data_unit(uid, partial=data.draw(st.booleans()))
        else:
            self.expire_data_unit(uid, wait=data.draw(st.booleans()))

    def request_data_unit(self, uid: int, who: int, checkpoint: int) -> None:
        """requestData: a drawn verifier (the challenge bond) or the submitter (no bond, the
        final checkpoint only), once per attempt each, on a Verifying unit in its window."""
        u = self.units[uid]
        t, deadline = self.w.pending_now(), self.m.getUnit(uid).call()[4]
        ok = self.w.send(who, self.m.requestData(uid, checkpoint))
        drawn = who in u.verifiers
        allowed = drawn or (who == u.submitter and checkpoint == SEGMENTS)
        expected = (
            u.status == VERIFYING
            and t <= deadline
            and checkpoint <= SEGMENTS
            and allowed
            and who not in u.data_requested
        )
        assert ok == expected, f"requestData({uid}, {checkpoint}) by {who} at {t}: {ok} {u}"
        if not ok:
            self._seen("data request refused")
            return
        share = self._collateral(u) * MGR_CFG["challengerRewardBps"] // BPS
        u.bond = max(MGR_CFG["challengeBond"], share) if drawn else 0
        u.status = DISPUTED
        u.data_requester, u.data_checkpoint = who, checkpoint
        u.data_deadline = t + MGR_CFG["revealWindow"]
        u.data_opened, u.data_headers, u.data_samples = False, False, 0
        u.data_requested.add(who)
        got = self.m.dataRequestOf(uid).call()
        assert tuple(got[:4]) == (self.w.addr[who], checkpoint, u.data_deadline, u.bond), got
        self._seen("data requested by a verifier" if drawn else "data requested by the submitter")

    def follow_data_request(self, uid: int, data: st.DataObject) -> None:
        """An open data request: mostly answered (in time, or partly then late), else left to
        expire, or voided by the forced round's reveal."""
        u = self.units[uid]
        step = data.draw(st.sampled_from(["answer", "expire", "answer", "reveal", "partly"]))
        if step == "reveal":
            self.attest_unit(uid, u.verifiers, data.draw(st.booleans()))
            self.reveal_unit(uid, data.draw(st.booleans()), data.draw(st.booleans()))
        elif step == "expire":
            if u.data_checkpoint == SEGMENTS:
                # the result was asked for: its attestations are opened first, so that the
                # expiry finds attestors who held it and did not answer (always: at one in two
                # a 200-example CI batch and its four top-ups once reached no such expiry; the
                # expiry with no attestor comes from the data_request rule and the unanswerable
                # and partly answered requests below)
                self.attest_unit(uid, u.verifiers, data.draw(st.booleans()))
            self.expire_data_unit(uid, wait=True)
        else:
            self.answer_data_unit(uid, partial=step == "partly")
        if u.data_requester is not None and step != "expire":
            # unanswerable (a perturbed checkpoint) or partly answered: it expires
            self.expire_data_unit(uid, wait=True)

    def answer_data_unit(self, uid: int, partial: bool = False) -> None:
        """The solver answers: the state opened, its headers opened, then its samples in batches
        (with `partial`, the first batch only). A checkpoint whose committed root is no state's
        (a forced round's perturbed value) cannot be opened; anything past the deadline is
        refused."""
        u = self.units[uid]
        who = u.assignee if u.assignee is not None else 5
        c = u.data_checkpoint
        roots = TRUE if u.revealed else published(u.perturbed)
        if u.data_requester is None:
            s = OPENINGS[SEGMENTS].open_state(TRUE, SEGMENTS)
            fn = self.m.openDataState(uid, s.tensor_count, s.state_tree, s.checkpoint_proof)
            assert not self.w.send(who, fn)
            return
        o = OPENINGS[c]
        if roots[c] != TRUE[c]:
            # the true state does not open the published root
            s = o.open_state(TRUE, c)
            fn = self.m.openDataState(uid, s.tensor_count, s.state_tree, s.checkpoint_proof)
            assert not self.w.send(who, fn)
            self._seen("data state refused (perturbed checkpoint)")
            return
        steps: list[tuple[str, Any]] = []
        if not u.data_opened:
            s = o.open_state(roots, c)
            fn = self.m.openDataState(uid, s.tensor_count, s.state_tree, s.checkpoint_proof)
            steps.append(("opened", fn))
        if not u.data_headers:
            (part,) = o.header_parts()
            steps.append(("headers", self.m.openDataHeaders(uid, *part.args())))
        for step, fn in steps:
            t = self.w.pending_now()
            ok = self.w.send(who, fn)
            assert ok == (t <= u.data_deadline), f"{step} at {t}: {ok} {u}"
            if not ok:
                self._seen("data answer late")
                return
            u.data_opened, u.data_headers = True, u.data_headers or step == "headers"
        seed_block = self.m.dataRequestOf(uid).call()[4]
        if self.w.w3.eth.block_number < seed_block:
            self.w.jump(1)  # the seed block is the one after the request
        seed = bytes(self.w.w3.eth.get_block(seed_block)["hash"])
        last = SAMPLE_BATCH if partial else DATA_SAMPLES
        while u.data_samples < last:
            batch = [x.args() for x in o.samples(seed, u.data_samples, SAMPLE_BATCH)]
            t = self.w.pending_now()
            ok = self.w.send(who, self.m.proveDataSamples(uid, batch, "http://x#0x01"))
            assert ok == (t <= u.data_deadline), f"proveDataSamples at {t}: {ok} {u}"
            if not ok:
                self._seen("data answer late")
                return
            u.data_samples += SAMPLE_BATCH
        if u.data_samples < DATA_SAMPLES:
            self._seen("data partly answered")
            return
        # answered: the bond is forfeited as a failed challenge's
        assert u.assignee is not None and u.data_requester is not None
        to_solver = u.bond * MGR_CFG["challengerRewardBps"] // BPS
        self.credits[u.assignee] += to_solver
        self.jackpot += u.bond - to_solver
        u.status, u.bond, u.data_requester = VERIFYING, 0, None
        assert self.m.getUnit(uid).call()[0] == VERIFYING
        self._seen("data answered")

    def expire_data_unit(self, uid: int, wait: bool = False) -> None:
        """expireDataRequest after the answer deadline: exactly a lost game for the solver."""
        u = self.units[uid]
        if wait and u.data_requester is not None:
            self.w.jump(max(0, u.data_deadline - self.w.pending_now() + 1))
        t = self.w.pending_now()
        ok = self.w.send(4, self.m.expireDataRequest(uid))
        expected = u.data_requester is not None and t > u.data_deadline
        assert ok == expected, f"expireDataRequest({uid}) at {t}: {ok} {u}"
        if not ok:
            return
        assert u.assignee is not None and u.data_requester is not None
        collateral = self._collateral(u)
        reward = collateral * MGR_CFG["challengerRewardBps"] // BPS
        self.credits[u.data_requester] += u.bond + reward
        self.jackpot += collateral - reward
        self.stake[u.assignee] -= collateral
        if u.data_checkpoint == SEGMENTS:
            # the result was asked for: attesting is holding it, so every attestor that did not
            # answer loses its lock (PROTOCOL §6.11)
            attestors = sorted(u.attested - u.slashed)
            lock = self.lock(u)
            for v in attestors:
                self.stake[v] -= lock
            self.jackpot += lock * len(attestors)
            if attestors:
                self._seen("attestors penalised for a withheld result")
        self._reopen(u)
        self._seen("data request expired")

    @rule(seconds=st.sampled_from([30, 700, 2_000, 4_000, 8_000]))
    def time_passes(self, seconds: int) -> None:
        self.w.jump(seconds)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def pools_never_move(self) -> None:
        """Role pools (PROTOCOL §6.2): the live entries are exactly the registered nodes, each on
        the entry its poolSlot names; entries never move and keep their addedBlock (so a draw's
        modulus for a past seed block never changes); the pool grows only when no dead entry
        was left to take; the dead count is the registry's."""
        for role in ROLES.values():
            flat = self.w.lens.functions.readPool(self.w.registry.address, role).call()
            size, dead = flat[0], flat[1]
            rows = [tuple(flat[2 + 5 * i : 7 + 5 * i]) for i in range(size)]
            entries = [(node, added, joined, bool(live)) for node, added, joined, live, _ in rows]
            for i, (_, added, joined, live, slot) in enumerate(rows):
                assert joined >= added, f"role {role} entry {i}: joined before it was added"
                assert live == (slot == i + 1), f"role {role} entry {i}: live != poolSlot"
            assert [e[1] for e in entries] == sorted(e[1] for e in entries), "addedBlock unsorted"
            assert dead == sum(not e[3] for e in entries), f"role {role}: dead count {dead}"
            live_nodes = sorted(self._who(f"0x{e[0]:040x}") for e in entries if e[3])
            registered = sorted(
                i for i, (r, _) in NODES.items() if ROLES[r] == role and self.registered(i)
            )
            assert live_nodes == registered, f"role {role}: live {live_nodes} != {registered}"
            if role in self.pools:
                before, dead_before = self.pools[role]
                assert [e[1] for e in entries[: len(before)]] == [e[1] for e in before], (
                    f"role {role}: an entry moved or lost its addedBlock"
                )
                if len(entries) > len(before):
                    assert dead_before == 0, f"role {role}: appended with a dead entry to take"
                for old, new in zip(before, entries, strict=False):
                    stayed = old[0] == new[0] and self._who(f"0x{new[0]:040x}") not in self.rejoined
                    if old[3] and new[3] and stayed:
                        assert old[2] == new[2], f"role {role}: a live entry's joinedBlock moved"
            self.pools[role] = (entries, dead)
        self.rejoined.clear()

    @invariant()
    def recycled_jobs_read_unknown(self) -> None:
        """A job whose record took another job reads as unknown (status None): no view hands out
        the new job's values under an old id."""
        for uid, u in self.units.items():
            if u.recycled:
                assert self.m.getUnit(uid).call()[0] == 0, f"recycled unit {uid:#x} still reads"
                assert self.m.getJob(u.job_id).call()[4] == 0, f"recycled job {u.job_id:#x}"

    @invariant()
    def money_is_conserved(self) -> None:
        w = self.w
        nodes = sorted(NODES)
        units = sorted(self.units)
        out = w.lens.functions.read(
            w.registry.address,
            w.manager.address,
            [w.addr[i] for i in nodes],
            [self.units[uid].job_id for uid in units],
            units,
            [w.addr[i] for i in ACCOUNTS],
        ).call()
        reg_bal, mgr_bal = out[0], out[1]
        pairs = out[2 : 2 + 2 * len(nodes)]
        stakes, unbonding = pairs[0::2], pairs[1::2]
        rest = out[2 + 2 * len(nodes) :]
        escrows, rest = rest[: len(units)], rest[len(units) :]
        bonds, rest = rest[: len(units)], rest[len(units) :]
        credits, jackpot = rest[: len(ACCOUNTS)], rest[len(ACCOUNTS)]
        assert len(rest) == len(ACCOUNTS) + 1
        # the contracts' own books balance ...
        assert reg_bal == sum(stakes) + sum(unbonding), "registry balance != stakes + unbonding"
        assert mgr_bal == sum(escrows) + sum(bonds) + sum(credits) + jackpot, (
            "manager balance != escrow + bonds + credits + jackpot"
        )
        # ... and every entry equals the independent model's
        for i, stake, unb in zip(nodes, stakes, unbonding, strict=True):
            assert stake == self.stake[i], f"stake of {i}: {stake} != model {self.stake[i]}"
            assert unb == self.unbonding[i], f"unbonding of {i}: {unb} != {self.unbonding[i]}"
        for uid, escrow, bond in zip(units, escrows, bonds, strict=True):
            u = self.units[uid]
            assert escrow == u.escrow, f"escrow of job {u.job_id}: {escrow} != model {u.escrow}"
            assert bond == u.bond, f"bond of unit {uid}: {bond} != model {u.bond}"
        for i, credit in zip(ACCOUNTS, credits, strict=True):
            assert credit == self.credits[i], f"credit of {i}: {credit} != {self.credits[i]}"
        assert jackpot == self.jackpot, f"jackpot {jackpot} != model {self.jackpot}"
        # the court's books balance and equal the model's (slashed penalties arrive here)
        games = sorted(self.cases)
        out = w.lens.functions.readCourt(
            w.court.address, games, [w.addr[i] for i in ACCOUNTS]
        ).call()
        court_bal, bonds, credits = out[0], out[1 : 1 + len(games)], out[1 + len(games) :]
        assert len(credits) == len(ACCOUNTS)
        assert court_bal == sum(bonds) + sum(credits), "court balance != bonds + credits"
        for g, bond in zip(games, bonds, strict=True):
            assert bond == self.cases[g][2], f"court bond of game {g}: {bond} != model"
        for i, credit in zip(ACCOUNTS, credits, strict=True):
            assert credit == self.court_credits[i], f"court credit of {i}: {credit} != model"


#: Every money-moving flow a run must put under the invariants, or they prove little.
REQUIRED_OUTCOMES = (
    "assigned",
    "committed",
    "wrong final root refused",
    "sealed",
    "attested",
    "unopened seal penalised",
    "challenged",
    "challenge bond scaled",
    "resolved challengerWon=True",
    "resolved challengerWon=False",
    "result held",
    "held result settled",
    "held result voided by the reveal",
    "drew by the first seal",
    "finalized",
    "finalized by the solver",
    "finalized by another",
    "expired",
    "cancelled",
    "withdrew credit",
    "withdrew unbonded",
    "revealed forced",
    "jackpot paid",
    "wrong verdict slashed at finalize",
    "premature reveal slashed",
    "court challenged",
    "court challenge refused",
    "court recalled unbonding stake",
    "court ruled falseAttestation=True",
    "court ruled falseAttestation=False",
    "withdrew court credit",
    "registered again into a dead entry",
    "record recycled",
    "data requested by a verifier",
    "data requested by the submitter",
    "data answered",
    "data request expired",
    "attestors penalised for a withheld result",
)
#: Extra quarter-size batches of fresh random sequences a CI run may take to reach a missing
#: flow: as many examples at most as two half-size ones, but a run stops at the first batch that
#: reaches it (a top-up costs about 1 minute of a CI run, not 2).
TOP_UPS = 4


def _run_batch(examples: int, **overrides: Any) -> None:
    ProtocolMachine.TestCase.settings = settings(
        settings.get_profile(PROFILE),
        max_examples=examples,
        stateful_step_count=STEPS,
        **overrides,
    )
    ProtocolMachine.TestCase().runTest()


def _missing() -> list[str]:
    return [outcome for outcome in REQUIRED_OUTCOMES if SEEN[outcome] == 0]


def test_protocol_state_machine(world: World) -> None:
    SEEN.clear()
    DETAILS.clear()
    _run_batch(EXAMPLES)
    batches = 1
    # Which flows a batch reaches depends on the chain's randomness as well as on hypothesis's
    # data (the verifiers drawn, the segments they sample, the forced checkpoint), and a rare
    # flow came 0 to 17 times in the same 200-example CI batch (issue #5 asks for at least 200
    # sequences in CI: the first batch alone has them). So a batch that misses one is
    # followed by up to TOP_UPS quarter-size batches of fresh random
    # sequences (every step of which is checked by the same invariants) until every flow has
    # run; then a flow still missing fails the test.
    while EXAMPLES >= 100 and _missing() and batches <= TOP_UPS:
        print("missing after", batches, "batch(es):", _missing())
        _run_batch(EXAMPLES // 4, derandomize=False, database=None)
        batches += 1
    print("outcomes:", dict(sorted(DETAILS.items())), "batches:", batches)
    if EXAMPLES >= 100:
        assert _missing() == [], f"no sequence reached {_missing()}: {dict(SEEN)}"
