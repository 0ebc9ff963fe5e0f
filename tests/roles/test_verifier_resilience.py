"""The verifier and the whistleblower against a hostile solver, submitter or chain (AUDIT F5, F6,
F8, F11), without a chain: the roles are built with object.__new__, their contracts are small
fakes and the solver's data is served by a real BlobServer, which the tests take down.

* F11: a court game over a TRUE attestation is defended (and a whistleblower's case played)
  after the solver's data is gone, from the start state kept at the replay or from a replay
  from step 0 — never from a state that is not the game's start.
* F6: a drawn verifier of a job without (or with a wrong) dispute config still replays and
  seals; it skips only the challenge, and says so once.
* F8: a whistleblower re-checks an attestation whose data was unusable, with backoff, while
  the unit is live.
* F5: court challenges and attestations are read `--confirmations` deep through the reorg-safe
  event stream: one re-mined below the last block read is seen (after a restart too), one
  reorged away is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from eth_abi import encode
from eth_utils import keccak, to_checksum_address
from rolefakes import (
    FakeContract,
    RecordingExecutor,
    answering,
    decoded,
    in_rounds,
    recheck_now,
    role_config,
)

from agents.adversaries.faults import Fault, FaultyComputation
from agents.core.blobs import BlobServer, LocalDirBackend, open_blob_store
from agents.core.bounded import SaidOnce
from agents.core.clock import RealClock
from agents.core.deploy import load_artifact
from agents.core.events import AbiDecoder, EventStream, RawLog
from agents.core.store import Store
from agents.data import builtin as datasets
from agents.dispute.graph import job_graph
from agents.dispute.player import Phase
from agents.dispute.trace import Computation
from agents.roles.actions import Challenge, CourtChallenge, Recheck, Seal
from agents.roles.artifacts import Manifest, encode_state, make_locator
from agents.roles.jobs import JobContext, LoadedJobs
from agents.roles.logic import (
    RECHECK_MAX_S,
    AttestationFacts,
    Now,
    SettledJobs,
    UnitStatus,
    UnitView,
    VerifierFacts,
    VerifierStatus,
    verifier_acts,
    whistleblower_acts,
)
from agents.roles.runtime import MlpRuntime
from agents.roles.verifier import Verifier
from agents.roles.whistleblower import Whistleblower
from agents.training import merkle
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.state import state_root

REPO = Path(__file__).resolve().parents[2]
ME = "0x" + "ab" * 20
SOLVER = "0x" + "5a" * 20
OTHER = to_checksum_address("0x" + "cd" * 20)
COURT = "0x" + "c0" * 20
MANAGER = "0x" + "a1" * 20
UNIT = 1 << 32
SEGMENT = 3  # the sampled (and disputed) segment
GAME = 7
DEADLINE = 10**6


# --- the job and the solver's data ------------------------------------------------------------


@dataclass
class Job:
    spec: specs.JobSpec
    engine: Engine
    honest: Computation
    tuple_: tuple

    @property
    def k(self) -> int:
        return self.spec.checkpoint_every

    def context(self) -> JobContext:
        data = self.engine.data
        return JobContext(
            1, self.spec, MlpRuntime(self.spec, self.engine, job_graph(self.spec, data.n))
        )

    def config(self) -> bytes:
        return job_graph(self.spec, self.engine.data.n).config.hash()


@pytest.fixture(scope="module")
def job() -> Job:
    spec = specs.load(REPO / "examples" / "digits-mlp.json")
    data = datasets.load_dataset(spec.dataset_name)
    engine = Engine(spec, data)
    t = [0] * 17  # IJobManager.getJob: the fields load_job reads
    t[1], t[10], t[13] = spec.steps, spec.checkpoint_every, spec.spec_hash()
    t[14], t[15] = data.root(), state_root(engine.initial_state())
    honest = Computation(engine, spec.steps, spec.checkpoint_every)
    return Job(spec, engine, honest, decoded("getJob", tuple(t)))


@dataclass
class SolverData:
    """A solver's checkpoints served over HTTP; `take_down()` stops serving them."""

    locator: str
    checkpoint_root: bytes
    roots: list[bytes]
    server: BlobServer
    up: bool = True

    def take_down(self) -> None:
        if self.up:
            self.up = False
            self.server.stop()


