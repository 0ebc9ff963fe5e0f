"""Every revert path of the dispute game (DisputeGame, OneStepProver, the RecordingManager test
stand-in) that no other test names, each asserted by its custom error's selector and arguments.

One small job is played throughout: widths (33, 4, 2), 4 steps checkpointed every 2, and a
defender that flipped element 100 of `upd.w0` (4 x 33, three leaves) at step 2. Played
honestly, that game visits every phase (segment 1, step 0, node 28, leaf 1, offset 36), so
each bad move is the honest move of some phase with one thing changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from dispute_fixtures import CLOCK_BUDGET, Job, advance, make_job, open_game, reverts, what

from agents.adversaries.faults import Fault, faulty_party
from agents.dispute.encoding import KIND_BATCH, DisputeConfig, NodeDesc, Operand
from agents.dispute.player import DEFENDER_PHASES, Challenger, Defender, GameView, Move, Phase

JOB = make_job((33, 4, 2), batch=2, n=8, seed=3, steps=4, interval=2)
STEPS, INTERVAL = 4, 2
UPD_W0 = JOB.jg.graph.index_of("upd.w0")
FAULT = Fault("element", step=2, node=UPD_W0, element=100, mask=0x40000000)
HONEST = JOB.honest(STEPS, INTERVAL)
LIAR = faulty_party(JOB, STEPS, INTERVAL, FAULT)
CFG = JOB.jg.config
OTHER_CFG = dataclasses.replace(CFG, seed=CFG.seed + 1)
ZERO = b"\x00" * 32


# -- playing the game up to a phase --------------------------------------------------------------


@dataclasses.dataclass
class Game:
    dep: Any
    gid: int
    defender: Defender
    challenger: Challenger

    def view(self) -> GameView:
        return self.dep.defender.view(self.gid)

    def play_to(self, phase: int) -> GameView:
        """Plays the honest moves of both sides until the game expects `phase`."""
        for _ in range(Phase.RESOLVED):
            v = self.view()
            if v.phase == phase:
                return v
            if v.phase in DEFENDER_PHASES:
                self.dep.defender.play(self.defender.next_move(v), self.gid)
            else:
                self.dep.challenger.play(self.challenger.next_move(v), self.gid)
        raise AssertionError(f"the game never reached phase {phase}")

    def honest_move(self, phase: int) -> Move:
        v = self.play_to(phase)
        player = self.defender if phase in DEFENDER_PHASES else self.challenger
        move = player.next_move(v)
        assert move is not None
        return move

    def send(self, fn: str, *args: Any) -> dict:
        client = self.dep.defender if _defender_moves(fn) else self.dep.challenger
        return client.transact(fn, self.gid, *args)


def _defender_moves(fn: str) -> bool:
    return fn in {"postCheckpoints", "openSegment", "postTrace", "postLeaves", "revealChunk"}


def _open(dep, job: Job = JOB) -> Game:
    gid = open_game(dep, job, LIAR, HONEST)
    return Game(dep, gid, Defender(LIAR, job.jg), Challenger(HONEST, job.jg))


@pytest.fixture
def game(dep, snapshot) -> Game:
    return _open(dep)


def test_the_played_game_visits_every_phase(game):
    """The premise of the tests below: played out, the challenger wins by the one-step proof
    of element 100 of `upd.w0` (leaf 1) after the defender moved in every defender phase."""
    v = game.play_to(Phase.PROVE_ELEMENT)
    assert (v.segment, v.step, v.node, v.leaf) == (1, 0, UPD_W0, 1)
    game.dep.challenger.play(game.challenger.next_move(v), game.gid)
    p = game.dep.game.functions.progressOf(game.gid).call()
    assert (p[0], p[1], p[2]) == (Phase.RESOLVED, 2, 10)  # resolved, challenger, 10 moves


# -- opening: who may open, over which job, which claims -----------------------------------------


def _request(dep, unit_id: int, steps: int = STEPS, interval: int = INTERVAL) -> tuple:
    """A GameRequest for `unit_id` (solver = account 1, challenger = account 2); the roots do
    not matter to the checks that come first."""
    parties = (dep.defender.address, dep.challenger.address)
    return (unit_id, *parties, ZERO, ZERO, ZERO, steps, interval, ZERO, 3, ZERO, ZERO, ZERO)


def _registered_unit(dep) -> int:
    """Unit 0 of a fresh job whose config the submitter (account 0) registered."""
    job_id = 4000 + dep.game.functions.gameCount().call()
    submitter = dep.deployer_game()
    dep.deployer.transact("setSubmitter", job_id, submitter.address)
    submitter.transact("registerConfig", job_id, CFG.hash())
    return job_id << 32


def test_openGame_notTheManager_notManager(dep, snapshot):
    unit = _registered_unit(dep)
    with reverts(dep.game, "NotManager", caller=dep.defender.address):
        dep.defender.transact("openGame", _request(dep, unit))


def test_openSegmentGame_notTheManager_notManager(dep, snapshot):
    unit = _registered_unit(dep)
    roots = [b"\x01" * 32, b"\x02" * 32]
    with reverts(dep.game, "NotManager", caller=dep.challenger.address):
        dep.challenger.transact(
            "openSegmentGame", unit, dep.defender.address, dep.challenger.address, ZERO, 0, 2, roots
        )


def test_openGame_jobWithoutConfig_configNotRegistered(dep, snapshot):
    with reverts(dep.game, "ConfigNotRegistered", jobId=78):
        dep.deployer.transact("open", _request(dep, (78 << 32) + 5))


def test_openSegmentGame_jobWithoutConfig_configNotRegistered(dep, snapshot):
    roots = [b"\x01" * 32, b"\x02" * 32]
    with reverts(dep.game, "ConfigNotRegistered", jobId=79):
        dep.deployer.transact(
            "openSegment", 79 << 32, dep.defender.address, dep.challenger.address, ZERO, 0, 2, roots
        )


@pytest.mark.parametrize(
    "steps,interval",
    [(4, 0), (0, 2), (5, 2)],
    ids=["no-interval", "no-steps", "steps-not-multiple"],
)
def test_openGame_unusableClaim_invalidClaim(dep, snapshot, steps, interval):
    unit = _registered_unit(dep)
    with reverts(dep.game, "InvalidClaim", steps=steps, interval=interval):
        dep.deployer.transact("open", _request(dep, unit, steps, interval))


def test_openSegmentGame_noSteps_invalidClaim(dep, snapshot):
    unit = _registered_unit(dep)
    roots = [b"\x01" * 32, b"\x02" * 32]
    with reverts(dep.game, "InvalidClaim", steps=0, interval=0):
        dep.deployer.transact(
            "openSegment", unit, dep.defender.address, dep.challenger.address, ZERO, 0, 0, roots
        )


# -- phases and clocks ---------------------------------------------------------------------------


def test_pickSegment_inPostCheckpoints_wrongPhase(game):
    """The challenger cannot move before the defender posted its checkpoints."""
    with reverts(
        game.dep.game,
        "WrongPhase",
        gameId=game.gid,
        expected=Phase.PICK_SEGMENT,
        actual=Phase.POST_CHECKPOINTS,
    ):
        game.send("pickSegment", 0, (ZERO, []), (ZERO, []))


def test_postCheckpoints_replayed_wrongPhase(game):
    """A defender move sent again once the game moved on (a replay) is refused."""
    move = game.honest_move(Phase.POST_CHECKPOINTS)
    game.send(move.fn, *move.args)
    with reverts(
        game.dep.game,
        "WrongPhase",
        gameId=game.gid,
        expected=Phase.POST_CHECKPOINTS,
        actual=Phase.PICK_SEGMENT,
    ):
        game.send(move.fn, *move.args)


def test_claimTimeout_resolvedGame_wrongPhase(game, chain):
    deadline = game.dep.challenger.deadline(game.gid)
    chain.mine(1, timestamp=deadline + 1)
    game.dep.challenger.claim_timeout(game.gid)
    assert game.view().phase == Phase.RESOLVED
    with reverts(
        game.dep.game, "WrongPhase", gameId=game.gid, expected=Phase.NONE, actual=Phase.RESOLVED
    ):
        game.dep.defender.claim_timeout(game.gid)


def test_postCheckpoints_pastDeadline_clockExpired(game, chain):
    move = game.honest_move(Phase.POST_CHECKPOINTS)
    opened = game.dep.w3.eth.get_block("latest")["timestamp"]
    deadline = game.dep.defender.deadline(game.gid)
    assert deadline == opened + CLOCK_BUDGET
    chain.mine(1, timestamp=deadline + 1)
    with reverts(game.dep.game, "ClockExpired", gameId=game.gid, deadline=deadline):
        game.send(move.fn, *move.args)


def test_pickStep_pastDeadline_clockExpired(game, chain):
    """The challenger's clock too: it runs from the defender's last move."""
    move = game.honest_move(Phase.PICK_STEP)
    deadline = game.dep.challenger.deadline(game.gid)
    advance(chain)(deadline - game.dep.w3.eth.get_block("latest")["timestamp"] + 1)
    with reverts(game.dep.game, "ClockExpired", gameId=game.gid, deadline=deadline):
        game.send(move.fn, *move.args)


def test_claimTimeout_beforeDeadline_clockNotExpired(game, chain):
    deadline = game.dep.defender.deadline(game.gid)
    chain.mine(1, timestamp=deadline - 5)  # the defender may still move
    with reverts(game.dep.game, "ClockNotExpired", gameId=game.gid, deadline=deadline):
        game.dep.challenger.claim_timeout(game.gid)


# -- the config each move carries ----------------------------------------------------------------


def _with_cfg(move: Move, cfg: DisputeConfig) -> tuple:
    """The move's arguments with its dispute config replaced by `cfg`."""
    args = [cfg.as_tuple() if a == CFG.as_tuple() else a for a in move.args]
    assert args != list(move.args), f"{move.fn} carries no config"
    return tuple(args)


