"""Soundness of the dispute game on real graphs (PROTOCOL §7, §7.11): on the CNN, char-GPT,
LLaMA-style and ResNet examples (the last two in their smallest form, every layer type kept:
RMSNorm, SwiGLU, RoPE, GQA, tied embeddings; BatchNorm, strided residual blocks, dropout's random
stream), a cheater that flips one element of a node's output (every operator type drawn in
turn, a random element, a random step) loses to the honest challenger on Anvil, which bisects
to that node and element and proves it (directly, or through its accumulator chain); and an
honest defender beats a challenger that disputes a true claim, with true or forged openings.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from dispute_fixtures import (
    MODEL_JOBS,
    JobHandle,
    ape_artifacts,
    build_model_job,
    examples,
    open_game,
    rpc_advance,
)

from agents.adversaries.faults import Fault, FaultyModelComputation
from agents.adversaries.liars import LyingChallenger, ProducerLiar, model_element_cheats
from agents.core.chain import AnvilConfig, connect, local_anvil
from agents.core.enums import Phase, Side
from agents.dispute.client import run_game
from agents.dispute.harness import deploy_game
from agents.dispute.model_graph import model_job_graph
from agents.dispute.model_trace import ModelComputation
from agents.dispute.player import Challenger, Defender

STEPS, EVERY = 2, 1
MOVE_GAS = 500_000  # the bound issue #25 sets on every move of a game


@pytest.fixture(scope="module")
def v3dep(project):
    """The game on an Anvil of its own: ape's Anvil records every EVM step of a transaction
    (--steps-tracing), and the GPT's postTrace of 1,204 roots would record gigabytes."""
    with local_anvil(AnvilConfig()) as url:
        w3 = connect(url)
        yield deploy_game(w3, ape_artifacts(project))


@pytest.fixture
def fresh(v3dep):
    sid = v3dep.w3.provider.make_request("evm_snapshot", [])["result"]
    yield v3dep
    v3dep.w3.provider.make_request("evm_revert", [sid])


@pytest.fixture(scope="module", params=sorted(MODEL_JOBS))
def model(request, tmp_path_factory):
    job, st = build_model_job(tmp_path_factory.mktemp(request.param), request.param, STEPS, EVERY)
    jg = model_job_graph(job)
    honest = ModelComputation(job, jg, st, STEPS, EVERY)
    honest.checkpoint_roots()
    return request.param, job, jg, st, honest


def test_a_cheat_at_any_operator_loses_to_the_honest_challenger(fresh, model):
    dep = fresh
    name, job, jg, st, honest = model
    handle = JobHandle(job, jg)
    won = set()
    cheats = model_element_cheats(job, jg, st, honest, STEPS, EVERY, examples(50), len(name))
    assert len(cheats) == examples(50), (name, len(cheats))
    for op, fault, cheat in cheats:
        gid = open_game(dep, handle, cheat, honest)
        rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                       (Challenger(honest, jg), dep.challenger), rpc_advance(dep))  # fmt: skip
        assert rec.winner == Side.CHALLENGER and not rec.by_timeout, (name, op, fault, rec)
        # both traces (314 and 1,204 nodes) are walked, and no move costs more than 500k gas
        assert Phase.PICK_TRACE_SUBTREE in rec.phases and "postTrace" not in dict(rec.moves)
        assert max(gas for _, gas in rec.moves) <= MOVE_GAS, (name, op, rec.moves)
        won.add(op)
    # every operator type whose lie can change the claimed state is among those caught
    assert won == {op for op, _, _ in cheats}
    print(f"{name}: {len(cheats)} cheats caught over {len(won)} operator types: {sorted(won)}")


def test_a_producer_root_not_in_the_trace_loses(fresh, model):
    """A defender posting an honest trace with a claimed S_{t+1} that does not follow from it
    (one state tensor's producer output flipped) loses to proveProducer after the walk."""
    dep = fresh
    name, job, jg, st, honest = model
    state = len(jg.config.state_names) - 1
    node = jg.config.state_producers[state]
    cheat = FaultyModelComputation(
        job, jg, st, STEPS, EVERY, fault=Fault("element", 1, node, 0, 1 << 22)
    )
    assert cheat.final_root() != honest.final_root()
    gid = open_game(dep, JobHandle(job, jg), cheat, honest)
    rec = run_game(gid, (ProducerLiar(cheat, jg, traced=honest), dep.defender),
                   (Challenger(honest, jg), dep.challenger), rpc_advance(dep))  # fmt: skip
    assert rec.winner == Side.CHALLENGER and not rec.by_timeout, (name, rec)
    assert rec.moves[-1][0] == "proveProducer", rec.moves
    if len(jg.config.state_names) > 64:  # S_{t+1}'s list is walked, not posted whole
        assert {"pickStateSubtree", "postStateSubtree"} <= {m for m, _ in rec.moves}, rec.moves
    assert max(gas for _, gas in rec.moves) <= MOVE_GAS, (name, rec.moves)


