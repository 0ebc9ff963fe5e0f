"""A role's view of a decomposed version-3 job's units (PROTOCOL §5.2, §6.9): a RoundManager's
unit job (r, s) loads as k_local steps of the job's step graph from G_r (H_r's step state) on
shard s's batches, so a solver's training of it is `train --spec`'s unit bit for bit; H_r (r > 0)
is recomputed from round r-1's published unit states with the aggregation graph and checked
against the chain's root; every commitment of the RoundManager's record is checked first.

No chain: the RoundManager, JobManager and game are small fakes answering the honest values of
a real job (the digits MLP, 2 rounds x 2 shards, outer Nesterov), built by `job build`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from rolefakes import FakeContract, RecordingExecutor, answering
from test_verifier_resilience import bare, new_store

from agents.__main__ import main
from agents.cli.job import load_job
from agents.core.blobs import open_blob_store
from agents.core.bounded import BoundedCache
from agents.core.enums import JobStatus
from agents.core.spec_files import blob_url
from agents.dispute.aggregation import aggregation_job_graph
from agents.dispute.model_graph import model_job_graph
from agents.model.job import RoundRun, UnitRun, encode_state, state_root, view2d
from agents.roles.aggregation import data_roots, layout_of
from agents.roles.aggregator import Aggregator
from agents.roles.artifacts import Manifest, make_locator, parse_locator
from agents.roles.decomposed import Rounds
from agents.roles.errors import JobRejected
from agents.roles.runtime import ModelRuntime, RoundChain, model_runtime_from_files

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
DJ = 7  # the decomposed job's id
UNIT_HASH = b"\x05" * 32  # what the fake RoundManager's unitSpecHash answers


def unit_job_id(r: int, s: int) -> int:
    return 100 + 10 * r + s


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """The spec's folder, the job, S_0 and `train --spec`'s units and rounds."""
    tmp = tmp_path_factory.mktemp("v3units")
    out = tmp / "job.json"
    argv = ["job", "build", "--model", f"{MODELS}/digits_mlp.py:make_model", "--dataset",
            "sklearn-digits/train", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9",
            "--batch", "8", "--checkpoint-every", "1", "--seed", "3", "--steps", "4",
            "--rounds", "2", "--shards", "2", "--outer", "nesterov", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    job, s0 = load_job(str(out), None)
    open_blob_store(blob_url(out)).put(job.spec.canonical_bytes())  # published as posted
    events = list(job.run_rounds(s0))
    units = {(e.round, e.shard): e for e in events if isinstance(e, UnitRun)}
    rounds = [e for e in events if isinstance(e, RoundRun)]
    # `python -m agents train --spec`: the job in one process, its result G_R's root
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["train", "--spec", str(out), "--json"]) == 0
    summary = json.loads(printed.getvalue().splitlines()[-1])
    final_root = bytes.fromhex(summary["final_root"][2:])
    return SimpleNamespace(tmp=tmp, spec_path=out, job=job, s0=s0, units=units, rounds=rounds,
                           final_root=final_root)  # fmt: skip


def publish(honest, store_dir: Path) -> dict[tuple[int, int], str]:
    """Each unit's checkpoints as its solver publishes them (states, manifest, locator), by
    re-running it: the unit's states at every checkpoint, from `train --spec`'s G_r."""
    job, store = honest.job, open_blob_store(str(store_dir))
    agg = job.aggregation
    h, out = agg.initial(honest.s0), {}
    for r in range(job.spec.rounds):
        for s in range(job.spec.shards):
            unit = job.unit(r, s)
            states = [st for _, _, st, _ in unit.train(agg.unit_start(h))]
            roots = ["0x" + state_root(st).hex() for st in states]
            assert roots == ["0x" + x.hex() for x in honest.units[r, s].roots]
            addresses = [store.put(encode_state(st)) for st in states]
            m = Manifest("0x" + job.spec.spec_hash().hex(), roots, addresses, [0.0] * len(roots))
            out[r, s] = make_locator(str(store_dir), store.put(m.to_bytes()))
        h = honest.rounds[r].state
    return out


def params(honest, **overrides) -> SimpleNamespace:
    """IRoundManager.JobParams of the honest job, as a submitter posts it."""
    job = honest.job
    agg = job.aggregation
    h0 = agg.initial(honest.s0)
    p = dict(
        specHash=job.spec.spec_hash(),
        datasetRoot=job.data.root(),
        initialStateRoot=state_root(honest.s0),
        layoutHash=layout_of({k: view2d(v) for k, v in h0.items()}).hash(),
        rounds=job.spec.rounds,
        shards=job.spec.shards,
        localSteps=job.spec.k_local,
        checkpointInterval=job.spec.checkpoint_every,
        numExamples=job.positions(),
        disputeConfigHash=model_job_graph(job).config.hash(),
        aggregationConfigHash=aggregation_job_graph(agg).config.hash(),
        initialRoundRoot=state_root(h0),
        numStep=len(agg.step_names),
    )
    p.update(overrides)
    return SimpleNamespace(**p)


def rounds_view(honest, p, locators, placement=None, finished: int = 1) -> Rounds:
    """A role's Rounds over fakes answering `p` and the honest chain: rounds 0..`finished`-1
    aggregated (H_r's root as globalRoot), their units finalized with `locators`."""
    job = honest.job
    h_roots = [state_root(job.aggregation.initial(honest.s0))]
    h_roots += [r.state_root for r in honest.rounds]
    g_roots = [state_root(honest.s0)]
    g_roots += [state_root(job.aggregation.unit_start(r.state)) for r in honest.rounds]
    where = {unit_job_id(r, s): (DJ, r, s) for r in range(job.spec.rounds)
             for s in range(job.spec.shards)}  # fmt: skip

    def unit_job(jid):
        _, r, s = where[jid]
        return SimpleNamespace(
            status=JobStatus.COMPLETED if r < finished else JobStatus.OPEN,
            specHash=UNIT_HASH, steps=job.spec.k_local,
            checkpointInterval=job.spec.checkpoint_every, initialStateRoot=g_roots[r],
        )  # fmt: skip

    def unit(uid):
        _, r, s = where[uid >> 32]
        return SimpleNamespace(checkpointRoot=honest.units[r, s].checkpoint_root,
                               finalStateRoot=honest.units[r, s].roots[-1])  # fmt: skip

    def global_root(dj, r):
        return h_roots[r] if r <= finished else bytes(32)

    rm = FakeContract(
        getJob=lambda dj: SimpleNamespace(params=p),
        unitOf=lambda jid: where[jid],
        unitJobOf=lambda dj, r, s: unit_job_id(r, s),
        unitSpecHash=lambda h, r, s: UNIT_HASH,
        globalRoot=global_root,
        config=lambda: SimpleNamespace(aggregatorBond=10**18),
        commitAggregate=lambda *args: ("commitAggregate", *args),
        challengeAggregate=lambda dj: ("challengeAggregate", dj),
        finalizeRound=lambda dj: ("finalizeRound", dj),
        revealRequestOf=lambda dj, r: SimpleNamespace(requester="0x" + "00" * 20),
    )
    manager = FakeContract(getJob=unit_job, getUnit=unit)

    def placement_of(jid):
        _, r, s = where[jid]
        return placement or (r * job.spec.k_local, job.spec.shards, s)

    game = FakeContract(configOf=lambda jid: p.disputeConfigHash, placementOf=placement_of)
    store = open_blob_store(blob_url(honest.spec_path))
    rounds = Rounds(rm, manager, game, [store], local_locators=True)
    rounds.locator = answering(lambda uid: locators[where[uid >> 32][1:]])
    return rounds


def load(rounds: Rounds, r: int, s: int):
    """Unit job (r, s) as a role loads it: its JobManager record, then Rounds.load_unit."""
    jid = unit_job_id(r, s)

    async def go():
        return await rounds.load_unit(jid, await rounds.manager.functions.getJob(jid).call())

    return asyncio.run(go())


def trained_roots(rt: ModelRuntime) -> list[bytes]:
    """A solver's training of a unit: its runtime's steps from its start, a root every k."""
    st, roots = rt.initial_state(), [rt.state_root(rt.initial_state())]
    for t in range(rt.steps):
        st = rt.step(st, t)
        if (t + 1) % rt.checkpoint_every == 0:
            roots.append(rt.state_root(st))
    return roots


@pytest.fixture(scope="module")
def locators(honest):
    return publish(honest, honest.tmp / "published")


@pytest.mark.parametrize("r,s", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_a_unit_loads_as_train_specs_unit_from_g_r(honest, locators, r, s):
    ctx = load(rounds_view(honest, params(honest), locators), r, s)
    rt = ctx.runtime
    assert (ctx.spec.steps, rt.steps) == (honest.job.spec.k_local,) * 2
    assert trained_roots(rt) == honest.units[r, s].roots
    # the unit's dispute account (its solver's claim, a verifier's replay) claims the same
    claim = rt.computation(rt.steps, rt.checkpoint_every, start=rt.initial_state())
    assert claim.checkpoint_roots() == honest.units[r, s].roots


def test_h_r_is_recomputed_from_the_units_and_checked(honest, locators):
    rounds = rounds_view(honest, params(honest), locators)
    h1 = asyncio.run(rounds.round_state(DJ, 1))
    assert state_root(h1) == honest.rounds[0].state_root
    # a unit blob that is not the committed one: round 1 cannot start from it
    wrong = dict(locators)
    wrong[0, 1] = locators[0, 0]
    with pytest.raises(JobRejected, match=r"unit \(0, 1\)"):
        load(rounds_view(honest, params(honest), wrong), 1, 0)
    # round 0 not aggregated yet: G_1 is not found, nothing trains
    with pytest.raises(JobRejected, match="not found"):
        load(rounds_view(honest, params(honest), locators, finished=0), 1, 0)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("aggregationConfigHash", b"\x01" * 32, "aggregation config"),
        ("initialRoundRoot", b"\x02" * 32, "H_0"),
        ("numStep", 1, "numStep"),
        ("layoutHash", b"\x03" * 32, "layout"),
        ("disputeConfigHash", b"\x04" * 32, "dispute config"),
        ("localSteps", 1, "k_local"),
        ("numExamples", 5, "numExamples"),
    ],
)
def test_a_record_that_is_not_the_specs_is_refused(honest, locators, field, value, message):
    p = params(honest, **{field: value})
    with pytest.raises(JobRejected, match=message):
        load(rounds_view(honest, p, locators), 0, 0)


