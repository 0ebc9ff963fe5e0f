"""Front-running the dispute game: a stranger who copies each pending move and sends it first
is refused every time (NotYourTurn: moves are bound to the party, not to who sends the bytes),
so the game runs exactly as without it and the honest side wins; a stranger who front-runs the
timeout claim only executes the clock's verdict (the winner is whoever's opponent ran out of
time, never the caller) and a second claim is refused."""

from __future__ import annotations

from dispute_fixtures import advance, make_job, open_game

from agents.adversaries.faults import Fault, faulty_party
from agents.dispute.client import GameClient, MoveRejected
from agents.dispute.player import DEFENDER_PHASES, Challenger, Defender, Phase

CHEAT = Fault("element", step=2, node=2, element=0, mask=0x40000000)


def _job():
    job = make_job((4, 3, 2), batch=2, n=8, seed=3, steps=4, interval=2)
    return job, job.honest(4, 2), faulty_party(job, 4, 2, CHEAT)


def test_copied_moves_are_refused_and_the_game_is_unchanged(dep, chain, snapshot):
    job, honest, liar = _job()
    gid = open_game(dep, job, liar, honest)
    players = {"d": (Defender(liar, job.jg), dep.defender), "c": (Challenger(honest, job.jg),
               dep.challenger)}  # fmt: skip
    stranger = GameClient(dep.w3, dep.game, dep.keys[3])
    refused = 0
    for _ in range(64):
        v = dep.defender.view(gid)
        if v.phase == Phase.RESOLVED:
            break
        player, client = players["d" if v.phase in DEFENDER_PHASES else "c"]
        move = player.next_move(v)
        try:
            stranger.play(move, gid)  # the same calldata, sent first by someone else
        except MoveRejected:
            refused += 1
        else:
            raise AssertionError(f"a stranger's copy of {move.fn} was accepted")
        client.play(move, gid)
    progress = dep.game.functions.progressOf(gid).call()
    assert progress[0] == Phase.RESOLVED
    assert progress[1] == 2  # the challenger (honest) won
    assert refused >= 4  # one refused copy per move of the game


def test_a_strangers_timeout_claim_only_executes_the_clock(dep, chain, snapshot):
    job, honest, liar = _job()
    gid = open_game(dep, job, honest, liar)  # honest defender, lying challenger
    defender = Defender(honest, job.jg)
    dep.defender.play(defender.next_move(dep.defender.view(gid)), gid)
    stranger = GameClient(dep.w3, dep.game, dep.keys[3])
    try:
        stranger.claim_timeout(gid)  # too early: the challenger's clock still runs
    except MoveRejected:
        pass
    else:
        raise AssertionError("a timeout was claimed before the deadline")
    # the lying challenger falls silent; a stranger claims the timeout first
    now = dep.w3.eth.get_block("latest")["timestamp"]
    advance(chain)(dep.challenger.deadline(gid) - int(now) + 1)
    stranger.claim_timeout(gid)
    progress = dep.game.functions.progressOf(gid).call()
    assert progress[0] == Phase.RESOLVED
    assert progress[1] == 1  # the defender won: the clock decided, not the caller
    try:
        dep.defender.claim_timeout(gid)
    except MoveRejected:
        pass
    else:
        raise AssertionError("a resolved game was resolved again")
