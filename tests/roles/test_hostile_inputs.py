"""A job's spec, a solver's manifest and a locator are anyone's: what the roles do with hostile
ones. Loading a job raises only JobRejected (cheap checks before costly work), reading a
solver's data only BadBlob, and a locator opens only an http(s) store. Pure Python: roles are
built with object.__new__ over small fakes of the contracts, no chain."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from rolefakes import Call, FakeContract, FakeEth, decoded, in_rounds, ready, role_config

from agents.core.blobs import open_blob_store, serving
from agents.core.bounded import SaidOnce
from agents.core.clock import RealClock
from agents.core.store import Store
from agents.data import builtin as datasets
from agents.dispute.graph import job_graph
from agents.roles.artifacts import (
    BadBlob,
    CheckpointReader,
    Manifest,
    encode_state,
    locator_problem,
    locator_store,
    make_locator,
)
from agents.roles.jobs import JobContext, JobRejected, LoadedJobs, load_job
from agents.roles.logic import SettledJobs, UnitStatus, UnitView
from agents.roles.runtime import MlpRuntime
from agents.roles.solver import Solver
from agents.roles.verifier import Verifier
from agents.training import spec as specs
from agents.training.engine import Engine
from agents.training.merkle import checkpoint_root
from agents.training.state import state_root

REPO = Path(__file__).resolve().parents[2]
DIGITS = specs.load(REPO / "examples" / "digits-mlp.json")
ME = "0x" + "ab" * 20


# --- fakes -----------------------------------------------------------------------------------


class FakeEvents:
    """`await events.<Name>().get_logs(...)` over a fixed list of logs."""

    def __init__(self, name: str, logs: list[dict]):
        async def get_logs(**kw) -> list[dict]:
            return list(logs)

        setattr(self, name, lambda: SimpleNamespace(get_logs=get_logs))


def job_tuple(spec: specs.JobSpec, *, dataset_root=None, s0=None) -> tuple:
    """IJobManager.getJob's tuple, the fields load_job / eligible read."""
    t = [0] * 17
    t[1], t[10] = spec.steps, spec.checkpoint_every
    t[8], t[11], t[12] = 0, 0, 0  # required capability: none
    t[13] = spec.spec_hash()
    t[14] = dataset_root if dataset_root is not None else bytes.fromhex(spec.dataset_root[2:])
    t[15] = s0 if s0 is not None else b"\x22" * 32
    return decoded("getJob", tuple(t))


def role(cls, tmp_path: Path, blobs, manager, game, **args):
    """A role object without a chain: the attributes its decision code reads."""
    r = object.__new__(cls)
    r.agent = SimpleNamespace(
        store=Store(tmp_path / "agent.db"),
        blobs=blobs,
        clock=RealClock(),
        config=SimpleNamespace(poll_interval=0.01),
    )
    r.config = role_config(cls, tmp_path, **args)
    r.log = logging.getLogger(f"hostile.{cls.role}")
    r.me = ME
    r.manager, r.game = manager, game
    r.registry = FakeContract(freeStake=lambda who: 10**30)
    r.rounds = None
    r.jobs, r._locators, r._warned = LoadedJobs(), {}, SaidOnce()
    r.settled = SettledJobs()
    r.progress = False
    r.failures = 0
    r.w3 = SimpleNamespace(eth=FakeEth(head=1, timestamp=10))
    return r


def open_unit(job_id: int = 1) -> UnitView:
    """An open unit whose claim deadline is near (the fakes' chain time is 10)."""
    return UnitView(job_id << 32, job_id, UnitStatus.OPEN, 1000, 0, 0, "0x" + "00" * 20,
                    b"", b"", "", 0)  # fmt: skip


def solver_for(tmp_path: Path, spec_obj: dict, **job_kw) -> Solver:
    """A solver looking at one open unit of a job whose (possibly hostile) spec passes
    parse_spec and is published where the solver looks."""
    blobs = open_blob_store(str(tmp_path / "blobs"))
    raw = specs.canonical_json(spec_obj)
    blobs.put(raw)
    job = job_tuple(specs.loads(raw), **job_kw)
    manager = FakeContract(getJob=lambda j: job, collateralOf=lambda j: 1)
    game = FakeContract(configOf=lambda j: b"\x00" * 32, placementOf=lambda j: (0, 0, 0))
    solver = role(Solver, tmp_path, blobs, manager, game, units_per_round=1,
                  max_claim_wait=3600, train_speed=200.0)  # fmt: skip
    solver.capability = (0, 4096, 1000)
    return solver