def test_a_unit_registered_at_another_placement_is_refused(honest, locators):
    with pytest.raises(JobRejected, match="placement"):
        load(rounds_view(honest, params(honest), locators, placement=(0, 2, 0)), 0, 1)


def test_the_submitters_record_is_the_one_the_roles_accept(honest):
    """What a submitter posts (RoundChain.posted of its spec files' runtime) is the record the
    units above were loaded under, field by field."""
    store = open_blob_store(blob_url(honest.spec_path))
    rt = model_runtime_from_files(honest.job.spec, [store])
    assert RoundChain.posted(rt) == RoundChain.of(params(honest))
    assert rt.state_root(rt.initial_state()) == state_root(honest.s0)


def an_aggregator(tmp_path, honest, locators, finished: int) -> Aggregator:
    """An aggregator over the fakes (rounds 0..`finished`-1 trained), whose every transaction
    is recorded (and mined)."""
    a = bare(Aggregator, tmp_path, new_store(tmp_path, "aggregator"))
    a.rounds = rounds_view(honest, params(honest), locators, finished=finished)
    a.rm = a.rounds.rm
    a.token = FakeContract(allowance=lambda owner, spender: 10**30)
    a.public_blob_url = str(tmp_path / "aggregator-blobs")
    a.honest = BoundedCache(4)
    a.accounts = BoundedCache(4)
    a.executor = RecordingExecutor(a, result=True)
    return a