@contextlib.contextmanager
def solver_data(tmp_path: Path, job: Job, comp: Computation | None = None) -> Iterator[SolverData]:
    comp = comp or job.honest
    folder = tmp_path / "solver-blobs"
    store = open_blob_store(str(folder))
    states = [store.put(encode_state(comp.state(c * job.k))) for c in range(comp.segments + 1)]
    roots = comp.checkpoint_roots()
    hexes = ["0x" + r.hex() for r in roots]
    manifest = Manifest("0x" + job.spec.spec_hash().hex(), hexes, states, [0.0] * len(hexes))
    address = store.put(manifest.to_bytes())
    server = BlobServer(LocalDirBackend(folder)).start()
    data = SolverData(make_locator(server.url, address), manifest.checkpoint_root(), roots, server)
    try:
        yield data
    finally:
        data.take_down()


def faulty(job: Job) -> Computation:
    """A solver that used a wrong batch example inside segment SEGMENT: everything it commits
    after that follows from it, so its data checks out but segment SEGMENT replays elsewhere."""
    fault = Fault("batch", step=SEGMENT * job.k + 5, element=0)
    return FaultyComputation(job.engine, job.spec.steps, job.k, fault=fault)


# --- fakes -----------------------------------------------------------------------------------


def committed_events(locator: str, root: bytes) -> SimpleNamespace:
    """`await manager.events.CheckpointsCommitted().get_logs(...)`: the unit's one commitment."""
    logs = [{"blockNumber": 5, "args": {"blobLocator": locator, "checkpointRoot": root}}]
    get_logs = answering(lambda **kw: logs)
    return SimpleNamespace(CheckpointsCommitted=lambda: SimpleNamespace(get_logs=get_logs))


def unit_view(data: SolverData | None, status: UnitStatus = UnitStatus.VERIFYING) -> UnitView:
    locator = data.locator if data else "http://127.0.0.1:9#0x" + "00" * 32
    root = data.checkpoint_root if data else b"\x05" * 32
    return UnitView(UNIT, 1, status, DEADLINE, 0, 0, SOLVER, root, b"\x01" * 32, locator, 0)


def unit_tuple(checkpoint_root: bytes, **fields) -> list:
    """IJobManager.getUnit as the ABI orders it: the committed checkpoint root, attempt 0 unless
    `fields` say otherwise (other fields zero)."""
    return _struct(MANAGER_ABI, "getUnit", checkpointRoot=checkpoint_root, **fields)


def new_store(tmp_path: Path, name: str) -> Store:
    return Store(tmp_path / f"{name}.db")


def bare(cls, tmp_path: Path, store: Store, chain: FakeChain | None = None, **args):
    """A role object without a node: what its code under test reads."""
    r = object.__new__(cls)

    def stream(name, decoder, addresses=None, topic0=None, start_block=0) -> EventStream:
        assert chain is not None, "this test gives the role no chain"
        return EventStream(
            name, chain, store, decoder, addresses=addresses, topic0=topic0, confirmations=2,
            start_block=start_block, poll_interval=0,
        )  # fmt: skip

    r.agent = SimpleNamespace(
        store=store,
        blobs=open_blob_store(str(tmp_path / f"{cls.role}-blobs")),
        clock=RealClock(),
        config=SimpleNamespace(poll_interval=0.01),
        account=SimpleNamespace(key=b"\x4c" * 32),
        stream=stream,
    )
    r.config = role_config(cls, tmp_path, **args)
    r.log = logging.getLogger(f"test.resilience.{cls.role}")
    r.me = ME
    r.rounds = None
    r.jobs, r._locators = LoadedJobs(), {}
    r.settled = SettledJobs()
    r.progress = False
    r.failures = 0
    r.w3 = SimpleNamespace(eth=SimpleNamespace(gas_price=1, get_logs=answering(lambda q: [])))
    r.now = answering(lambda: Now(10, 1_000))
    r.executor = RecordingExecutor(r)
    r.sent = r.executor.sent
    return r


