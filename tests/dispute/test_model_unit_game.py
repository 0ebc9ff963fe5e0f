"""Dispute games over one unit of a decomposed version-3 job (PROTOCOL §6.9, §7.2, §7.11): unit
(1, 1) of the digits CNN decomposed into 2 rounds x 2 shards of 2 local steps (outer Nesterov), a
claim from G_1 counted from the unit's local step 0, as its solver and verifiers make it (the
unit's `ModelJob.unit` view). The placement registered with its config (t0 = 2, shard 1 of 2)
gives the one-step proof the global step and the shard's batch rows. The first node reading the
batch's x is where a wrong placement would show: an honest defender wins there by the one-step
proof (the proof opens shard 1's rows at global step 3); registered without its placement the
same unit is judged on another batch, so the proof built from the unit's own batch is refused;
a cheat in the unit loses to the honest challenger."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from dispute_fixtures import JobHandle, ape_artifacts, open_game, rpc_advance
from web3 import Web3

from agents.__main__ import main
from agents.adversaries.faults import Fault, FaultyModelComputation
from agents.adversaries.liars import LyingChallenger
from agents.cli.job import load_job
from agents.core.chain import AnvilConfig, connect, local_anvil
from agents.core.enums import Side
from agents.dispute.client import run_game
from agents.dispute.harness import deploy_game
from agents.dispute.model_graph import model_job_graph
from agents.dispute.model_trace import ModelComputation
from agents.dispute.player import Challenger, Defender
from agents.model.job import UnitRun
from agents.training import decompose
from agents.training.run import run_graph

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
ROUND, SHARD, K_LOCAL = 1, 1, 2
PLACEMENT = (ROUND * K_LOCAL, 2, SHARD)
STEP = 1  # the disputed local step (global step 3)


@pytest.fixture(scope="module")
def dep(project):
    with local_anvil(AnvilConfig()) as url:
        yield deploy_game(connect(url), ape_artifacts(project))


@pytest.fixture
def fresh(dep):
    sid = dep.w3.provider.make_request("evm_snapshot", [])["result"]
    yield dep
    dep.w3.provider.make_request("evm_revert", [sid])


@pytest.fixture(scope="module")
def unit(tmp_path_factory):
    """The unit's job view, dispute graph, honest claim (`train --spec`'s unit, checked) and the
    element of the first x-reading node at STEP that differs under the unplaced schedule."""
    out = tmp_path_factory.mktemp("v3unit") / "cnn.json"
    argv = ["job", "build", "--model", f"{MODELS}/digits_cnn.py:make_model", "--dataset",
            "sklearn-digits/train", "--optimizer", "adamw", "--lr", "0.003", "--batch", "2",
            "--steps", "4", "--checkpoint-every", "1", "--seed", "5", "--rounds", "2",
            "--shards", "2", "--outer", "nesterov", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    job, s0 = load_job(str(out), None)
    events = list(job.run_rounds(s0))
    want = next(e for e in events if isinstance(e, UnitRun) and (e.round, e.shard) == (1, 1))
    h1 = next(e for e in events if not isinstance(e, UnitRun)).state
    u = job.unit(ROUND, SHARD)
    jg = model_job_graph(u)
    honest = ModelComputation(u, jg, job.aggregation.unit_start(h1), K_LOCAL, 1)
    assert honest.checkpoint_roots() == want.roots
    # the first node reading x, and an element of it that the unplaced schedule (global step
    # STEP of one shard: what the prover draws without the placement) would make differ
    b = u.bundle
    x_in = len(b.state) + len(b.hyper)
    node = next(i for i, n in enumerate(b.step.nodes) if x_in in n.inputs)
    ins = u.step_inputs(honest.state(STEP), STEP)
    rows = decompose.unit_batch_indices(job.spec.seed, STEP, job.spec.batch, job.positions(), 1, 0)
    assert sorted(rows.tolist()) != sorted(u.picks(STEP).tolist())
    ins[x_in] = job.data.x.index_select(0, torch.from_numpy(rows)).reshape(ins[x_in].shape)
    wrong = run_graph(b.step, ins, job.cfg, keep_trace=True)[1][node].reshape(-1)
    right = honest.trace(STEP)[node].reshape(-1)
    element = int((wrong != right).nonzero()[0])
    return u, jg, honest, node, element


def _liar(unit):
    u, jg, honest, node, element = unit
    return LyingChallenger(honest, jg, seed=node, segment=STEP, node=node, element=element)


def test_a_true_batch_element_of_a_unit_stands_with_its_placement(fresh, unit):
    u, jg, honest, node, _ = unit
    gid = open_game(fresh, JobHandle(u, jg), honest, honest, PLACEMENT)
    rec = run_game(gid, (Defender(honest, jg), fresh.defender), (_liar(unit), fresh.challenger),
                   rpc_advance(fresh))  # fmt: skip
    assert rec.winner == Side.DEFENDER and not rec.by_timeout, rec
    assert rec.moves[-1][0] == "proveElement" and not rec.rejected, rec
    proved = fresh.game.events.ElementProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert proved[0]["args"]["claimed"] == proved[0]["args"]["correct"]
    traced = fresh.game.events.TraceRootPosted().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert traced[0]["args"]["globalStep"] == PLACEMENT[0] + STEP


def test_the_same_unit_without_its_placement_is_judged_on_another_batch(fresh, unit):
    """Registered without its placement (a version-1 job), the chain draws batch row b of local
    step 1 as version 1's idx(seed, 1, b) over the whole dataset, not shard 1's row at global
    step 3: the proof opened at the unit's own batch rows is refused (ElementNotOpened), and
    the liar cannot prove its element."""
    u, jg, honest, node, _ = unit
    gid = open_game(fresh, JobHandle(u, jg), honest, honest)
    rec = run_game(gid, (Defender(honest, jg), fresh.defender), (_liar(unit), fresh.challenger),
                   rpc_advance(fresh))  # fmt: skip
    assert [r for r in rec.rejected if r.startswith("proveElement")], rec
    not_opened = "0x" + Web3.keccak(text="ElementNotOpened(uint256,uint256)")[:4].hex()
    assert all(not_opened in r for r in rec.rejected), rec


def test_a_cheat_in_a_unit_loses_to_the_honest_challenger(fresh, unit):
    u, jg, honest, node, element = unit
    start = honest.state(0)
    fault = Fault("element", STEP, node, element, 0x00400000)
    cheat = FaultyModelComputation(u, jg, start, K_LOCAL, 1, fault=fault)
    gid = open_game(fresh, JobHandle(u, jg), cheat, honest, PLACEMENT)
    rec = run_game(gid, (Defender(cheat, jg), fresh.defender), (Challenger(honest, jg),
                   fresh.challenger), rpc_advance(fresh))  # fmt: skip
    assert rec.winner == Side.CHALLENGER and not rec.by_timeout, rec