@pytest.mark.parametrize("forge", [False, True])
def test_an_honest_defender_beats_a_lying_challenger(fresh, model, forge):
    dep = fresh
    name, job, jg, st, honest = model
    handle = JobHandle(job, jg)
    for seed in range(examples(2)):
        gid = open_game(dep, handle, honest, honest)
        liar = LyingChallenger(honest, jg, seed=seed, forge=forge)
        rec = run_game(gid, (Defender(honest, jg), dep.defender), (liar, dep.challenger),
                       rpc_advance(dep))  # fmt: skip
        assert rec.winner == Side.DEFENDER, (name, seed, rec)


def test_an_honest_defender_wins_at_every_operator(fresh, model):
    """A challenger disputing a true claim at a node of each operator type in turn (a random
    element; a long reduction through its chain) loses: every reference agrees with the engine
    on the element it is made to prove."""
    dep = fresh
    name, job, jg, st, honest = model
    rng = random.Random(11)
    first = {}
    for i, n in enumerate(jg.graph.nodes):
        first.setdefault(n.op, []).append(i)
    for op, nodes in sorted(first.items()):
        i = rng.choice(nodes)
        liar = LyingChallenger(honest, jg, seed=i, node=i,
                               element=rng.randrange(jg.nodes[i].numel))  # fmt: skip
        gid = open_game(dep, JobHandle(job, jg), honest, honest)
        rec = run_game(gid, (Defender(honest, jg), dep.defender), (liar, dep.challenger),
                       rpc_advance(dep))  # fmt: skip
        assert rec.winner == Side.DEFENDER, (name, op, i, rec)


def test_every_move_over_a_12_layer_gpt_stays_under_the_bound(fresh, tmp_path):
    """Depth does not grow a move (PROTOCOL §7.3): a 12-layer GPT (449 state tensors; d = 32
    keeps the test quick, the moves that grew with depth carry roots, not widths) with a cheat
    in layer 6 at step 2 of 4 loses, every move <= 500k gas. bench/graph_prover.json plays
    the same game at d = 256."""
    from agents.__main__ import main
    from agents.cli.job import load_job

    models = Path(__file__).resolve().parents[2] / "examples" / "models"
    model = tmp_path / "deep.py"
    gpt_file = str(models / "char_gpt.py")
    model.write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('char_gpt', {gpt_file!r})\n"
        "gpt = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(gpt)\n\n\n"
        "def make():\n"
        "    return gpt.GPT(d=32, heads=2, layers=12, block_size=8)\n"
    )  # fmt: skip
    spec = tmp_path / "deep.json"
    argv = ["job", "build", "--model", f"{model}:make", "--dataset", "shakespeare-char/train",
            "--optimizer", "adamw", "--lr", "0.003", "--batch", "2", "--steps", "4",
            "--checkpoint-every", "2", "--seed", "5", "--out", str(spec)]  # fmt: skip
    assert main(argv) == 0
    job, st = load_job(str(spec), None)
    jg = model_job_graph(job)
    assert len(jg.config.state_names) == 449
    honest = ModelComputation(job, jg, st, 4, 2)
    qkv = [i for i, n in enumerate(jg.graph.nodes) if n.op == "matmul"][6 * 6]  # layer 6's
    # an element of v at position 3 (read by every later position; a query at position 0
    # attends only to itself, so a lie there may change nothing)
    cheat = FaultyModelComputation(
        job, jg, st, 4, 2, fault=Fault("element", 2, qkv, 3 * 96 + 64 + 7, 1 << 30)
    )
    assert cheat.final_root() != honest.final_root()
    gid = open_game(dep := fresh, JobHandle(job, jg), cheat, honest)
    rec = run_game(gid, (Defender(cheat, jg), dep.defender),
                   (Challenger(honest, jg), dep.challenger), rpc_advance(dep))  # fmt: skip
    assert rec.winner == Side.CHALLENGER and not rec.by_timeout, rec
    assert max(gas for _, gas in rec.moves) <= MOVE_GAS, rec.moves