def verifier(tmp_path: Path, store: Store | None = None, chain=None, **parts) -> Verifier:
    v = bare(Verifier, tmp_path, store or new_store(tmp_path, "verifier"), chain,
             replay_all=False)  # fmt: skip
    v.manager, v.game = parts.get("manager"), parts.get("game")
    v.court, v.court_game = parts.get("court"), parts.get("court_game")
    v._lock_warned, v._no_contest = SaidOnce(), set()
    v._replay_jobs, v._no_game, v._undefended = LoadedJobs(), SaidOnce(), SaidOnce()
    v._court_stream = None
    return v


def whistleblower(tmp_path: Path, store: Store | None = None, chain=None, **parts):
    w = bare(Whistleblower, tmp_path, store or new_store(tmp_path, "whistleblower"), chain,
             leaked_secrets=None)  # fmt: skip
    w.manager, w.game = parts.get("manager"), parts.get("game")
    w.court, w.court_game = parts.get("court"), parts.get("court_game")
    w.court_comps, w.bad_leaks = {}, SaidOnce()
    w._attested_stream, w._no_start = None, SaidOnce()
    return w


def verdict_of(v: Verifier, u: UnitView) -> str | None:
    rec = v.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
    return None if rec is None else rec.state


def court_game(start_root: bytes, phase: int = Phase.POST_CHECKPOINTS) -> FakeContract:
    """A segment game over SEGMENT (k steps) from `start_root`, waiting in `phase`; its move
    functions return (name, args) so a test can read what was sent."""
    claim = _game_struct(
        "claimOf", initialStateRoot=start_root, stepOffset=SEGMENT * 40, steps=40, interval=40
    )
    progress = _game_struct("progressOf", phase=phase)
    moves = {
        name: (lambda n: lambda *a: (n, a))(name)
        for name in ("postCheckpoints", "pickSegment", "openSegment", "claimTimeout")
    }
    return FakeContract(
        GAME_ABI,
        claimOf=lambda g: claim,
        progressOf=lambda g: progress,
        turn=lambda g: (1, 10**9),
        **moves,
    )


GAME_ABI = load_artifact("DisputeGame")["abi"]
MANAGER_ABI = load_artifact("JobManager")["abi"]


def _struct(abi: list, fn: str, **fields) -> list:
    """The struct view `fn` of a contract returns, as its ABI orders it (other fields zero)."""
    (item,) = [i for i in abi if i.get("type") == "function" and i["name"] == fn]
    names = [c["name"] for c in item["outputs"][0]["components"]]
    assert set(fields) <= set(names), f"{fn} has no field {set(fields) - set(names)}"
    return [fields.get(name, 0) for name in names]


def _game_struct(fn: str, **fields) -> list:
    """The struct view `fn` of the game returns, as the ABI orders it (other fields zero)."""
    return _struct(GAME_ABI, fn, **fields)


# --- F11: defending a true attestation once the solver's data is gone ------------------------


def _replayed_verifier(tmp_path: Path, job: Job, data: SolverData, start_root: bytes) -> Verifier:
    manager = FakeContract(
        getJob=lambda j: job.tuple_,
        sampledSegments=lambda u, v: [SEGMENT],
        getUnit=lambda u: unit_tuple(data.checkpoint_root),
    )
    manager.events = committed_events(data.locator, data.checkpoint_root)
    game = FakeContract(configOf=lambda j: job.config())
    return verifier(tmp_path, manager=manager, game=game, court_game=court_game(start_root))


def _defence(v: Verifier) -> list:
    """Two rounds of the defence (the first may only start the read of the solver's data)."""
    case = {"unit": UNIT, "segment": SEGMENT, "block": 9}
    in_rounds(v, lambda: v.defend_one(GAME, case, Now(10, 1_000)), lambda: v.sent, 2)
    return [sent for _, sent in v.sent]


