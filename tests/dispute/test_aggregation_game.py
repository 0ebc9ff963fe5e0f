"""Soundness of the aggregation game (PROTOCOL §6.9, §7.2, §7.10): on the char GPT decomposed
into 3 rounds x 4 shards with the Nesterov outer optimizer, an aggregator that commits an
H_{r+1} with one element wrong (a random round, a random node of the aggregation graph and a
random element of it; or one element of the outer-updated state itself) loses to the honest
challenger on Anvil, which bisects to that node and element and proves it (a unit stack's
reduction through its accumulator chain over the S units, one unit opened per move); and an
honest aggregator beats a challenger that disputes its true aggregate, at random positions or
aimed at a drawn node (half the time one of the outer step's) and element, with true or forged
openings. Every move stays under 500k gas. Hypothesis draws the cases: 50 + 12 in CI, x10
under `make fuzz` (HYPOTHESIS_PROFILE=fuzz)."""

from __future__ import annotations

import pytest
from dispute_fixtures import ape_artifacts, examples, rpc_advance
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from agents.adversaries.faults import Fault, FaultyAggregation
from agents.adversaries.liars import LyingChallenger
from agents.core.chain import AnvilConfig, connect, local_anvil
from agents.core.enums import Side
from agents.dispute.aggregation import AggregationComputation, aggregation_job_graph
from agents.dispute.client import run_game
from agents.dispute.harness import deploy_game, register_job
from agents.dispute.player import Challenger, Defender
from agents.model.job import UnitRun

MOVE_GAS = 500_000
ROUNDS, SHARDS = 3, 4


@pytest.fixture(scope="module")
def dep(project):
    with local_anvil(AnvilConfig()) as url:
        yield deploy_game(connect(url), ape_artifacts(project))


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    """Each round's honest account: H_r and the four unit final states of the char GPT job."""
    from pathlib import Path

    from agents.__main__ import main
    from agents.cli.job import load_job

    tmp = tmp_path_factory.mktemp("agg")
    models = Path(__file__).resolve().parents[2] / "examples" / "models"
    out = tmp / "gpt.json"
    argv = [
        "job",
        "build",
        "--model",
        f"{models}/char_gpt.py:make_model",
        "--dataset",
        "shakespeare-char/train",
        "--optimizer",
        "adamw",
        "--lr",
        "0.003",
        "--batch",
        "2",
        "--steps",
        str(ROUNDS),
        "--checkpoint-every",
        "1",
        "--seed",
        "5",
        "--rounds",
        str(ROUNDS),
        "--shards",
        str(SHARDS),
        "--outer",
        "nesterov",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    job, st = load_job(str(out), None)
    agg = job.aggregation
    jg = aggregation_job_graph(agg)
    accounts, h, units = [], agg.initial(st), []
    for ev in job.run_rounds(st):
        if isinstance(ev, UnitRun):
            units.append(ev.final)
            continue
        accounts.append(AggregationComputation(agg, jg, h, units))
        h, units = ev.state, []
        assert accounts[-1].final_root() == ev.state_root
    return jg, accounts


def _open(dep, jg, claim: AggregationComputation, honest: AggregationComputation) -> int:
    """Opens the game the round manager would: from H_r with U_r, one step, to the claim."""
    job_id = register_job(dep, _Handle(jg))
    roots = [honest.claimed_root(0), claim.final_root()]
    dep.deployer.transact(
        "openSegment",
        job_id << 32,
        dep.defender.address,
        dep.challenger.address,
        honest.units_root(),
        0,
        1,
        roots,
    )
    return dep.game.functions.gameCount().call()


class _Handle:
    def __init__(self, jg):
        self.jg = jg


SETTINGS = dict(suppress_health_check=list(HealthCheck), deadline=None)


def _outer_step(jg) -> list[int]:
    """The Nesterov outer step's nodes (PROTOCOL §5.2): every sub/add/mul of the graph (the
    averaging is matmul + reshape)."""
    return [i for i, n in enumerate(jg.graph.nodes) if n.op in ("sub", "add", "mul")]


def _snapshot(dep):
    return dep.w3.provider.make_request("evm_snapshot", [])["result"]


def _revert(dep, sid) -> None:
    dep.w3.provider.make_request("evm_revert", [sid])


@pytest.mark.fuzz
def test_a_cheating_aggregator_always_loses(dep, rounds):
    """One element of one node wrong, at a drawn round, node (any computing node, or a producer
    of H_{r+1}: one element of the outer-updated state, its momentum buffers included),
    element and high bit; a flip that leaves H_{r+1} unchanged is no lie and is not played."""

    def cheat_loses(r, pick, element, bit, outputs):  # a failing case prints only the draws
        _cheat_loses(dep, rounds, r, pick, element, bit, outputs)

    settings(max_examples=examples(50), **SETTINGS)(
        example(r=0, pick=0, element=0, bit=30, outputs=False)(  # the S units' reduction
            given(
                r=st.integers(0, ROUNDS - 1),
                pick=st.integers(0, 2**32),
                element=st.integers(0, 2**32),
                bit=st.integers(16, 30),
                outputs=st.booleans(),
            )(cheat_loses)
        )
    )()


def _cheat_loses(dep, rounds, r, pick, element, bit, outputs):
    jg, accounts = rounds
    honest = accounts[r]
    nodes = (sorted(set(jg.config.state_producers)) if outputs else
             [i for i, n in enumerate(jg.graph.nodes) if n.op != "const"])  # fmt: skip
    node = nodes[pick % len(nodes)]
    fault = Fault("element", 0, node, element % jg.nodes[node].numel, 1 << bit)
    cheat = FaultyAggregation(honest.agg, jg, honest.h, honest.units, honest.cfg, fault=fault)
    if cheat.final_root() == honest.final_root():
        event("flip masked: the claim is true")
        return
    op = jg.graph.nodes[node].op
    event(f"op {op}" + (" (H_{r+1})" if outputs else ""))
    sid = _snapshot(dep)
    try:
        gid = _open(dep, jg, cheat, honest)
        rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                       (Challenger(honest, jg), dep.challenger), rpc_advance(dep))  # fmt: skip
    finally:
        _revert(dep, sid)
    assert rec.winner == Side.CHALLENGER and not rec.by_timeout, (fault, rec)
    assert max(gas for _, gas in rec.moves) <= MOVE_GAS, (fault, rec.moves)
    if op == "matmul":  # a unit stack's reduction is disputed through its chain over the S units
        assert rec.moves[-1][0] == "proveAccumulation", (fault, rec.moves)


