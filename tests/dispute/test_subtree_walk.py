"""The subtree walk down a large tensor's leaf tree (PROTOCOL §7.3, lib/Walks.sol): a tensor of
more than 64 leaves is never posted whole; the defender posts 64 nodes a round and the
challenger names one, down to a leaf.

- a cheating defender with one wrong element of a large tensor loses to the honest challenger,
  after a walk, by the one-step proof of that element;
- an honest defender beats a challenger walking to random (or chosen) leaves;
- each walk move checks its nodes, its count and its child.
"""

from __future__ import annotations

import pytest
from dispute_fixtures import advance, examples, make_job, open_game, play_to, reverts
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents.adversaries.faults import Fault, faulty_party
from agents.adversaries.liars import LyingChallenger
from agents.dispute.client import run_game
from agents.dispute.player import (
    Challenger,
    Defender,
    Move,
    Phase,
)

SETTINGS = dict(suppress_health_check=list(HealthCheck), deadline=None)
# w0 is (4, 1100): 4,400 elements, 69 leaves, a tree of height 7 (a round of 6, then 1).
JOB = make_job((1100, 4, 3), batch=2, n=8, seed=9, steps=1, interval=1)
UPD_W0 = JOB.jg.graph.index_of("upd.w0")
NUMEL = JOB.jg.nodes[UPD_W0].numel
HONEST = JOB.honest(1, 1)


def _liar(element: int):
    return faulty_party(
        JOB, 1, 1, Fault("element", step=0, node=UPD_W0, element=element, mask=0x40000000)
    )


def _walked(rec) -> int:
    return sum(1 for fn, _ in rec.moves if fn == "pickSubtree")


@pytest.mark.parametrize("element", [0, 2047, 4096, NUMEL - 1])
def test_cheater_in_a_large_tensor_loses_after_a_walk(dep, chain, snapshot, element):
    liar = _liar(element)
    gid = open_game(dep, JOB, liar, HONEST)
    rec = run_game(
        gid, (Defender(liar, JOB.jg), dep.defender), (Challenger(HONEST, JOB.jg), dep.challenger),
        advance(chain),
    )  # fmt: skip
    assert rec.challenger_won and not rec.by_timeout, rec
    assert _walked(rec) == 2 and "postLeaves" not in dict(rec.moves), rec
    proved = dep.game.events.ElementProved().get_logs(
        from_block=0, argument_filters={"gameId": gid}
    )
    assert proved[0]["args"]["element"] == element


def test_honest_defender_wins_any_walk(dep, chain):
    settings(max_examples=examples(8, chain.provider.name), **SETTINGS)(
        given(seed=st.integers(0, 2**32), chosen=st.booleans(), forge=st.booleans())(_honest_wins)
    )(dep, chain)


def _honest_wins(dep, chain, seed, chosen, forge):
    element = seed % NUMEL if chosen else None
    liar = LyingChallenger(HONEST, JOB.jg, seed=seed, node=UPD_W0, element=element, forge=forge)
    sid = chain.snapshot()
    try:
        gid = open_game(dep, JOB, HONEST, HONEST)
        rec = run_game(
            gid, (Defender(HONEST, JOB.jg), dep.defender), (liar, dep.challenger), advance(chain)
        )
    finally:
        chain.restore(sid)
    event(f"forge={forge} chosen={chosen}")
    assert not rec.challenger_won, rec
    assert _walked(rec) == 2, rec
    assert rec.by_timeout == forge, rec


# -- reverts ---------------------------------------------------------------------------------


@pytest.fixture
def walk(dep, snapshot):
    liar = _liar(NUMEL - 1)
    gid = open_game(dep, JOB, liar, HONEST)
    return gid, Defender(liar, JOB.jg), Challenger(HONEST, JOB.jg)


def test_postSubtree_firstRound_postsTheTopSixLevels(dep, walk):
    gid, d, c = walk
    v = play_to(dep, gid, Phase.PICK_LEAF, d, c)
    assert len(v.subtree) == 64 and (v.subtree_height, v.subtree_index) == (1, 0)
    p = dep.defender.read_struct("progressOf", gid)
    assert (p["walkHeight"], p["walkIndex"]) == (7, 0)