def test_verifier_defends_a_true_attestation_from_its_kept_start_state_once_the_solver_is_gone(
    tmp_path, job
):
    with solver_data(tmp_path, job) as data:
        v = _replayed_verifier(tmp_path, job, data, data.roots[SEGMENT])
        v.agent.blobs.put(job.spec.canonical_bytes())
        u = unit_view(data)
        in_rounds(v, lambda: v.replay(u), lambda: verdict_of(v, u) is not None)
        assert v.agent.store.get_record("verdict", f"{UNIT}:0").state == "agree"
        data.take_down()

        def no_full_replay(ctx):
            raise AssertionError("replayed from step 0 although the start state was kept")

        v.challenger_comp = no_full_replay
        sent = _defence(v)
    ends = [data.roots[SEGMENT], data.roots[SEGMENT + 1]]
    assert sent == [("postCheckpoints", (GAME, ends))]


def test_verifier_defends_from_its_own_replay_from_step_0_when_nothing_was_kept(tmp_path, job):
    with solver_data(tmp_path, job) as data:
        data.take_down()  # gone before this (restarted, store wiped) verifier looks
        v = _replayed_verifier(tmp_path, job, data, data.roots[SEGMENT])
        v.jobs.put(1, job.context())
        sent = _defence(v)
    assert sent == [("postCheckpoints", (GAME, [data.roots[SEGMENT], data.roots[SEGMENT + 1]]))]


def test_verifier_does_not_defend_from_a_state_that_is_not_the_games_start(tmp_path, job, caplog):
    """A game whose start root no source gives (the solver's checkpoint was not the honest one,
    and its data is gone): no move, one error line, no crash; tried again next round."""
    with solver_data(tmp_path, job) as data:
        data.take_down()
        v = _replayed_verifier(tmp_path, job, data, b"\x77" * 32)
        v.jobs.put(1, job.context())
        caplog.set_level(logging.WARNING, logger=v.log.name)
        assert _defence(v) == []
        assert _defence(v) == []
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "cannot defend" in errors[0].getMessage()


def _false_attestation(tmp_path: Path, job: Job, data: SolverData):
    manager = FakeContract(MANAGER_ABI, getUnit=lambda u: unit_tuple(data.checkpoint_root))
    manager.events = committed_events(data.locator, data.checkpoint_root)
    court = FakeContract(
        bondOf=lambda u, who: 10,
        window=lambda: 86_400,
        challengeAttestation=lambda *a: ("challengeAttestation", a),
    )
    w = whistleblower(tmp_path, manager=manager, court=court,
                      court_game=court_game(data.roots[SEGMENT]))  # fmt: skip
    w.jobs.put(1, job.context())

    async def approved(*a) -> None:
        return None

    w.approve_at_least = approved
    key = f"{UNIT}:{OTHER}:9"
    record = {"unit": UNIT, "verifier": OTHER, "block": 9, "segments": [1, SEGMENT],
              "end_roots": ["0x" + data.roots[2].hex(), "0x" + "01" * 32]}  # fmt: skip
    w.agent.store.put_record("attestation", key, "new", record)
    return w, key


def test_whistleblower_disputes_and_plays_a_false_attestation_once_the_solver_is_gone(
    tmp_path, job
):
    with solver_data(tmp_path, job) as data:
        w, key = _false_attestation(tmp_path, job, data)
        recheck_now(w, key)
        assert w.agent.store.get_record("attestation", key).state == "false"
        data.take_down()
        rec = w.agent.store.get_record("attestation", key)
        asyncio.run(w.court_challenge(CourtChallenge(f"court:{key}", key), key, dict(rec.data)))
        assert len(w.sent) == 1
        name, (unit_id, who, index, ends, start, proof) = w.sent[0][1]
        assert (name, unit_id, who, index) == ("challengeAttestation", UNIT, OTHER, 1)
        assert start == data.roots[SEGMENT]
        n = len(data.roots)
        opened = merkle.ListProof(SEGMENT, start, list(proof))
        assert merkle.verify_list_proof(merkle.CHECKPOINT_DOMAIN, data.checkpoint_root, n, opened)
        # the court game is open: the whistleblower's challenger starts from the kept state
        case = rec.data | {"court_game": GAME, "court_segment": SEGMENT}
        w.challenger_comp = lambda ctx: pytest.fail("replayed from step 0")
        asyncio.run(w.play_court(key, case))
    assert state_root(w.court_comps[GAME].state(SEGMENT * job.k)) == data.roots[SEGMENT]


