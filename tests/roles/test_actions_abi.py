"""Every chain action of the roles (agents/roles/actions.py) maps to a function its contract's
exported ABI has (build/abi), with the arguments it names, and every dispute-game move the
players make is one the executor lets through (`GAME_MOVES`). No chain: contracts bound from
the ABIs to a provider-less Web3 (a function the ABI lacks raises ABIFunctionNotFound)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from web3 import Web3

from agents.core.bindings import bind
from agents.core.deploy import DEFAULT_ABI_DIR
from agents.core.tx import TxRequest
from agents.dispute.availability import Header, HeaderPart, Sample
from agents.dispute.player import Move
from agents.roles import actions as a

ROOT = Path(__file__).resolve().parents[2]
U, J, R = 7 << 32, 7, b"\x11" * 32
PEER = "0x" + "22" * 20
ADDRESSES = {
    "manager": ("JobManager", "0x" + "01" * 20),
    "registry": ("NodeRegistry", "0x" + "02" * 20),
    "token": ("TestToken", "0x" + "03" * 20),
    "game": ("DisputeGame", "0x" + "04" * 20),
    "judge": ("ForcedErrorJudge", "0x" + "05" * 20),
    "court": ("AttestationCourt", "0x" + "06" * 20),
    "court_game": ("DisputeGame", "0x" + "07" * 20),
    "round_manager": ("RoundManager", "0x" + "08" * 20),
    "round_game": ("DisputeGame", "0x" + "09" * 20),
}
MOVE = Move("pickSegment", (3, (R, []), (R, [])))


def _zero(t: dict) -> object:
    """A value of ABI type `t` (an input entry): zeros, empty arrays, tuples of them."""
    kind = t["type"]
    if kind.endswith("]"):
        size = kind[kind.rindex("[") + 1 : -1]
        item = {**t, "type": kind[: kind.rindex("[")]}
        return [_zero(item)] * int(size) if size else []
    if kind == "tuple":
        return tuple(_zero(c) for c in t["components"])
    if kind.startswith(("uint", "int")):
        return 0
    if kind == "address":
        return "0x" + "00" * 20
    if kind == "bool":
        return False
    if kind == "string":
        return ""
    return b"" if kind == "bytes" else bytes(int(kind[5:]))


def sample(contract: str, function: str) -> tuple:
    """ABI-ready values of `function`'s arguments after its first (an id)."""
    abi = json.loads((DEFAULT_ABI_DIR / f"{contract}.json").read_text())["abi"]
    (entry,) = [e for e in abi if e.get("type") == "function" and e["name"] == function]
    return tuple(_zero(i) for i in entry["inputs"])


HEADERS = HeaderPart(0, (Header(R, 1, 2, 3, R),), (R,))
SAMPLE = Sample(1, 2, 3, R, (R,), bytes(256), (R, R))
PARAMS = sample("JobManager", "postJob")
REVEAL = sample("ForcedErrorJudge", "revealForced")[1]
ROUND_PARAMS = sample("RoundManager", "postJob")
LAYOUT = sample("RoundManager", "commitAggregate")[1]
FRAUD = sample("RoundManager", "proveAggregationFraud")[1:]
ASK = sample("RoundManager", "requestAggregateReveal")[1:]
ANSWER = sample("RoundManager", "revealAggregateLeaf")[1:]