@pytest.mark.parametrize(
    "phase",
    [Phase.POST_TRACE, Phase.PICK_NODE, Phase.PROVE_ELEMENT],
    ids=["postTrace", "pickNode", "proveElement"],
)
def test_move_wrongConfig_configMismatch(game, phase):
    move = game.honest_move(phase)
    with reverts(game.dep.game, "ConfigMismatch", expected=CFG.hash(), actual=OTHER_CFG.hash()):
        game.send(move.fn, *_with_cfg(move, OTHER_CFG))
    game.send(move.fn, *move.args)  # the same move with the game's config is accepted


# -- indices -------------------------------------------------------------------------------------


def test_pickSegment_pastLastSegment_indexOutOfRange(game):
    move = game.honest_move(Phase.PICK_SEGMENT)
    segments = STEPS // INTERVAL
    with reverts(game.dep.game, "IndexOutOfRange", index=segments, bound=segments):
        game.send(move.fn, segments, *move.args[1:])


def test_pickStep_pastLastStep_indexOutOfRange(game):
    move = game.honest_move(Phase.PICK_STEP)
    with reverts(game.dep.game, "IndexOutOfRange", index=INTERVAL, bound=INTERVAL):
        game.send(move.fn, INTERVAL, *move.args[1:])


def test_pickLeaf_pastLastLeaf_indexOutOfRange(game):
    move = game.honest_move(Phase.PICK_LEAF)
    leaves = len(game.view().leaves)
    assert leaves == 3  # 4 x 33 = 132 elements
    with reverts(game.dep.game, "IndexOutOfRange", index=leaves, bound=leaves):
        game.send(move.fn, leaves, *move.args[1:])