# --- F6: a drawn verifier of a job without a (right) dispute config --------------------------


def _drawn(tmp_path: Path, job: Job, data: SolverData, config: bytes) -> Verifier:
    manager = FakeContract(getJob=lambda j: job.tuple_, sampledSegments=lambda u, v: [SEGMENT])
    registered = {"config": config}
    game = FakeContract(configOf=lambda j: registered["config"], placementOf=lambda j: (0, 0, 0))
    v = verifier(tmp_path, manager=manager, game=game)
    v.registered = registered
    v.agent.blobs.put(job.spec.canonical_bytes())
    return v


def _acts(v: Verifier, u: UnitView) -> list[type]:
    rec = v.agent.store.get_record("verdict", f"{u.unit_id}:{u.attempt}")
    facts = VerifierFacts(ME, VerifierStatus.PENDING, rec.state if rec else None, 0, False)
    return [type(a) for a in verifier_acts(u, Now(1, DEADLINE - 100), facts)]


def test_drawn_verifier_seals_its_replay_of_a_job_without_a_registered_config(tmp_path, job):
    with solver_data(tmp_path, job) as data:
        v = _drawn(tmp_path, job, data, bytes(32))  # none registered
        u = unit_view(data)
        in_rounds(v, lambda: v.replay(u), lambda: verdict_of(v, u) is not None)
    assert _acts(v, u) == [Seal]


def test_drawn_verifier_whose_replay_ends_after_the_window_says_it_can_send_nothing(
    tmp_path, job, caplog
):
    with solver_data(tmp_path, job) as data:
        v = _drawn(tmp_path, job, data, bytes(32))
        u = unit_view(data)
        caplog.set_level(logging.INFO, logger=v.log.name)
        v.now = answering(lambda: Now(10, DEADLINE))  # the replay ends past its margin
        in_rounds(v, lambda: v.replay(u), lambda: verdict_of(v, u) is not None)
        late = [
            r.getMessage() for r in caplog.records if "after the verify window" in r.getMessage()
        ]
        assert late == [f"unit {UNIT}: replay finished 2s after the verify window closed: no "
                        "attestation or challenge can be sent"]  # fmt: skip
        # in time: nothing said
        caplog.clear()
        v.now = answering(lambda: Now(10, DEADLINE - 100))
        in_rounds(v, lambda: v.replay(u), lambda: "all agree" in caplog.text)
        assert not [r for r in caplog.records if "after the verify window" in r.getMessage()]


def test_drawn_verifier_skips_only_the_challenge_under_a_wrong_config_and_says_so_once(
    tmp_path, job, caplog
):
    with solver_data(tmp_path, job, faulty(job)) as data:
        v = _drawn(tmp_path, job, data, b"\x33" * 32)  # not the spec's
        u = unit_view(data)
        in_rounds(v, lambda: v.replay(u), lambda: verdict_of(v, u) is not None)
    assert _acts(v, u) == [Challenge, Seal]
    challenges: list[int] = []

    async def open_challenge(act, unit, ctx) -> bool:
        challenges.append(unit.unit_id)
        return True

    v.open_challenge = open_challenge
    caplog.set_level(logging.INFO, logger=v.log.name)
    for _ in range(3):
        asyncio.run(v.handle(Challenge(f"challenge:{UNIT}:0", UNIT, 0), u, Now(1, 1_000)))
    assert challenges == []
    said = [r.getMessage() for r in caplog.records if "not challenging" in r.getMessage()]
    assert len(said) == 1 and "dispute config" in said[0]
    # the submitter registers the spec's config after all: the challenge goes out
    v.registered["config"] = job.config()
    asyncio.run(v.handle(Challenge(f"challenge:{UNIT}:0", UNIT, 0), u, Now(1, 1_000)))
    assert challenges == [UNIT]