#: (action, the contract it goes to, its function, its arguments)
CASES = [
    (a.CloseClaims("close:1", U), "manager", "closeClaims", (U,)),
    (a.SelectAssignee("select:1", U), "manager", "selectAssignee", (U,)),
    (a.DrawVerifiers("draw:1", U), "manager", "drawVerifiers", (U,)),
    (a.Finalize("finalize:1", U), "manager", "finalize", (U,)),
    (a.SettleDispute("settle:1", U), "manager", "settleDispute", (U,)),
    (a.ExpireDataRequest("expire-data:1", U), "manager", "expireDataRequest", (U,)),
    (a.ExpireAssignment("expire:1", U), "manager", "expireAssignment", (U,)),
    (a.RequestData("request-data:1", U, 10), "manager", "requestData", (U, 10)),
    (a.ClaimWithSecret("claim:1", U, R), "manager", "claim", (U, R)),
    (
        a.CommitCheckpoints("commit:1", U, R, 11, R, [R, R], "http://x/y", R),
        "manager", "commitCheckpoints", (U, R, 11, R, [R, R], "http://x/y", R),
    ),
    (a.SealAttestation("seal:1", U, R), "manager", "sealAttestation", (U, R)),
    (a.AttestRoots("attest:1", U, (R, R), R), "manager", "attest", (U, [R, R], R)),
    (a.ChallengeUnit("challenge:1", U, R), "manager", "challenge", (U, R)),
    (a.OpenDataState("open-data:1", U, 4, R, (R,)), "manager", "openDataState", (U, 4, R, [R])),
    (
        a.OpenDataHeaders("open-headers:1:0", U, HEADERS), "manager", "openDataHeaders",
        (U, *HEADERS.args()),
    ),
    (
        a.ProveDataSamples("prove-data:1:9:0", U, (SAMPLE,), "http://x/y#0x01"), "manager",
        "proveDataSamples", (U, [SAMPLE.args()], "http://x/y#0x01"),
    ),
    (a.OfferData("offer-data:1:0", U, "http://x/y#0x01"), "manager", "offerData",
     (U, "http://x/y#0x01")),
    (a.PostJob("post:1", *PARAMS), "manager", "postJob", PARAMS),
    (a.Withdraw("withdraw:1"), "manager", "withdraw", ()),
    (a.Approve("approve:1", PEER, 5), "token", "approve", (PEER, 5)),
    (a.Register("register", 1, (0, 4096, 1000), 5), "registry", "register",
     (1, (0, 4096, 1000), 5)),
    (a.AddStake("node:add-stake:1", 5), "registry", "addStake", (5,)),
    (a.RequestUnbond("node:unbond:1", 5), "registry", "requestUnbond", (5,)),
    (a.SetNetwork("node:set-network:1", 1000, 0x0101), "registry", "setNetwork", ((1000, 0x0101),)),
    (a.WithdrawUnbonded("node:withdraw-unbonded:1"), "registry", "withdrawUnbonded", ()),
    (a.Heartbeat("heartbeat:1"), "registry", "heartbeat", ()),
    (a.RevealForced("reveal:1", U, REVEAL), "judge", "revealForced", (U, REVEAL)),
    (a.ReportPrematureReveal("premature:1", U, R), "judge", "reportPrematureReveal", (U, R)),
    (
        a.ChallengeAttestation("court:1", U, PEER, 1, (R, R), R, (R,)),
        "court", "challengeAttestation", (U, PEER, 1, [R, R], R, [R]),
    ),
    (a.WithdrawCourt("court-withdraw:1"), "court", "withdraw", ()),
    (a.GameMove("game:5:move:1", 5, MOVE), "game", "pickSegment", (5, *MOVE.args)),
    (a.GameMove("court-game:5:move:1", 5, MOVE, a.Arena.COURT), "court_game", "pickSegment",
     (5, *MOVE.args)),
    (a.GameMove("round-game:5:move:1", 5, MOVE, a.Arena.ROUND), "round_game", "pickSegment",
     (5, *MOVE.args)),
    (a.ClaimTimeout("game:5:timeout", 5), "game", "claimTimeout", (5,)),
    (a.ClaimTimeout("court-game:5:timeout", 5, a.Arena.COURT), "court_game", "claimTimeout",
     (5,)),
    (a.ClaimTimeout("round-game:5:timeout", 5, a.Arena.ROUND), "round_game", "claimTimeout",
     (5,)),
    (a.PostRoundJob("post:1", *ROUND_PARAMS), "round_manager", "postJob", ROUND_PARAMS),
    (a.FinalizeRound("finalizeRound:1", J), "round_manager", "finalizeRound", (J,)),
    (a.CommitAggregate("aggregate:1", J, LAYOUT, (R,), "http://x/y"), "round_manager",
     "commitAggregate", (J, LAYOUT, [R], "http://x/y")),
    (a.ProveAggregationFraud("fraud:1", J, FRAUD), "round_manager", "proveAggregationFraud",
     (J, *FRAUD)),
    (a.ChallengeAggregate("challenge-aggregate:1", J), "round_manager", "challengeAggregate",
     (J,)),
    (a.ClaimAggregateWithheld("withheld:1", J), "round_manager", "claimAggregateWithheld", (J,)),
    (a.RequestAggregateReveal("reveal:1", J, ASK), "round_manager", "requestAggregateReveal",
     (J, *ASK)),
    (a.RevealAggregateLeaf("reveal-answer:1", J, ANSWER), "round_manager", "revealAggregateLeaf",
     (J, *ANSWER)),
    (a.ReclaimRevealBond("reclaim:1", J, 2, 0), "round_manager", "reclaimRevealBond", (J, 2, 0)),
    (a.WithdrawRounds("rm-withdraw:1"), "round_manager", "withdraw", ()),
]  # fmt: skip


@pytest.fixture(scope="module")
def contracts() -> SimpleNamespace:
    w3 = Web3()
    return SimpleNamespace(
        **{attr: bind(w3, name, address) for attr, (name, address) in ADDRESSES.items()}
    )


def test_every_chain_action_type_has_a_case():
    assert {type(case[0]) for case in CASES} == set(a.CHAIN_ACTIONS)


def _name(value: object) -> str:
    return type(value).__name__ if isinstance(value, a.ChainAction) else ""


@pytest.mark.parametrize(("action", "target", "function", "args"), CASES, ids=_name)
def test_a_chain_action_calls_its_contract_function_with_its_arguments(
    contracts, action, target, function, args
):
    fn = action.tx(contracts)  # ABIFunctionNotFound when the contract has no such function
    assert (fn.address, fn.fn_name) == (getattr(contracts, target).address, function)
    assert tuple(fn.args) == args
    assert TxRequest.call(fn).to == fn.address  # it encodes, as the executor sends it


def test_game_moves_are_the_dispute_games_functions_and_the_players_make_no_other():
    abi = json.loads((DEFAULT_ABI_DIR / "DisputeGame.json").read_text())["abi"]
    functions = {e["name"] for e in abi if e.get("type") == "function"}
    assert functions >= a.GAME_MOVES
    made = set()
    players = [*(ROOT / "agents/dispute").glob("*.py"), *(ROOT / "agents/adversaries").glob("*.py")]
    for path in players:
        made |= set(re.findall(r'Move\(\s*"(\w+)"', path.read_text()))
    assert made and made <= a.GAME_MOVES


def test_a_move_naming_no_game_move_is_refused_before_it_is_built(contracts):
    with pytest.raises(ValueError, match="no dispute game move"):
        a.GameMove("game:5:move:1", 5, Move("withdraw", ())).tx(contracts)


def test_a_court_action_without_a_court_says_so(contracts):
    bare = SimpleNamespace(**{**vars(contracts), "court": None, "court_game": None})
    with pytest.raises(ValueError, match="AttestationCourt"):
        a.WithdrawCourt("court-withdraw:1").tx(bare)
    with pytest.raises(ValueError, match="AttestationCourt"):
        a.ClaimTimeout("court-game:5:timeout", 5, a.Arena.COURT).tx(bare)