def test_proveElement_offsetPastLeaf_indexOutOfRange(game):
    move = game.honest_move(Phase.PROVE_ELEMENT)
    with reverts(game.dep.game, "IndexOutOfRange", index=64, bound=64):
        game.send(move.fn, 64, *move.args[1:])


def test_postTrace_stateProducerPastLastNode_indexOutOfRange(dep, snapshot):
    """A registered config whose state list names a producer node past the graph's last: the
    config hash binds it, so the game only finds out when it assembles the state root."""
    n = CFG.num_nodes
    bad = dataclasses.replace(CFG, state_producers=(*CFG.state_producers[:-1], n))
    job = dataclasses.replace(JOB, jg=dataclasses.replace(JOB.jg, config=bad))
    g = _open(dep, job)
    move = g.honest_move(Phase.POST_TRACE)
    assert move.args[-1] == bad.as_tuple()
    with reverts(dep.game, "IndexOutOfRange", index=n, bound=n):
        g.send(move.fn, *move.args)


# -- inclusion proofs ----------------------------------------------------------------------------


def _entry_with(entry: tuple, value: bytes) -> tuple:
    return (value, entry[1])


def _flip(siblings: list[bytes]) -> list[bytes]:
    return [bytes([siblings[0][0] ^ 1]) + siblings[0][1:], *siblings[1:]]