# --- F8: the whistleblower retries data that was unusable ------------------------------------


def test_whistleblower_rechecks_an_unavailable_attestation_with_backoff_while_the_unit_is_live():
    u = unit_view(None)
    key = f"{UNIT}:{OTHER}:9"

    def acts(tries: int, at: int, unit: UnitView = u) -> list:
        facts = AttestationFacts("unavailable", False, False, True, tries=tries, last_try=1_000)
        return whistleblower_acts(unit, Now(10, at), key, facts)

    assert acts(1, 1_009) == [] and acts(1, 1_010) == [Recheck(key)]
    assert acts(3, 1_039) == [] and acts(3, 1_040) == [Recheck(key)]
    assert acts(60, 1_000 + RECHECK_MAX_S - 1) == []
    assert acts(60, 1_000 + RECHECK_MAX_S) == [Recheck(key)]
    assert acts(1, 1_010, unit_view(None, UnitStatus.DISPUTED)) == [Recheck(key)]
    assert acts(1, 5_000, unit_view(None, UnitStatus.FINALIZED)) == []


def test_whistleblower_counts_a_failed_recheck_and_finds_the_false_attestation_later(tmp_path, job):
    with solver_data(tmp_path, job) as data:
        w, key = _false_attestation(tmp_path, job, data)
        folder, aside = tmp_path / "solver-blobs", tmp_path / "solver-blobs-away"
        folder.rename(aside)  # the solver's server is up, its files are not (404)
        recheck_now(w, key)
        rec = w.agent.store.get_record("attestation", key)
        assert rec.state == "unavailable"
        assert (rec.data["tries"], rec.data["last_try"]) == (1, 1_000)
        aside.rename(folder)
        now = Now(11, 1_010)
        w.now = answering(lambda: now)
        u = unit_view(data)
        facts = AttestationFacts("unavailable", False, False, True, 0, False, 1, 1_000)
        assert whistleblower_acts(u, now, key, facts) == [Recheck(key)]
        recheck_now(w, key)
    assert w.agent.store.get_record("attestation", key).state == "false"


# --- F5: events read confirmations deep, reorg-safe -------------------------------------------

CHALLENGED_ABI = {
    "type": "event",
    "name": "AttestationChallenged",
    "anonymous": False,
    "inputs": [
        {"name": "unitId", "type": "uint256", "indexed": True},
        {"name": "verifier", "type": "address", "indexed": True},
        {"name": "whistleblower", "type": "address", "indexed": True},
        {"name": "gameId", "type": "uint256", "indexed": False},
        {"name": "segment", "type": "uint64", "indexed": False},
        {"name": "startRoot", "type": "bytes32", "indexed": False},
        {"name": "endRoot", "type": "bytes32", "indexed": False},
        {"name": "penalty", "type": "uint256", "indexed": False},
        {"name": "bond", "type": "uint256", "indexed": False},
    ],
}
ATTESTED_ABI = {
    "type": "event",
    "name": "Attested",
    "anonymous": False,
    "inputs": [
        {"name": "unitId", "type": "uint256", "indexed": True},
        {"name": "verifier", "type": "address", "indexed": True},
        {"name": "segments", "type": "uint64[]", "indexed": False},
        {"name": "endRoots", "type": "bytes32[]", "indexed": False},
    ],
}


def _topic(typ: str, value) -> str:
    return "0x" + encode([typ], [value]).hex()