def digits_job(spec: specs.JobSpec = DIGITS) -> tuple[tuple, bytes]:
    """(the chain's job tuple, its registered config) of an honest job of `spec`."""
    data = datasets.load_dataset(spec.dataset_name)
    s0 = state_root(Engine(spec, data).initial_state())
    return job_tuple(spec, s0=s0), job_graph(spec, data.n).config.hash()


# --- F1: a hostile job spec is refused (JobRejected), never an error that ends the agent ------


def test_solver_declines_a_spec_whose_input_width_is_not_the_dataset_s(tmp_path):
    obj = DIGITS.to_obj() | {"model": {"arch": "mlp", "widths": [10, 10]}}
    solver = solver_for(tmp_path, obj)
    assert asyncio.run(solver.eligible(open_unit())) is False  # JobSpecError escaped before the fix
    refusal = solver.agent.store.get_record("job", "1")
    assert refusal is not None and "10" in refusal.data["reason"], "the refusal is stored"
    assert asyncio.run(solver.eligible(open_unit())) is False  # and not looked at again


def test_solver_declines_a_spec_naming_an_unknown_dataset(tmp_path):
    obj = DIGITS.to_obj() | {"dataset": {"name": "nope/none", "root": "0x" + "11" * 32}}
    solver = solver_for(tmp_path, obj)
    assert asyncio.run(solver.eligible(open_unit())) is False  # DatasetError escaped before the fix
    assert "unknown dataset" in solver.agent.store.get_record("job", "1").data["reason"]


def test_synthetic_dataset_size_is_bounded_in_total_before_any_word_is_made(monkeypatch):
    asked: list[int] = []
    monkeypatch.setattr(datasets, "stream_words", lambda tag, seed, n: asked.append(n))
    # each size is in range, the total (2^40 words) is not
    name = f"synthetic/n={1 << 24},f={1 << 16},c=10,seed=1"
    with pytest.raises(datasets.DatasetError, match="too large"):
        datasets.load_dataset(name)
    with pytest.raises(datasets.DatasetError, match="too large"):
        datasets.shape(name)
    # the teacher (f * c words) and the scores (n * c) are bounded too
    for huge in (f"synthetic/n=1,f={1 << 16},c={1 << 16},seed=1",
                 f"synthetic/n={1 << 24},f=1,c={1 << 16},seed=1"):  # fmt: skip
        with pytest.raises(datasets.DatasetError, match="too large"):
            datasets.load_dataset(huge)
    assert asked == [], f"words were generated: {asked}"


def test_load_job_refuses_an_oversized_synthetic_dataset_without_building_it(tmp_path, monkeypatch):
    asked: list[int] = []
    monkeypatch.setattr(datasets, "stream_words", lambda tag, seed, n: asked.append(n))
    name = f"synthetic/n={1 << 24},f={1 << 16},c=10,seed=1"
    obj = DIGITS.to_obj() | {
        "dataset": {"name": name, "root": "0x" + "11" * 32},
        "model": {"arch": "mlp", "widths": [1 << 16, 10]},
    }
    spec = specs.loads(specs.canonical_json(obj))
    store = open_blob_store(str(tmp_path / "blobs"))
    store.put(spec.canonical_bytes())
    with pytest.raises(JobRejected, match="too large"):
        load_job(1, job_tuple(spec), [store], b"\x00" * 32)
    assert asked == []