@pytest.mark.fuzz
def test_an_honest_aggregator_beats_a_lying_challenger(dep, rounds):
    """A challenger disputes the true aggregate of a drawn round at a drawn node and element
    (half the time a node of the outer step), proving it with true openings (the chain's
    recomputation decides: the aggregate is right) or forged ones (rejected: it loses on time);
    or, `aimed` false, lying at random positions at every level."""

    def honest_wins(r, outer, pick, element, forge, aimed, seed):
        _honest_wins(dep, rounds, r, outer, pick, element, forge, aimed, seed)

    settings(max_examples=examples(12), **SETTINGS)(
        given(
            r=st.integers(0, ROUNDS - 1),
            outer=st.booleans(),
            pick=st.integers(0, 2**32),
            element=st.integers(0, 2**32),
            forge=st.booleans(),
            aimed=st.booleans(),
            seed=st.integers(0, 2**32),
        )(honest_wins)
    )()


def _honest_wins(dep, rounds, r, outer, pick, element, forge, aimed, seed):
    jg, accounts = rounds
    honest = accounts[r]
    nodes = (_outer_step(jg) if outer else
             [i for i, n in enumerate(jg.graph.nodes) if n.op != "const"])  # fmt: skip
    node = nodes[pick % len(nodes)] if aimed else None
    at = element % jg.nodes[node].numel if aimed else None
    event(f"{'op ' + jg.graph.nodes[node].op if aimed else 'random lies'} forge={forge}")
    liar = LyingChallenger(honest, jg, seed=seed, forge=forge, node=node, element=at)
    sid = _snapshot(dep)
    try:
        gid = _open(dep, jg, honest, honest)
        rec = run_game(gid, (Defender(honest, jg), dep.defender), (liar, dep.challenger),
                       rpc_advance(dep))  # fmt: skip
    finally:
        _revert(dep, sid)
    assert rec.winner == Side.DEFENDER, (r, node, at, forge, rec)
    assert max(gas for _, gas in rec.moves) <= MOVE_GAS, rec.moves