def challenged_log(game_id: int, verifier_: str = ME) -> tuple[str, tuple[str, ...], str]:
    topic0 = "0x" + keccak(text="AttestationChallenged(uint256,address,address,uint256,uint64,"
                                "bytes32,bytes32,uint256,uint256)").hex()  # fmt: skip
    topics = (topic0, _topic("uint256", UNIT), _topic("address", verifier_),
              _topic("address", OTHER))  # fmt: skip
    data = encode(["uint256", "uint64", "bytes32", "bytes32", "uint256", "uint256"],
                  [game_id, SEGMENT, b"\x02" * 32, b"\x03" * 32, 20, 10])  # fmt: skip
    return COURT, topics, "0x" + data.hex()


def attested_log(verifier_: str = OTHER) -> tuple[str, tuple[str, ...], str]:
    topic0 = "0x" + keccak(text="Attested(uint256,address,uint64[],bytes32[])").hex()
    topics = (topic0, _topic("uint256", UNIT), _topic("address", verifier_))
    data = encode(["uint64[]", "bytes32[]"], [[SEGMENT], [b"\x01" * 32]])
    return MANAGER, topics, "0x" + data.hex()


@dataclass
class FakeChain:
    """Blocks with logs as the node currently sees them; a `LogSource` for the event stream and
    `events.<Name>().get_logs(from_block=, to_block=)` for code that reads logs itself."""

    blocks: list[tuple[str, list[RawLog]]] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self) -> None:
        self.mine()

    def mine(self, logs: list[tuple[str, tuple[str, ...], str]] | None = None) -> None:
        self.counter += 1
        number, bhash = len(self.blocks), "0x" + keccak(text=f"block{self.counter}").hex()
        raws = []
        for i, (address, topics, data) in enumerate(logs or []):
            tx = "0x" + keccak(text=f"tx{number}:{i}:{topics}").hex()  # same tx when re-mined
            raws.append(RawLog(address, topics, data, number, bhash, tx, i))
        self.blocks.append((bhash, raws))

    def mine_to(self, head: int) -> None:
        while self.head_now < head:
            self.mine()

    def reorg(self, depth: int) -> None:
        """Drop the last `depth` blocks (the caller mines the new branch)."""
        del self.blocks[len(self.blocks) - depth :]

    @property
    def head_now(self) -> int:
        return len(self.blocks) - 1

    async def head(self) -> int:
        return self.head_now

    async def block_hash(self, number: int) -> str | None:
        return self.blocks[number][0] if 0 <= number < len(self.blocks) else None

    async def logs(self, first, last, addresses, topic0) -> list[RawLog]:
        return [
            r
            for _, raws in self.blocks[first : last + 1]
            for r in raws
            if (not addresses or r.address.lower() in {a.lower() for a in addresses})
            and (not topic0 or r.topics[0] in topic0)
        ]

    def events(self, abi: dict) -> SimpleNamespace:
        decoder = AbiDecoder([abi])

        async def get_logs(from_block=0, to_block="latest", argument_filters=None):
            hi = self.head_now if to_block == "latest" else int(to_block)
            out = []
            for _, raws in self.blocks[from_block : hi + 1]:
                for r in raws:
                    ev = decoder.decode(r)
                    if ev is not None:
                        out.append({"blockNumber": r.block_number, "args": ev.args})
            return out

        return SimpleNamespace(**{abi["name"]: lambda: SimpleNamespace(get_logs=get_logs)})


def _court_verifier(tmp_path: Path, chain: FakeChain, store: Store) -> Verifier:
    court = FakeContract([CHALLENGED_ABI], COURT, credits=lambda who: 0)
    court.events = chain.events(CHALLENGED_ABI)
    v = verifier(tmp_path, store, chain, court=court, court_game=FakeContract())
    v.defended = []

    async def defend_one(gid, data, now) -> None:
        v.defended.append(gid)

    v.defend_one = defend_one
    return v


def _scan(v: Verifier, chain: FakeChain) -> None:
    asyncio.run(v.defend_attestations(Now(chain.head_now, 1_000 + chain.head_now)))