def test_load_job_checks_the_registered_config_before_building_dataset_or_state(
    tmp_path, monkeypatch
):
    """A hostile job costs a refusing agent no dataset, engine or S_0 when its config is not
    the spec's (or none is registered): those checks are cheap and come first."""
    store = open_blob_store(str(tmp_path / "blobs"))
    store.put(DIGITS.canonical_bytes())
    job, cfg = digits_job()
    built: list[str] = []
    real_load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda n: built.append(n) or real_load(n))
    with pytest.raises(JobRejected, match="registered"):
        load_job(1, job, [store], b"\x00" * 32)
    # a spec whose dataset root is not the chain's: refused before anything is built
    with pytest.raises(JobRejected, match="dataset root differs"):
        load_job(1, job._replace(datasetRoot=b"\x33" * 32), [store], cfg)
    assert built == []
    assert load_job(1, job, [store], cfg).spec == DIGITS  # the honest job still loads


def test_load_job_turns_an_engine_error_into_a_rejection(tmp_path):
    """Digits has 10 classes; a last width of 5 passes parse_spec, the cheap checks and the
    config, and fails in Engine(): JobRejected, not JobSpecError."""
    spec = specs.loads(
        specs.canonical_json(DIGITS.to_obj() | {"model": {"arch": "mlp", "widths": [64, 5]}})
    )
    store = open_blob_store(str(tmp_path / "blobs"))
    store.put(spec.canonical_bytes())
    data = datasets.load_dataset(spec.dataset_name)
    cfg = job_graph(spec, data.n).config.hash()
    with pytest.raises(JobRejected, match="classes"):
        load_job(1, job_tuple(spec), [store], cfg)


def test_load_job_does_not_read_a_spec_blob_above_the_spec_cap(tmp_path):
    """A blob at the spec's address that is far larger than any spec is not read at all."""
    raw = specs.canonical_json(DIGITS.to_obj())[:-1] + b" " * (1 << 17) + b"}"
    store = open_blob_store(str(tmp_path / "blobs"))
    address = store.put(raw)
    job = job_tuple(DIGITS)
    job = job._replace(specHash=bytes.fromhex(address[2:]))
    with pytest.raises(JobRejected, match="not found"):
        load_job(1, job, [store], b"\x00" * 32)


def test_load_job_refuses_a_spec_blob_nested_too_deeply(tmp_path):
    """JSON nested deeper than the parser's recursion limit is RecursionError, not a
    JobSpecError: still a refusal."""
    store = open_blob_store(str(tmp_path / "blobs"))
    address = store.put(b"[" * 50_000)
    job = job_tuple(DIGITS)
    job = job._replace(specHash=bytes.fromhex(address[2:]))
    with pytest.raises(JobRejected, match="published spec is invalid"):
        load_job(1, job, [store], b"\x00" * 32)


def test_load_job_refuses_a_model_over_max_params_before_anything_is_built(tmp_path, monkeypatch):
    """--max-params is the agent's memory budget: a spec above it is refused right after it is
    parsed (no dataset, engine or initial state is built); the same job loads under a larger
    budget, and a solver stores the refusal as for any job it cannot take."""
    from agents.roles import runtime

    store = open_blob_store(str(tmp_path / "blobs"))
    store.put(DIGITS.canonical_bytes())
    job, cfg = digits_job()
    built: list[str] = []
    monkeypatch.setattr(runtime, "check_dataset", lambda *a: built.append("dataset"))
    with pytest.raises(JobRejected, match=f"{DIGITS.n_params} parameters, over --max-params"):
        load_job(1, job, [store], cfg, max_params=DIGITS.n_params - 1)
    assert built == []
    monkeypatch.undo()
    assert load_job(1, job, [store], cfg, max_params=DIGITS.n_params).spec == DIGITS
    solver = solver_for(tmp_path / "s", DIGITS.to_obj())
    solver.config = dataclasses.replace(solver.config, max_params=100)
    assert asyncio.run(solver.eligible(open_unit())) is False
    assert "--max-params 100" in solver.agent.store.get_record("job", "1").data["reason"]