@pytest.mark.parametrize(
    "phase,which,label",
    [
        (Phase.PICK_SEGMENT, 1, "checkpoint.start"),
        (Phase.PICK_SEGMENT, 2, "checkpoint.end"),
        (Phase.PICK_STEP, 1, "step.before"),
        (Phase.PICK_STEP, 2, "step.after"),
    ],
    ids=["checkpoint.start", "checkpoint.end", "step.before", "step.after"],
)
def test_pick_entryNotInList_invalidProof(game, phase, which, label):
    """A list entry whose value is not the one at that position (its proof no longer folds
    to the committed root)."""
    move = game.honest_move(phase)
    args = list(move.args)
    args[which] = _entry_with(args[which], b"\x07" * 32)
    with reverts(game.dep.game, "InvalidProof", what=what(label)):
        game.send(move.fn, *args)


def test_pickNode_badTraceProof_invalidProof(game):
    node, root, proof, desc, gproof, cfg = game.honest_move(Phase.PICK_NODE).args
    with reverts(game.dep.game, "InvalidProof", what=what("trace.node")):
        game.send("pickNode", node, root, _flip(proof), desc, gproof, cfg)


def test_pickNode_descriptorOfAnotherNode_invalidProof(game):
    node, root, proof, desc, gproof, cfg = game.honest_move(Phase.PICK_NODE).args
    other = JOB.jg.nodes[node - 1].encode()
    with reverts(game.dep.game, "InvalidProof", what=what("graph.node")):
        game.send("pickNode", node, root, proof, other, gproof, cfg)


def test_pickLeaf_badSiblings_invalidProof(game):
    leaf, leaf_hash, siblings = game.honest_move(Phase.PICK_LEAF).args
    with reverts(game.dep.game, "InvalidProof", what=what("tensor.leaf")):
        game.send("pickLeaf", leaf, leaf_hash, _flip(siblings))


# -- the one-step proof (OneStepProver, called by proveElement) ---------------------------------


def _prove_args(game: Game) -> tuple[int, bytes, bytes, tuple, list]:
    offset, chunk, desc, cfg, openings = game.honest_move(Phase.PROVE_ELEMENT).args
    # upd.w0 = sgd(w0, m): operand 0 the state tensor w0, operand 1 node 27's output
    assert [o.kind for o in JOB.jg.nodes[UPD_W0].inputs] == [1, 2] and len(openings) == 2
    return offset, chunk, desc, cfg, [list(o) for o in openings]


