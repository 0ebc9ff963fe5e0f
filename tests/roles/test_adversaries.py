"""The test adversaries as strategies (agents/adversaries): given the same facts, the honest
strategy and each cheating one decide differently, as documented; the CLI flags select them."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
import torch

from agents.adversaries import aggregator_strategy, solver_strategy, verifier_strategy
from agents.adversaries.aggregator import CheatingAggregator
from agents.adversaries.faults import Fault, FaultyComputation
from agents.adversaries.liars import LyingChallenger
from agents.adversaries.solver import (
    ClaimedTraining,
    FalseTruthSolver,
    FaultySolver,
    StaleFinalSolver,
    parse_cheat,
)
from agents.adversaries.verifier import MADE_UP_ROOT, LazyVerifier, LyingVerifier
from agents.cli import adversaries as cli
from agents.cli.main import build_parser
from agents.dispute.budget import StateBudget
from agents.dispute.harness import make_job
from agents.dispute.player import Challenger
from agents.dispute.trace import Computation
from agents.roles.aggregator import HonestAggregator
from agents.roles.runner import RoleError
from agents.roles.solver import HonestSolver, TrainingStopped
from agents.roles.verifier import HonestVerifier
from agents.training.merkle import (
    CHECKPOINT_DOMAIN,
    ListProof,
    checkpoint_root,
    final_proof,
    verify_list_proof,
)

SEGMENTS = [1, 4]
FINAL = b"\xf1" * 32


def published(position: int) -> bytes:
    """The solver's published root at checkpoint `position` (a stand-in)."""
    return bytes([position]) * 32


def honest_root() -> bytes:
    return b"\x0b" * 32


class Steps:
    """Records which of the honest verifier's next steps a strategy takes, and what it records."""

    def __init__(self) -> None:
        self.taken: list[object] = []

    def record(self, verdict) -> None:
        self.taken.append(verdict)

    async def read(self) -> None:
        self.taken.append("read")

    async def replay(self) -> None:
        self.taken.append("replay")

    async def defend(self) -> None:
        self.taken.append("defend")


def judged(v) -> list[object]:
    """What `v` does with a unit: before reading its checkpoints, after, and in the court."""
    steps = Steps()
    asyncio.run(v.judge_unread(SEGMENTS, FINAL, steps.record, steps.read))
    asyncio.run(v.judge_read(SEGMENTS, published, steps.record, steps.replay))
    asyncio.run(v.defend_court(steps.defend))
    return steps.taken


def announced(strategy, caplog) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        strategy.announce(logging.getLogger("test.adversaries"))
    return [r.getMessage() for r in caplog.records]


def test_honest_verifier_fetches_replays_and_challenges_with_its_own_root(caplog):
    v = HonestVerifier()
    assert judged(v) == ["read", "replay", "defend"]
    assert v.counter_claim(honest_root) == honest_root()
    assert announced(v, caplog) == []
    assert isinstance(v.challenger(None, None, 7), Challenger)


def test_lazy_verifier_agrees_with_the_final_root_unread_and_does_not_defend(caplog):
    v = LazyVerifier()
    ends = ["0x" + FINAL.hex()] * 2
    lazy = ("agree", {"segments": SEGMENTS, "end_roots": ends, "replayed": False})
    assert judged(v) == [lazy, "replay"]  # (it never reads, so never reaches judge_read)
    assert announced(v, caplog) == [v.banner] and "LAZY" in v.banner


def test_lying_verifier_disputes_the_published_roots_unreplayed_with_a_made_up_root(caplog):
    v = LyingVerifier()
    (read, (verdict, data), defend) = judged(v)  # it reads the checkpoints first
    assert (read, verdict, defend) == ("read", "disagree", "defend")
    # it seals the solver's own end roots (so it is not silent) and names no wrong segment
    assert data["end_roots"] == ["0x" + published(2).hex(), "0x" + published(5).hex()]
    assert data["wrong"] == []
    assert v.counter_claim(honest_root) == MADE_UP_ROOT != honest_root()
    assert isinstance(v.challenger(None, None, 7), LyingChallenger)
    assert announced(v, caplog) == [v.banner]