def test_a_solvers_dispute_computation_keeps_states_within_state_cache_mib(tmp_path):
    """--state-cache-mib bounds what the solver's accounts of its units keep of training states,
    all of them together (agents/dispute/budget.py; a walk keeps one state per checkpoint, the
    least recently used of any account out first)."""
    blobs = open_blob_store(str(tmp_path / "blobs"))
    blobs.put(DIGITS.canonical_bytes())
    job, cfg = digits_job()
    manager = FakeContract(getJob=lambda j: job, collateralOf=lambda j: 1)
    game = FakeContract(configOf=lambda j: cfg, placementOf=lambda j: (0, 0, 0))
    solver = role(Solver, tmp_path, blobs, manager, game, state_cache_mib=3)
    solver.comps = {}  # (what the fakes' role() leaves to __init__)
    comp = asyncio.run(solver.computation(open_unit()))
    assert comp.budget is solver.state_budget
    assert solver.state_budget.limit_bytes == solver.state_cache_bytes == 3 << 20
    other = solver.new_computation(asyncio.run(solver.job_context(1)))
    assert other.budget is comp.budget  # one budget for all my accounts, not one each


def test_rounds_refuses_a_decomposed_model_over_max_params(tmp_path):
    rounds = rounds_for(tmp_path, V2)
    rounds.max_params = V2.n_params - 1
    with pytest.raises(JobRejected, match="over --max-params"):
        asyncio.run(rounds.job_spec(1))


# --- F1 (decomposed jobs): Rounds.job_spec and load_unit --------------------------------------


V2 = specs.load(REPO / "examples" / "digits-2x3.json")


def rounds_for(tmp_path: Path, spec: specs.JobSpec, n: int | None = None):
    from agents.roles.decomposed import Rounds

    store = open_blob_store(str(tmp_path / "blobs"))
    store.put(spec.canonical_bytes())
    # RoundManager JobParams: a version-2 job (aggregationConfigHash, initialRoundRoot and
    # numStep, the last three, zero)
    params = [0] * 18
    params[0], params[1] = spec.spec_hash(), bytes.fromhex(spec.dataset_root[2:])
    params[4:8] = [spec.rounds, spec.shards, spec.k_local, spec.checkpoint_every]
    params[8] = n if n is not None else 1438
    params[9] = (0, 0, 0)  # required capability: none
    rm = FakeContract(getJob=lambda dj: (0, 1, 0, 0, tuple(params)))
    return Rounds(rm, None, None, [store])


def test_rounds_rejects_a_decomposed_spec_naming_an_unknown_dataset(tmp_path):
    bad = specs.loads(
        specs.canonical_json(
            V2.to_obj() | {"dataset": {"name": "nope/none", "root": "0x" + "11" * 32}}
        )
    )
    with pytest.raises(JobRejected, match="unknown dataset"):
        asyncio.run(rounds_for(tmp_path, bad).job_spec(1))  # DatasetError before the fix


def test_rounds_rejects_a_decomposed_spec_whose_width_is_not_the_dataset_s(tmp_path):
    bad = specs.loads(
        specs.canonical_json(V2.to_obj() | {"model": {"arch": "mlp", "widths": [10, 10]}})
    )
    with pytest.raises(JobRejected, match="features"):
        asyncio.run(rounds_for(tmp_path, bad).job_spec(1))


def test_load_unit_checks_config_and_placement_before_building_the_global_state(tmp_path):
    rounds = rounds_for(tmp_path, V2)
    spec, data = asyncio.run(rounds.job_spec(1))
    uspec = dataclasses.replace(spec, steps=spec.k_local)
    unit_hash = b"\x44" * 32
    rounds.rm.functions.unitOf = lambda j: Call((1, 0, 2))
    rounds.rm.functions.unitSpecHash = lambda h, r, s: Call(unit_hash)
    rounds.game = FakeContract(configOf=lambda j: b"\x00" * 32, placementOf=lambda j: (0, 3, 2))
    built: list[int] = []
    rounds.global_state = lambda dj, r: ready(built.append(r))
    job = [0] * 17
    job[1], job[10], job[13] = uspec.steps, uspec.checkpoint_every, unit_hash
    job = decoded("getJob", tuple(job))
    with pytest.raises(JobRejected, match="registered dispute config"):
        asyncio.run(rounds.load_unit(7, job))
    cfg = job_graph(uspec, data.n).config.hash()
    rounds.game = FakeContract(configOf=lambda j: cfg, placementOf=lambda j: (0, 3, 1))
    with pytest.raises(JobRejected, match="placement"):
        asyncio.run(rounds.load_unit(7, job))
    assert built == []


# --- F2: a hostile manifest is BadBlob ("unavailable"), never a crash --------------------------