def test_proveElement_missingOpening_badOperand(game):
    offset, chunk, desc, cfg, openings = _prove_args(game)
    with reverts(game.dep.prover, "BadOperand", operand=1):  # one opening for two inputs
        game.send("proveElement", offset, chunk, desc, cfg, [tuple(openings[0])])


def _forge_chunk(o: list) -> None:
    leaf, data, sib = o[3][0]
    o[3][0] = (leaf, bytes([data[0] ^ 0x40]) + data[1:], sib)


def _short_chunk(o: list) -> None:
    leaf, data, sib = o[3][0]
    o[3][0] = (leaf, data[:-4], sib)


def _wrong_tensor_root(o: list) -> None:
    o[0] = b"\x09" * 32  # not in the state list / op trace


def _wrong_data_root(o: list) -> None:
    o[2] = b"\x09" * 32  # the header and this data root do not give the tensor root


@pytest.mark.parametrize(
    "operand,forge",
    [
        (0, _forge_chunk),
        (1, _forge_chunk),
        (0, _short_chunk),
        (0, _wrong_tensor_root),
        (1, _wrong_tensor_root),
        (1, _wrong_data_root),
    ],
    ids=["state-chunk", "node-chunk", "short-chunk", "state-root", "node-root", "data-root"],
)
def test_proveElement_forgedOpening_badOpening(game, operand, forge):
    offset, chunk, desc, cfg, openings = _prove_args(game)
    forge(openings[operand])
    with reverts(game.dep.prover, "BadOpening", operand=operand):
        game.send("proveElement", offset, chunk, desc, cfg, [tuple(o) for o in openings])


# The prover's own entry point, called directly. OutOfRange cannot come from the game: it asks
# for (row, col) = divmod(element, cols) only when element < rows x cols. A batch operand of the
# wrong shape reaches the prover from a game only if the job's registered graph has one.


def _ctx(batch: int) -> tuple:
    # stateRoot, traceRoot, datasetRoot, numState, numNodes, node, step, seed, batchSize,
    # numExamples, shards, shard
    return (ZERO, ZERO, ZERO, 0, 1, 0, 0, 0, batch, 8, 1, 0)


def test_evaluate_rowOrColumnOutsideOutput_outOfRange(dep):
    desc = JOB.jg.nodes[UPD_W0]  # 4 x 33
    for row, col in [(desc.rows, 0), (0, desc.cols)]:
        with reverts(dep.prover, "OutOfRange", row=row, col=col):
            dep.prover.functions.evaluate(_ctx(2), desc.encode(), row, col, []).call()


def test_evaluate_batchOperandOfWrongShape_badOperand(dep):
    """A batch-index operand must be (1, B): its elements are computed on chain, not opened."""
    idx = Operand(KIND_BATCH, 0, ZERO, 2, 1, 3)  # three indices; the step's batch has two
    desc = NodeDesc(10, 2, 1, 3, 0, (idx,))  # relu over it: any single-input op will do
    no_opening = (ZERO, [], ZERO, [])
    with reverts(dep.prover, "BadOperand", operand=0):
        dep.prover.functions.evaluate(_ctx(2), desc.encode(), 0, 0, [no_opening]).call()


# -- the recording job manager (test stand-in) ----------------------------------------------------


def test_setSubmitter_secondTime_jobExists(dep, snapshot):
    dep.deployer.transact("setSubmitter", 4242, dep.defender.address)
    with reverts(dep.manager, "JobExists", jobId=4242, submitter=dep.defender.address):
        dep.deployer.transact("setSubmitter", 4242, dep.challenger.address)


def test_setArbiter_secondTime_alreadyWired(dep, snapshot):
    with reverts(dep.manager, "AlreadyWired", arbiter=dep.game.address):
        dep.deployer.transact("setArbiter", dep.prover.address)
