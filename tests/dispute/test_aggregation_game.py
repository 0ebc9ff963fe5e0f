"""Soundness of the aggregation game (PROTOCOL §6.9, §7.2, §7.10): on the char GPT decomposed
into 3 rounds x 4 shards with the Nesterov outer optimizer, an aggregator that commits an
H_{r+1} with one element wrong (a random round, a random node of the aggregation graph and a
random element of it; or one element of the outer-updated state itself) loses to the honest
challenger on Anvil, which bisects to that node and element and proves it (a unit stack's
reduction through its accumulator chain over the S units, one unit opened per move); and an
honest aggregator beats a challenger that disputes its true aggregate, with true or forged
openings. Every move stays under 500k gas."""

from __future__ import annotations

import pytest
from dispute_fixtures import ape_artifacts, examples

from agents.adversaries.faults import aggregation_cheats
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


@pytest.fixture
def fresh(dep):
    sid = dep.w3.provider.make_request("evm_snapshot", [])["result"]
    yield dep
    dep.w3.provider.make_request("evm_revert", [sid])


def _advance(dep):
    def go(seconds: int) -> None:
        dep.w3.provider.make_request("evm_increaseTime", [int(seconds)])
        dep.w3.provider.make_request("evm_mine", [])

    return go


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


@pytest.mark.fuzz
@pytest.mark.parametrize("outputs_only", [False, True])
def test_a_cheating_aggregator_always_loses(fresh, rounds, outputs_only):
    dep = fresh
    jg, accounts = rounds
    n = examples(25)
    caught = []
    for k in range(n):
        honest = accounts[k % ROUNDS]
        ((node, fault, cheat),) = aggregation_cheats(
            honest, 1, seed=1000 * outputs_only + k, outputs_only=outputs_only
        )
        gid = _open(dep, jg, cheat, honest)
        rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                       (Challenger(honest, jg), dep.challenger), _advance(dep))  # fmt: skip
        assert rec.winner == Side.CHALLENGER and not rec.by_timeout, (fault, rec)
        assert max(gas for _, gas in rec.moves) <= MOVE_GAS, (fault, rec.moves)
        caught.append((jg.graph.nodes[node].op, rec.moves[-1][0]))
    # a unit stack's reduction is disputed through its chain over the S units
    assert ("matmul", "proveAccumulation") in caught or outputs_only, caught
    print(f"{len(caught)} cheating aggregates caught: {sorted(set(caught))}")


@pytest.mark.fuzz
@pytest.mark.parametrize("forge", [False, True])
def test_an_honest_aggregator_beats_a_lying_challenger(fresh, rounds, forge):
    dep = fresh
    jg, accounts = rounds
    for seed in range(examples(3)):
        honest = accounts[seed % ROUNDS]
        gid = _open(dep, jg, honest, honest)
        liar = LyingChallenger(honest, jg, seed=seed, forge=forge)
        rec = run_game(gid, (Defender(honest, jg), dep.defender), (liar, dep.challenger),
                       _advance(dep))  # fmt: skip
        assert rec.winner == Side.DEFENDER, (seed, rec)