@pytest.mark.parametrize("r", [0, 1])
def test_the_aggregator_commits_h_r_plus_1_as_train_spec_computes_it(tmp_path, honest, locators, r):
    a = an_aggregator(tmp_path, honest, locators, finished=r + 1)
    asyncio.run(a.aggregate(DJ, r, 0))
    ((act, call),) = a.executor.sent
    want = honest.rounds[r].state
    committed = {k: view2d(v) for k, v in want.items()}
    assert call[:2] == ("commitAggregate", DJ)
    assert layout_of(committed).hash() == params(honest).layoutHash
    assert list(act.data_roots) == data_roots(committed)
    # the published blob is H_{r+1}, its root the round's (and G_R's the job's result at the end)
    base, address = parse_locator(act.locator)
    rt = asyncio.run(a.rounds.model_job(DJ))
    h = rt.decode_round_state(open_blob_store(base).get(address))
    assert state_root(h) == honest.rounds[r].state_root
    if r + 1 == honest.job.spec.rounds:
        assert state_root(rt.aggregation.unit_start(h)) == honest.final_root


def test_the_aggregator_challenges_a_wrong_h_in_its_window_and_finalizes_the_right_one(
    tmp_path, honest, locators
):
    """A committed H_1 that is not its own recomputed one is challenged in the round manager's
    game while the window runs (logic.aggregate_acts), and neither challenged nor finalized
    after it; the right H_1 (another aggregator's) is finalized after the window."""
    from agents.core.enums import RoundStatus
    from agents.roles.actions import ChallengeAggregate
    from agents.roles.logic import Now

    a = an_aggregator(tmp_path, honest, locators, finished=1)

    def follow(root: bytes, at: int) -> list:
        rnd = _Round((RoundStatus.COMMITTED, 0, 100, "0x" + "77" * 20, root))
        a.executor.sent.clear()
        asyncio.run(a.follow_round_state(DJ, 0, rnd, Now(1, at)))
        return [call for _, call in a.executor.sent]

    assert follow(b"\x09" * 32, 100) == [("challengeAggregate", DJ)]
    assert isinstance(a.executor.sent[0][0], ChallengeAggregate)
    assert follow(b"\x09" * 32, 101) == []  # the window closed: not challenged, not finalized
    assert follow(honest.rounds[0].state_root, 101) == [("finalizeRound", DJ)]


class _Round(tuple):
    """IRoundManager.Round's first fields as web3 decodes them (by index), no open game."""

    challenger = "0x" + "00" * 20
