"""The walk down a large step trace (PROTOCOL §7.3, DisputeGameTrace): a step graph of more than
64 nodes (the CNN example's 314 here) never has its trace posted whole; the defender commits the
trace root with S_{t+1}'s tensor roots and the top of the trace list's tree, then 64 nodes (at
last the entries) a round under the subtree the challenger picks.

- a defender whose posted S_{t+1} root of a state tensor is not its producer's trace entry
  loses to `proveProducer` (and a challenger proving a producer of a true trace loses);
- each walk move checks its count, its nodes against the disputed subtree and its child, and
  `proveProducer` its index and both openings;
- the trace phase's contract runs only by DELEGATECALL from its game;
- (without a chain) the challenger's picks reach the first wrong entry, or a wrong producer
  left of it, and it can open every entry up to there from the walk and its own trace.
"""

from __future__ import annotations

import random

import pytest
from dispute_fixtures import ape_artifacts, build_model_job, open_game, play_to, reverts, what

from agents.adversaries.faults import Fault, FaultyModelComputation
from agents.adversaries.liars import LyingChallenger, ProducerLiar
from agents.core.chain import AnvilConfig, connect, local_anvil
from agents.core.enums import Phase
from agents.dispute.client import GameClient
from agents.dispute.harness import _deploy, deploy_game
from agents.dispute.model_graph import model_job_graph
from agents.dispute.model_trace import ModelComputation
from agents.dispute.player import (
    Challenger,
    Defender,
    Move,
    prove_producer,
)
from agents.dispute.trace_walk import WalkedTrace, next_round, pick_child
from agents.training import merkle
from agents.training.keccak import keccak256

STEPS, EVERY = 2, 1


@pytest.fixture(scope="module")
def v3dep(project):
    with local_anvil(AnvilConfig()) as url:
        yield deploy_game(connect(url), ape_artifacts(project)), ape_artifacts(project)


@pytest.fixture
def fresh(v3dep):
    dep, _ = v3dep
    sid = dep.w3.provider.make_request("evm_snapshot", [])["result"]
    yield dep
    dep.w3.provider.make_request("evm_revert", [sid])


class _Handle:
    def __init__(self, job, jg):
        self.spec, self.data, self.jg = job.spec, job.data, jg


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    job, st = build_model_job(tmp_path_factory.mktemp("cnn"), "cnn", STEPS, EVERY)
    jg = model_job_graph(job)
    honest = ModelComputation(job, jg, st, STEPS, EVERY)
    honest.checkpoint_roots()
    return job, jg, st, honest


def _cheat(cnn, node: int):
    job, jg, st, honest = cnn
    cheat = FaultyModelComputation(
        job, jg, st, STEPS, EVERY, fault=Fault("element", 0, node, 0, 1 << 22)
    )
    assert cheat.final_root() != honest.final_root()
    return cheat


def _walk(fresh, cnn, node: int):
    """A game against a cheater at node `node` (step 0), its players and its handle."""
    job, jg, _, honest = cnn
    cheat = _cheat(cnn, node)
    gid = open_game(fresh, _Handle(job, jg), cheat, honest)
    return gid, Defender(cheat, jg), Challenger(honest, jg)


def _producer_game(fresh, cnn):
    """A ProducerLiar posting the honest trace with its own S_{t+1} (a flipped producer output)."""
    job, jg, _, honest = cnn
    state = 0
    node = jg.config.state_producers[state]
    cheat = _cheat(cnn, node)
    gid = open_game(fresh, _Handle(job, jg), cheat, honest)
    return gid, ProducerLiar(cheat, jg, traced=honest), Challenger(honest, jg), state