def test_postSubtree_smallTensor_notAWalk(dep, snapshot):
    job = make_job((6, 4, 3), batch=2, n=8, seed=5, steps=1, interval=1)
    node = job.jg.graph.index_of("upd.w0")
    liar = faulty_party(job, 1, 1, Fault("element", step=0, node=node, element=0, mask=0x40000000))
    honest = job.honest(1, 1)
    gid = open_game(dep, job, liar, honest)
    play_to(dep, gid, Phase.POST_LEAVES, Defender(liar, job.jg), Challenger(honest, job.jg))
    with reverts(dep.game, "NotAWalk", numLeaves=1):
        dep.defender.play(Move("postSubtree", ([b"\x00" * 32],)), gid)


def test_postTraceRoot_smallTrace_notAWalk(dep, snapshot):
    """A trace of at most 64 nodes is posted whole (postTrace); its walk cannot start."""
    job = make_job((6, 4, 3), batch=2, n=8, seed=5, steps=1, interval=1)
    node = job.jg.graph.index_of("upd.w0")
    liar = faulty_party(job, 1, 1, Fault("element", step=0, node=node, element=0, mask=0x40000000))
    honest = job.honest(1, 1)
    gid = open_game(dep, job, liar, honest)
    v = play_to(dep, gid, Phase.POST_TRACE, Defender(liar, job.jg), Challenger(honest, job.jg))
    roots, _names, _producers, cfg = Defender(liar, job.jg).next_move(v).args
    n = len(roots)
    assert n <= 64
    state_top = [b"\x00" * 32] * 8  # any top of S_{t+1}'s list: the walk cannot start at all
    with reverts(dep.game, "NotAWalk", numLeaves=n):
        dep.defender.play(Move("postTraceRoot", ([b"\x00" * 32] * 64, state_top, cfg)), gid)


def test_pickSubtree_afterPostLeaves_notAWalk(dep, snapshot):
    job = make_job((70, 4, 3), batch=2, n=8, seed=5, steps=1, interval=1)
    node = job.jg.graph.index_of("upd.w0")  # (4, 70): 5 leaves, posted whole
    liar = faulty_party(job, 1, 1, Fault("element", step=0, node=node, element=0, mask=0x40000000))
    honest = job.honest(1, 1)
    gid = open_game(dep, job, liar, honest)
    v = play_to(dep, gid, Phase.PICK_LEAF, Defender(liar, job.jg), Challenger(honest, job.jg))
    with reverts(dep.game, "NotAWalk", numLeaves=5):
        dep.challenger.play(Move("pickSubtree", (0, v.leaves)), gid)


def test_postSubtree_wrongCountOrWrongRoot_reverts(dep, walk):
    gid, d, c = walk
    v = play_to(dep, gid, Phase.POST_LEAVES, d, c)
    nodes = d.next_move(v).args[0]
    with reverts(dep.game, "RootMismatch"):  # 32 nodes hash to another root
        dep.defender.play(Move("postSubtree", (nodes[:32],)), gid)
    dep.defender.play(Move("postSubtree", (nodes,)), gid)
    v = play_to(dep, gid, Phase.POST_LEAVES, d, c)  # the second round: 2 leaves under a node
    nodes = d.next_move(v).args[0]
    assert len(nodes) == 2
    with reverts(dep.game, "RootMismatch"):
        dep.defender.play(Move("postSubtree", (nodes[::-1],)), gid)


def test_pickSubtree_tamperedNodes_childOutOfRange_paddingLeaf_revert(dep, walk):
    gid, d, c = walk
    v = play_to(dep, gid, Phase.PICK_LEAF, d, c)
    tampered = [v.subtree[1], *v.subtree[1:]]
    with reverts(dep.game, "RootMismatch"):
        dep.challenger.play(Move("pickSubtree", (0, tampered)), gid)
    with reverts(dep.game, "IndexOutOfRange", index=64, bound=64):
        dep.challenger.play(Move("pickSubtree", (64, v.subtree)), gid)
    with reverts(dep.game, "LengthMismatch", expected=64, actual=63):
        dep.challenger.play(Move("pickSubtree", (0, v.subtree[:63])), gid)
    # Node 34 at height 1 covers leaves 68 and 69; leaf 69 is padding (69 leaves: 0 … 68).
    dep.challenger.play(Move("pickSubtree", (34, v.subtree)), gid)
    v = play_to(dep, gid, Phase.PICK_LEAF, d, c)
    with reverts(dep.game, "IndexOutOfRange", index=69, bound=69):
        dep.challenger.play(Move("pickSubtree", (1, v.subtree)), gid)