def test_restarted_verifier_sees_a_court_challenge_re_mined_below_its_last_scan(tmp_path):
    chain = FakeChain()
    chain.mine_to(100)
    store = new_store(tmp_path, "verifier")
    _scan(_court_verifier(tmp_path, chain, store), chain)  # fork A: nothing up to block 100
    chain.reorg(1)  # fork B wins: its block 100 holds a challenge of my attestation
    chain.mine([challenged_log(GAME), challenged_log(GAME + 1, verifier_=OTHER)])
    chain.mine_to(103)
    v = _court_verifier(tmp_path, chain, store)  # restarted on the same data folder
    _scan(v, chain)
    assert [r.record_id for r in store.list_records("court", "open")] == [str(GAME)]
    assert v.defended == [GAME]
    store.put_record("court", str(GAME), "resolved", store.get_record("court", str(GAME)).data)
    chain.mine_to(110)
    v = _court_verifier(tmp_path, chain, store)  # again: the case stays closed
    _scan(v, chain)
    assert store.list_records("court", "open") == [] and v.defended == []


def test_verifier_drops_a_court_challenge_that_a_reorg_took_away(tmp_path):
    chain = FakeChain()
    chain.mine_to(94)
    chain.mine([challenged_log(GAME)])  # block 95
    chain.mine_to(100)
    store = new_store(tmp_path, "verifier")
    v = _court_verifier(tmp_path, chain, store)
    _scan(v, chain)
    assert v.defended == [GAME]
    chain.reorg(10)  # blocks 91..100 replaced by a branch without the challenge
    chain.mine_to(104)
    v.defended.clear()
    _scan(v, chain)
    assert store.get_record("court", str(GAME)).state == "retracted"
    assert v.defended == []


def _attested_whistleblower(tmp_path: Path, chain: FakeChain, store: Store) -> Whistleblower:
    manager = FakeContract([ATTESTED_ABI], MANAGER)
    manager.events = chain.events(ATTESTED_ABI)
    w = whistleblower(tmp_path, store, chain, manager=manager)

    async def nothing(*a) -> None:
        return None

    w.now = answering(lambda: Now(chain.head_now, 1_000 + chain.head_now))
    w.heartbeat_if_due = w.withdraw_if_credited = nothing
    w.units = answering(lambda: [])
    w.unit = answering(lambda uid: unit_view(None, UnitStatus.FINALIZED))
    w.context = answering(lambda job_id: None)  # no re-check here: only what the scan records
    return w


def test_whistleblower_sees_an_attestation_re_mined_below_its_last_scan(tmp_path):
    chain = FakeChain()
    chain.mine_to(100)
    store = new_store(tmp_path, "whistleblower")
    asyncio.run(_attested_whistleblower(tmp_path, chain, store).round())
    chain.reorg(1)
    chain.mine([attested_log()])  # fork B's block 100
    chain.mine_to(103)
    asyncio.run(_attested_whistleblower(tmp_path, chain, store).round())
    assert [r.record_id for r in store.list_records("attestation")] == [f"{UNIT}:{OTHER}:100"]


def test_whistleblower_drops_an_attestation_that_a_reorg_took_away(tmp_path):
    chain = FakeChain()
    chain.mine_to(94)
    chain.mine([attested_log()])  # block 95
    chain.mine_to(100)
    store = new_store(tmp_path, "whistleblower")
    w = _attested_whistleblower(tmp_path, chain, store)
    looked: list[int] = []
    w.context = answering(lambda job_id: looked.append(job_id))  # the attestation's re-check
    asyncio.run(w.round())
    assert looked == [1]
    chain.reorg(10)  # blocks 91..100 replaced by a branch without the attestation
    chain.mine_to(104)
    looked.clear()
    asyncio.run(w.round())
    assert looked == []


def test_no_game_reason_names_the_check_that_failed():
    """The one warning of a job not set up for its game says why, not "placement None"."""
    from agents.roles.verifier import no_game_reason

    assert no_game_reason(b"\0" * 32, None) == "no dispute config is registered"
    assert "0x3333333333333333… is not the spec's" in no_game_reason(b"\x33" * 32, None)
    said = no_game_reason(b"\x33" * 32, (0, 3, 1))
    assert "placement [0, 3, 1]" in said and "None" not in said