def test_a_trace_walk_reaches_the_first_wrong_node(fresh, cnn):
    _, jg, _, _ = cnn
    node = 150
    gid, d, c = _walk(fresh, cnn, node)
    v = play_to(fresh, gid, Phase.PICK_TRACE_SUBTREE, d, c)
    # 314 nodes: a tree of height 9, first round 64 nodes at height 3, then 8 entries
    assert [(h, i, len(n)) for h, i, n in v.trace_rounds] == [(3, 0, 64)]
    # the top of S_{t+1}'s list tree: its 20 entries (padded to 32), as it holds up to 64
    assert len(jg.config.state_names) == 20 and len(v.state_top) == 32
    v = play_to(fresh, gid, Phase.PICK_NODE, d, c)
    assert [(h, i, len(n)) for h, i, n in v.trace_rounds][1:] == [(0, node // 8 * 8, 8)]
    move = c.next_move(v)
    assert move.fn == "pickNode" and move.args[0] == node


def test_a_producer_root_not_in_the_trace_loses(fresh, cnn):
    gid, d, c, state = _producer_game(fresh, cnn)
    v = play_to(fresh, gid, Phase.PICK_NODE, d, c)
    move = c.next_move(v)
    assert move.fn == "proveProducer" and move.args[0] == state
    fresh.challenger.play(move, gid)
    p = fresh.defender.read_struct("progressOf", gid)
    assert p["phase"] == Phase.RESOLVED and p["winner"] == 2
    proved = fresh.game.events.ProducerProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    args = proved[0]["args"]
    cfg = cnn[1].config
    assert args["node"] == cfg.state_producers[0]
    assert args["posted"] != keccak256(cfg.state_names[0] + args["traced"])


def test_proveProducer_ofATrueProducer_loses(fresh, cnn):
    """A challenger disputing a true claim walks anywhere, then proves a producer whose posted
    root is its trace entry: it loses."""
    job, jg, _, honest = cnn
    gid = open_game(fresh, _Handle(job, jg), honest, honest)
    liar = LyingChallenger(honest, jg, seed=3)
    v = play_to(fresh, gid, Phase.PICK_NODE, Defender(honest, jg), liar)
    fresh.challenger.play(prove_producer(honest, jg, v, 0), gid)
    p = fresh.defender.read_struct("progressOf", gid)
    assert p["phase"] == Phase.RESOLVED and p["winner"] == 1


def test_postTraceRoot_wrongCountOrWrongStateTop_reverts(fresh, cnn):
    gid, d, c = _walk(fresh, cnn, 150)
    v = play_to(fresh, gid, Phase.POST_TRACE, d, c)
    top, state_top, cfg = d.next_move(v).args
    with reverts(fresh.game, "LengthMismatch", expected=64, actual=63):
        fresh.defender.play(Move("postTraceRoot", (top[:63], state_top, cfg)), gid)
    with reverts(fresh.game, "LengthMismatch", expected=32, actual=31):
        fresh.defender.play(Move("postTraceRoot", (top, state_top[1:], cfg)), gid)
    swapped = [state_top[1], state_top[0], *state_top[2:]]
    with reverts(fresh.game, "RootMismatch", expected=v.step_roots[-1]):
        fresh.defender.play(Move("postTraceRoot", (top, swapped, cfg)), gid)
    fresh.defender.play(Move("postTraceRoot", (top, state_top, cfg)), gid)
    p = fresh.defender.read_struct("progressOf", gid)
    assert (p["walkHeight"], p["walkIndex"], p["traceNodes"]) == (9, 0, 314)


def test_pickTraceSubtree_tamperedNodes_wrongCount_childOutOfRange_revert(fresh, cnn):
    gid, d, c = _walk(fresh, cnn, 150)
    v = play_to(fresh, gid, Phase.PICK_TRACE_SUBTREE, d, c)
    nodes = v.trace_rounds[-1][2]
    with reverts(fresh.game, "RootMismatch"):
        fresh.challenger.play(Move("pickTraceSubtree", (0, [nodes[1], *nodes[1:]])), gid)
    with reverts(fresh.game, "LengthMismatch", expected=64, actual=32):
        fresh.challenger.play(Move("pickTraceSubtree", (0, nodes[:32])), gid)
    with reverts(fresh.game, "IndexOutOfRange", index=64, bound=64):
        fresh.challenger.play(Move("pickTraceSubtree", (64, nodes)), gid)


def test_postTraceSubtree_wrongEntriesOrCount_reverts(fresh, cnn):
    gid, d, c = _walk(fresh, cnn, 150)
    v = play_to(fresh, gid, Phase.POST_TRACE_SUBTREE, d, c)
    entries = d.next_move(v).args[0]
    assert len(entries) == 8
    with reverts(fresh.game, "LengthMismatch", expected=8, actual=7):
        fresh.defender.play(Move("postTraceSubtree", (entries[:7],)), gid)
    with reverts(fresh.game, "RootMismatch"):  # two entries swapped
        fresh.defender.play(
            Move("postTraceSubtree", ([entries[1], entries[0], *entries[2:]],)), gid
        )
    fresh.defender.play(Move("postTraceSubtree", (entries,)), gid)
    assert fresh.defender.view(gid).phase == Phase.PICK_NODE


def test_proveProducer_badIndexOrOpening_reverts(fresh, cnn):
    gid, d, c, state = _producer_game(fresh, cnn)
    v = play_to(fresh, gid, Phase.PICK_NODE, d, c)
    _, entry, trace_entry, state_entry, cfg = c.next_move(v).args
    n = len(cnn[1].config.state_names)
    with reverts(fresh.game, "IndexOutOfRange", index=n, bound=n):
        fresh.challenger.play(Move("proveProducer", (n, entry, trace_entry, state_entry, cfg)), gid)
    other = (entry[0], entry[1] + 1, entry[2])  # another producer than the config names
    with reverts(fresh.game, "InvalidProof", what=what("config.state")):
        fresh.challenger.play(
            Move("proveProducer", (state, other, trace_entry, state_entry, cfg)), gid
        )
    wrong = (bytes(32), trace_entry[1])
    with reverts(fresh.game, "InvalidProof", what=what("trace.node")):
        fresh.challenger.play(Move("proveProducer", (state, entry, wrong, state_entry, cfg)), gid)
    wrong = (state_entry[0], state_entry[1][:-1])
    with reverts(fresh.game, "InvalidProof", what=what("state.tensor")):
        fresh.challenger.play(Move("proveProducer", (state, entry, trace_entry, wrong, cfg)), gid)


def test_disputeGameTrace_calledDirectly_notDelegated(v3dep):
    dep, artifacts = v3dep
    trace = _deploy(dep.w3, artifacts, "DisputeGameTrace", dep.keys[0], dep.manager.address,
                    dep.prover.address)  # fmt: skip
    with reverts(trace, "NotDelegated"):
        GameClient(dep.w3, trace, dep.keys[1]).transact("postTraceSubtree", 1, [bytes(32)])


@pytest.mark.parametrize("domain", [merkle.TRACE_DOMAIN, merkle.STATE_DOMAIN])
@pytest.mark.parametrize("n", [12, 65, 314, 1204, 5200])
def test_walkedTrace_opensEveryEntryUpToTheFirstWrongOne(n, domain):
    """Without a chain: the honest picks (pick_child) reach the first wrong entry x in
    ⌈⌈log2 n⌉ / 6⌉ rounds, and the list proof of every entry up to x, built from the posted
    rounds and the challenger's own list, is the one of the defender's whole list: for a trace
    and for S_{t+1}'s list (a list of up to 64 has its entries as its top)."""
    rng = random.Random(n)
    own = [keccak256(b"vtp.test.%d" % i) for i in range(n)]
    for x in [rng.randrange(n), n - 1, 0]:
        theirs = own[:x] + [keccak256(b"wrong.%d" % i) for i in range(x, n)]
        rounds = [next_round(theirs, merkle.depth_for(n), 0, domain)]
        while rounds[-1][0] > 0:
            height, first, _ = rounds[-1]
            rounds.append(next_round(theirs, height, first + pick_child(own, rounds[-1], domain),
                                     domain))  # fmt: skip
        _, first, values = rounds[-1]
        assert first + pick_child(own, rounds[-1], domain) == x
        assert len(rounds) == max(1, -(-merkle.depth_for(n) // 6))
        known = WalkedTrace(n, own, rounds, domain)
        for i in {0, x, *(rng.randrange(x + 1) for _ in range(20))}:
            assert known.siblings(i) == merkle.list_proof(domain, theirs, i).siblings
            assert known.value(i) == theirs[i]