STATE = {"w": torch.arange(8, dtype=torch.float32)}


def state_at(c: int) -> dict:
    return {name: t + c for name, t in STATE.items()}


def state_root(st: dict) -> bytes:
    return bytes(st["w"].numpy().tobytes()[:32])


def test_honest_solver_seals_its_training_and_false_truth_falsifies_the_anchor_only():
    trained = ["0x" + state_root(state_at(c)).hex() for c in range(4)]
    assert HonestSolver().sealed_true_roots(trained, 2, state_at, state_root) == trained
    lie = FalseTruthSolver().sealed_true_roots(trained, 2, state_at, state_root)
    assert [i for i in range(4) if lie[i] != trained[i]] == [2]
    assert trained == ["0x" + state_root(state_at(c)).hex() for c in range(4)]  # not mutated


def test_faulty_solver_commits_its_fault_and_says_so():
    fault = Fault("element", step=3, node=1, element=2)
    s = FaultySolver(fault=fault)
    assert s.fault == fault and not hasattr(HonestSolver(), "fault")
    assert str(fault) in s.banner and not hasattr(HonestSolver(), "banner")


class Runtime:
    """A version-1 job's runtime, recording how an honest strategy asks for an account."""

    engine = make_job((4, 3, 2), batch=2, n=8, seed=3, steps=4, interval=2).engine

    def computation(self, steps, every, **kw):
        return ("account", steps, every, kw)


class Account:
    """A stand-in of a faulty account: a claimed commitment other than the manifest's."""

    def checkpoint_commit(self) -> bytes:
        return b"\xcc" * 32

    def checkpoint_roots(self) -> list[bytes]:
        return [b"\xc0" * 32, b"\xc1" * 32]

    def state(self, t: int) -> dict:
        return state_at(t)

    def claimed_root(self, t: int) -> bytes:
        return bytes([t]) * 32


def test_faulty_solver_commits_and_defends_its_account_and_plays_no_forced_round():
    fault = Fault("count")
    honest, cheat = HonestSolver(), FaultySolver(fault=fault)
    budget = StateBudget(1 << 20)
    assert honest.computation(Runtime(), 4, 2, budget) == ("account", 4, 2, {"budget": budget})
    faulty = cheat.computation(Runtime(), 4, 2, budget)
    assert isinstance(faulty, FaultyComputation) and faulty.budget is budget
    assert (
        faulty.fault == fault
        and faulty.checkpoint_roots() == Computation(Runtime.engine, 4, 2).checkpoint_roots()
    )  # a count fault lies about the number of roots only
    assert faulty.checkpoint_commit() != Computation(Runtime.engine, 4, 2).checkpoint_commit()
    seeded: list[object] = []
    assert honest.account("fresh", seeded.append) == "fresh" and seeded == ["fresh"]
    assert cheat.account("fresh", seeded.append) == "fresh" and seeded == ["fresh"]

    async def drawn() -> tuple[int, list[int]]:  # the judge's draw, read on the loop
        return 2, [2, 3]

    assert asyncio.run(honest.forced_checkpoints(drawn)) == (2, [2, 3])
    assert asyncio.run(cheat.forced_checkpoints(drawn)) == (0, [])
    mine, true = b"\x01" * 32, b"\x02" * 32
    assert honest.commitment(mine, true, Account) == (mine, true)
    assert cheat.commitment(mine, true, Account) == (b"\xcc" * 32, b"\xcc" * 32)
    mine_at_4 = ([mine], state_at(4))
    assert honest.committed_checkpoint(lambda: mine_at_4, Account, 4) is mine_at_4
    roots, st = cheat.committed_checkpoint(lambda: mine_at_4, Account, 4)
    assert roots == Account().checkpoint_roots() and torch.equal(st["w"], state_at(4)["w"])