def good_manifest(spec: specs.JobSpec = DIGITS, store=None) -> dict:
    """A well-formed manifest object of `spec` (every checkpoint S_0; its states stored)."""
    s0 = Engine(spec, datasets.load_dataset(spec.dataset_name)).initial_state()
    n = spec.steps // spec.checkpoint_every + 1
    addr = store.put(encode_state(s0)) if store is not None else "0x" + "77" * 32
    return {"version": 1, "spec_hash": "0x" + spec.spec_hash().hex(),
            "roots": ["0x" + state_root(s0).hex()] * n, "states": [addr] * n,
            "losses": [0.5] * n}  # fmt: skip


def cp_root_of(obj: dict) -> bytes:
    """The checkpoint root a solver commits for `obj`'s root list (hex strings or not)."""
    roots = obj["roots"]
    if all(isinstance(r, str) for r in roots):
        return checkpoint_root([bytes.fromhex(r[2:]) for r in roots])
    return b"\x05" * 32


@pytest.mark.parametrize(
    "change",
    [
        {"roots": [1, 2], "states": [1, 2], "losses": [0, 0]},
        {"roots": ["0x" + "ab" * 32] * 2, "states": ["0x" + "cd" * 32] * 2, "losses": [0, 0]},
        {"states": [7] * 11},
        {"states": ["../../etc/passwd"] * 11},
        {"roots": ["0x" + "AB" * 32] * 11},
        {"losses": ["0.5"] * 11},
        {"losses": [0.5] * 10},
        {"spec_hash": 3},
        {"version": 2},
    ],
    ids=[
        "int-roots",
        "too-short",
        "int-states",
        "path-states",
        "upper-hex-roots",
        "string-losses",
        "short-losses",
        "int-spec-hash",
        "version-2",
    ],  # fmt: skip
)
def test_manifest_is_checked_when_parsed(change):
    obj = good_manifest() | change
    with pytest.raises(BadBlob, match="manifest"):
        Manifest.from_bytes(json.dumps(obj).encode(), DIGITS.steps // DIGITS.checkpoint_every + 1)


def test_manifest_parse_accepts_a_well_formed_one_and_non_objects_are_bad_blobs():
    obj = good_manifest()
    m = Manifest.from_bytes(json.dumps(obj).encode(), 11)
    assert m.roots == obj["roots"] and m.losses == obj["losses"]
    assert Manifest.from_bytes(m.to_bytes(), 11) == m
    for raw in (b"[1, 2]", b"null", b"\xff", b'{"version": 1}', b"[" * 5000):
        with pytest.raises(BadBlob):
            Manifest.from_bytes(raw, 11)


def verifier_over(tmp_path: Path, url: str, manifest: bytes) -> tuple[Verifier, str]:
    """A verifier drawn for a unit whose (hostile) solver serves `manifest` at `url`."""
    data = datasets.load_dataset(DIGITS.dataset_name)
    solver_store = open_blob_store(str(tmp_path / "solver"))
    locator = make_locator(url, solver_store.put(manifest))
    manager = FakeContract(sampledSegments=lambda unit, v: [3])
    v = role(Verifier, tmp_path, open_blob_store(str(tmp_path / "mine")), manager, None,
             replay_all=False)  # fmt: skip
    rt = MlpRuntime(DIGITS, Engine(DIGITS, data), job_graph(DIGITS, data.n))
    v.jobs.put(1, JobContext(1, DIGITS, rt))
    v._no_contest, v._lock_warned = set(), SaidOnce()
    return v, locator


def replay_of(tmp_path: Path, obj: dict, caplog) -> str:
    """The verifier's replay of a unit committed to `obj`'s roots: returns its error log."""
    with serving(tmp_path / "solver") as server:
        v, locator = verifier_over(tmp_path, server.url, json.dumps(obj).encode())
        u = UnitView(1 << 32, 1, UnitStatus.VERIFYING, 10**12, 0, 0, "0x" + "00" * 20,
                     cp_root_of(obj), b"\x01" * 32, locator, 0)  # fmt: skip
        fallbacks: list[int] = []
        # the fallback (my own replay of the whole job from step 0) is tested elsewhere
        v._no_data = lambda unit, *rest: fallbacks.append(unit.unit_id)
        with caplog.at_level(logging.ERROR, logger=v.log.name):
            # raised TypeError / IndexError / AttributeError before the fix
            in_rounds(v, lambda: v.replay(u), lambda: bool(fallbacks))
    assert fallbacks == [u.unit_id]  # the data is unusable: my own replay, at once
    assert v.agent.store.get_record("verdict", f"{u.unit_id}:0") is None  # none from the data
    return caplog.text


def test_verifier_survives_a_manifest_with_non_string_roots(tmp_path, caplog):
    obj = {"version": 1, "spec_hash": "0x", "roots": [1, 2], "states": [1, 2], "losses": [0, 0]}
    assert "checkpoints unusable" in replay_of(tmp_path, obj, caplog)


def test_verifier_survives_a_manifest_shorter_than_the_job(tmp_path, caplog):
    """The chain checks numCheckpoints, not the list behind the root: 2 entries for a
    10-segment job, sampled segment 3."""
    obj = good_manifest(store=open_blob_store(str(tmp_path / "solver")))
    obj |= {k: obj[k][:2] for k in ("roots", "states", "losses")}
    assert "2 checkpoints, the job has 11" in replay_of(tmp_path, obj, caplog)


def test_verifier_survives_a_manifest_with_non_address_states(tmp_path, caplog):
    obj = good_manifest() | {"states": [7] * 11}
    assert "not a blob address" in replay_of(tmp_path, obj, caplog)


def test_checkpoint_reader_turns_every_read_error_into_bad_blob(tmp_path):
    store = open_blob_store(str(tmp_path / "solver"))
    obj = good_manifest(store=store)
    wrong_size = store.put(b"\x00" * 12)  # a blob, but not a state of this spec
    obj["states"][2] = wrong_size
    with serving(tmp_path / "solver") as server:
        locator = make_locator(server.url, store.put(json.dumps(obj).encode()))
        reader = CheckpointReader(DIGITS, locator, cp_root_of(obj))
        assert state_root(reader.state(0)) == bytes.fromhex(obj["roots"][0][2:])
        for index in (11, -1):
            with pytest.raises(BadBlob, match="the manifest has 11"):
                reader.state(index)
        with pytest.raises(BadBlob, match="checkpoint 2 blob"):
            reader.state(2)
        # a state blob is read only up to the spec's state size
        big = store.put(b"\x00" * (reader.state_bytes + 1))
        reader.manifest.states[3] = big
        with pytest.raises(BadBlob, match="more than the"):
            reader.state(3)
        # a manifest is read only up to the size T/k + 1 entries can have
        huge = store.put(b" " * (1 << 20))
        with pytest.raises(BadBlob, match="more than the"):
            CheckpointReader(DIGITS, make_locator(server.url, huge), b"\x05" * 32)


def test_aggregator_survives_a_hostile_unit_manifest(tmp_path):
    """Rounds.unit_states reads each finalized unit through CheckpointReader: a unit solver's
    manifest with int roots is a JobRejected ("not found yet") for the aggregator."""
    from agents.core.enums import JobStatus
    from agents.roles.aggregator import Aggregator
    from agents.roles.decomposed import Rounds

    data = datasets.load_dataset(V2.dataset_name)
    solver_store = open_blob_store(str(tmp_path / "solver"))
    bad = json.dumps({"version": 1, "spec_hash": "0x", "roots": [1, 2], "states": [1, 2],
                      "losses": [0, 0]}).encode()  # fmt: skip
    with serving(tmp_path / "solver") as server:
        locator = make_locator(server.url, solver_store.put(bad))
        job = [0] * 17
        job[4] = JobStatus.COMPLETED
        unit = [0] * 15
        unit[12], unit[13] = b"\x05" * 32, b"\x06" * 32
        manager = FakeContract(getJob=lambda j: tuple(job), getUnit=lambda u: tuple(unit))
        manager.events = FakeEvents(
            "CheckpointsCommitted", [{"blockNumber": 1, "args": {"blobLocator": locator}}]
        )
        # a version-2 job's record (IRoundManager.JobParams): no aggregation graph
        fields = (
            "specHash datasetRoot initialStateRoot layoutHash rounds localSteps "
            "checkpointInterval numExamples disputeConfigHash initialRoundRoot numStep"
        )
        params = SimpleNamespace(**dict.fromkeys(fields.split(), 0), shards=V2.shards,
                                 aggregationConfigHash=bytes(32))  # fmt: skip
        rm = FakeContract(unitJobOf=lambda dj, r, s: 10 + s,
                          getJob=lambda dj: SimpleNamespace(params=params))  # fmt: skip
        rounds = Rounds(rm, manager, None, [])
        rounds._specs.put(1, (V2, data))
        a = role(Aggregator, tmp_path, None, manager, None)
        a.rounds, a.rm, a.honest = rounds, rm, {}
        assert asyncio.run(a.honest_aggregate(1, 0)) is None  # TypeError escaped before the fix


# --- F9: a locator opens only an http(s) store, and never touches the reader's disk ---------


def test_locator_naming_a_local_folder_is_refused_and_creates_nothing(tmp_path):
    target = tmp_path / "victim" / "deep" / "dir"
    with pytest.raises(BadBlob, match="only http"):
        CheckpointReader(DIGITS, f"{target}#0x" + "00" * 32, b"\x01" * 32)
    assert not target.exists()
    # allowed (dev chains: --allow-local-locators), a folder is read but still not created
    with pytest.raises(BadBlob, match="not in"):
        CheckpointReader(DIGITS, f"{target}#0x" + "00" * 32, b"\x01" * 32, local_ok=True)
    assert not (tmp_path / "victim").exists()


@pytest.mark.parametrize(
    "base",
    [
        "/tmp/x",
        "file:///tmp/x",
        "s3://bucket",
        "s3://bucket?endpoint=http://127.0.0.1:9",
        "ftp://host/x",
        "http://",
        "gopher://host",
    ],
)
def test_locator_store_accepts_only_http_urls(base):
    with pytest.raises(BadBlob, match="only http"):
        locator_store(base)
    if base.startswith(("s3:", "ftp:", "http:", "gopher:")):
        with pytest.raises(BadBlob, match="only http"):
            locator_store(base, local_ok=True)  # the dev-chain option is about folders only


def test_locator_store_opens_http_and_https_stores_read_only():
    for base in ("http://127.0.0.1:8600", "https://bucket.s3.example.com/x"):
        store = locator_store(base)
        assert type(store.backend).__name__ == "HttpBackend"
        assert store.backend.base_url == base


def test_a_publisher_learns_when_readers_will_refuse_its_locators(tmp_path):
    """A solver (or aggregator) whose public blob URL is a folder or s3:// is told at start:
    its locators would be refused, and its verifiers fall back to their own replay."""
    assert locator_problem("http://my-host:8600") is None
    assert locator_problem("https://bucket.s3.example.com") is None
    assert "only http" in locator_problem(str(tmp_path / "blobs"))
    assert "only http" in locator_problem("s3://my-bucket")
    assert locator_problem(str(tmp_path / "blobs"), local_ok=True) is None  # dev chains
    assert not (tmp_path / "blobs").exists()


def test_rounds_keep_at_most_max_loaded_decomposed_jobs_and_reload_from_my_own_store(tmp_path):
    """A decomposed job's spec and dataset are held to --max-loaded-jobs like any job (PROPERTIES
    H12); the spec, first read from the submitter's store, is copied into mine (the first
    store), so a reload after its eviction does not need the submitter's."""
    from agents.roles.decomposed import Rounds

    mine, theirs = (open_blob_store(str(tmp_path / name)) for name in ("mine", "theirs"))
    address = theirs.put(V2.canonical_bytes())
    base = rounds_for(tmp_path, V2)
    rounds = Rounds(base.rm, None, None, [mine, theirs], max_loaded=1)
    first = asyncio.run(rounds.job_spec(1))[0]
    assert mine.has(address)
    asyncio.run(rounds.job_spec(2))
    assert rounds._specs.keys() == [2]
    rounds.stores = [mine]  # the submitter's store is gone
    assert asyncio.run(rounds.job_spec(1))[0] == first
    assert rounds._specs.keys() == [1]