def test_a_faulty_training_publishes_its_accounts_claimed_roots_and_never_resumes():
    run = ClaimedTraining(Account(), every=3)
    assert run.resume(lambda: pytest.fail("a faulty run reads no published state")) is False
    steps: list[int] = []
    st, root = run.checkpoint(2, threading.Event(), steps.append)
    assert root == bytes([6]) * 32 and torch.equal(st["w"], state_at(6)["w"]) and steps == [3]
    stop = threading.Event()
    stop.set()
    with pytest.raises(TrainingStopped):
        run.checkpoint(3, stop, steps.append)


def flags(role: str, *argv: str) -> dict:
    """The role's parts as the CLI wiring picks them from its command line (--lazy, --cheat,
    ...): {"strategy": ...}, or {} for the role's honest one."""
    ns = build_parser().parse_args([role, *argv])
    return {"solver": cli.solver, "verifier": cli.verifier, "aggregator": cli.aggregator}[role](ns)


def test_flags_select_the_adversaries_and_none_means_honest():
    assert verifier_strategy(False, False) is None and solver_strategy(None, False) is None
    assert flags("verifier") == {} and flags("solver") == {} and flags("aggregator") == {}
    assert isinstance(flags("verifier", "--lazy")["strategy"], LazyVerifier)
    assert isinstance(flags("verifier", "--cheat-challenge")["strategy"], LyingVerifier)
    assert isinstance(flags("verifier", "--lazy", "--cheat-challenge")["strategy"], LazyVerifier)
    assert isinstance(flags("solver", "--false-truth")["strategy"], FalseTruthSolver)
    s = flags("solver", "--cheat", "element:step=217,node=2,element=5", "--false-truth")["strategy"]
    assert isinstance(s, FaultySolver) and s.fault == Fault("element", step=217, node=2, element=5)
    stale = flags("solver", "--stale-final", "1")["strategy"]
    assert isinstance(stale, StaleFinalSolver) and stale.checkpoint == 1


def test_the_stale_final_solver_commits_an_earlier_entry_with_its_own_proof():
    """Its final root is a real entry of the list with a valid proof of that entry (the finding
    of issue #38), never the last one's: the chain's `FinalRootNotLast` check is what stops it."""
    roots = [bytes([i]) * 32 for i in range(6)]
    root = checkpoint_root(roots)
    assert HonestSolver().final_root(roots) == (roots[5], final_proof(roots))
    final, proof = StaleFinalSolver(checkpoint=1).final_root(roots)
    assert final == roots[1]
    assert verify_list_proof(CHECKPOINT_DOMAIN, root, 6, ListProof(1, final, proof))
    assert not verify_list_proof(CHECKPOINT_DOMAIN, root, 6, ListProof(5, final, proof))


def test_a_bad_cheat_is_a_role_error():
    with pytest.raises(RoleError, match="kind must be one of"):
        parse_cheat("gremlin:step=1")
    with pytest.raises(RoleError, match="bad field"):
        parse_cheat("element:stp=1")


def test_honest_aggregator_commits_and_publishes_its_own_and_the_cheat_does_not():
    address = "0x" + "ab" * 32
    honest = HonestAggregator()
    assert honest.aggregate_to_commit(STATE) is STATE
    assert honest.published_address(address) == address and not hasattr(honest, "banner")
    wrong = CheatingAggregator(corrupts=True)
    g = wrong.aggregate_to_commit(STATE)
    assert int((g["w"] != STATE["w"]).sum()) == 1 and g["w"][5] == STATE["w"][5] + 0.5
    assert wrong.published_address(address) == address  # it publishes its (wrong) blob
    hidden = CheatingAggregator(withholds=True)
    assert hidden.aggregate_to_commit(STATE) is STATE
    assert hidden.published_address(address) != address
    assert hidden.published_address(address) == hidden.published_address(address)  # a restart
    both = flags("aggregator", "--cheat", "--withhold")["strategy"]
    assert both.corrupts and both.withholds and "changed" in both.banner
    assert aggregator_strategy(False, False) is None
