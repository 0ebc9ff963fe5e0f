"""The job view of `job status` and `submit` (agents/roles/job_view.py): facts in, text out —
disputes folded from their events, the window each unit phase waits on and the chain time left,
the plain and the rich rendering, what a followed job is reprinted for."""

from __future__ import annotations

import json

import pytest
import torch
from rich.console import Console

from agents.core.enums import JobStatus, UnitStatus
from agents.roles import job_view as jv
from agents.training.state import init_state, torch_state_dict

SOLVER = "0x" + "ab" * 20
CHALLENGER = "0x" + "cd" * 20
REQUESTER = "0x" + "ef" * 20
UNIT = 7 << 32


def _unit(status: UnitStatus, **kw) -> jv.UnitFacts:
    base = dict(unit_id=UNIT, status=status, attempt=0, assignee=SOLVER, deadline=1_000,
                seed_block=50, final_root=b"\x01" * 32)  # fmt: skip
    return jv.UnitFacts(**{**base, **kw})


def _facts(units, disputes=(), status=JobStatus.OPEN, now=988, block=48) -> jv.JobFacts:
    return jv.JobFacts(
        job_id=7, status=status, submitter=REQUESTER, reward=100 * jv.TOKEN,
        verification_fee=10 * jv.TOKEN, escrow=100 * jv.TOKEN, steps=400, checkpoint_every=40,
        spec_hash=b"\x02" * 32, units=tuple(units), disputes=tuple(disputes), block=block,
        now=now,
    )  # fmt: skip


def test_disputes_fold_games_and_data_requests_with_their_winners():
    events = [
        ("ChallengeOpened", {"unitId": UNIT, "challenger": CHALLENGER, "gameId": 3}),
        ("DisputeResolved", {"unitId": UNIT, "gameId": 3, "challengerWon": True}),
        ("ChallengeOpened", {"unitId": UNIT, "challenger": CHALLENGER, "gameId": 4}),
        ("DataRequested", {"unitId": UNIT, "requester": REQUESTER, "answerDeadline": 900}),
        ("DisputeResolved", {"unitId": UNIT, "gameId": 4, "challengerWon": False}),
        # a checksummed address in one event, lower case in another: the same requester
        ("DataRequestAnswered", {"unitId": UNIT, "requester": "0x" + REQUESTER[2:].upper()}),
        ("ChallengeOpened", {"unitId": UNIT, "challenger": CHALLENGER, "gameId": 5}),
        ("DisputeResultHeld", {"unitId": UNIT, "gameId": 5, "until": 1_200}),
        ("ChallengeOpened", {"unitId": UNIT, "challenger": CHALLENGER, "gameId": 6}),
        ("DisputeVoided", {"unitId": UNIT, "gameId": 6, "challenger": CHALLENGER}),
        ("DataRequested", {"unitId": UNIT, "requester": REQUESTER, "answerDeadline": 1_300}),
        ("DataRequestExpired", {"unitId": UNIT, "requester": REQUESTER}),
        ("DataRequested", {"unitId": UNIT, "requester": REQUESTER, "answerDeadline": 1_400}),
        ("DisputeResolved", {"unitId": UNIT, "gameId": 99, "challengerWon": True}),  # unseen
    ]
    got = [(d.kind, d.game_id, d.outcome, d.until) for d in jv.disputes_from_events(events)]
    assert got == [
        ("game", 3, "challenger won", 0),
        ("game", 4, "solver won", 0),
        ("data request", 0, "answered", 0),
        ("game", 5, "held", 1_200),
        ("game", 6, "voided", 0),
        ("data request", 0, "expired", 0),
        ("data request", 0, "open", 1_400),
    ]
    assert all(o in jv.OUTCOMES for _, _, o, _ in got)


@pytest.mark.parametrize(
    ("unit", "window", "left"),
    [
        (_unit(UnitStatus.OPEN), "claim window", "12s left"),
        (_unit(UnitStatus.OPEN, deadline=900), "claim window", "closed 1m28s ago"),
        (_unit(UnitStatus.SELECTING), "assignee drawn after", "in 3 blocks"),
        (_unit(UnitStatus.SELECTING, seed_block=40), "assignee drawn after", "due"),
        (_unit(UnitStatus.ASSIGNED, deadline=988 + 7_380), "training, commit by", "2h03m left"),
        (_unit(UnitStatus.COMMITTED, seed_block=48), "verifiers drawn after", "in 1 block"),
        (_unit(UnitStatus.VERIFYING), "challenge window", "12s left"),
        (_unit(UnitStatus.DISPUTED), "dispute game running", ""),
        (_unit(UnitStatus.DISPUTED, held_until=1_100), "challenger's win held until", "1m52s left"),
        (
            _unit(UnitStatus.DISPUTED, answer_deadline=988 + 90_000),
            "data request, answer by",
            "1d01h left",
        ),  # fmt: skip
        (_unit(UnitStatus.FINALIZED), None, ""),
        (_unit(UnitStatus.CANCELLED), None, ""),
    ],
)
def test_each_phase_shows_the_window_it_waits_on_in_chain_time(unit, window, left):
    w = jv.unit_window(unit)
    assert (w.name if w else None) == window
    assert jv.time_left(w, now=988, block=48) == left


def test_plain_view_shows_phases_disputes_winners_and_time_left():
    disputes = [jv.DisputeFacts(UNIT, "game", CHALLENGER, 3, "challenger won")]
    text = jv.render_text(_facts([_unit(UnitStatus.VERIFYING, attempt=1)], disputes))
    lines = text.splitlines()
    assert lines[0].startswith("job 7: open · reward 100 (verification fee 10) · escrow 100")
    header, row = lines[2].split(), lines[3].split()
    assert header == ["unit", "phase", "attempt", "solver", "window", "time", "left"]
    assert row == ["0", "verifying", "2", "0xababab…abab", "challenge", "window", "12s", "left"]
    assert lines[-1].split() == ["0", "game", "0xcdcdcd…cdcd", "3", "challenger", "won"]
    done = jv.render_text(_facts([_unit(UnitStatus.FINALIZED)], status=JobStatus.COMPLETED))
    assert done.splitlines()[0].startswith("job 7: completed")
    assert done.splitlines()[-1] == "no disputes"


def test_rich_view_holds_the_same_cells():
    disputes = [jv.DisputeFacts(UNIT, "data request", REQUESTER, 0, "open", until=1_000)]
    facts = _facts([_unit(UnitStatus.DISPUTED, answer_deadline=1_000)], disputes)
    console = Console(record=True, width=160, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(jv.render_rich(facts))
    text = console.export_text()
    for cell in ("disputed", "data request, answer by", "12s left", "open (until 1000: 12s left)",
                 "job 7: open"):  # fmt: skip
        assert cell in text, cell


def test_a_followed_job_is_reprinted_when_a_phase_changes_not_when_the_clock_moves():
    before = _facts([_unit(UnitStatus.VERIFYING)])
    later = _facts([_unit(UnitStatus.VERIFYING)], now=999, block=60)
    moved = _facts([_unit(UnitStatus.DISPUTED)], now=999, block=60)
    assert jv.change_key(before) == jv.change_key(later)
    assert jv.change_key(before) != jv.change_key(moved)
    won = _facts([_unit(UnitStatus.DISPUTED)], [jv.DisputeFacts(UNIT, "game", SOLVER, 1, "held")])
    assert jv.change_key(moved) != jv.change_key(won)


def test_json_view_names_enums_and_hex():
    obj = json.loads(json.dumps(jv.facts_json(_facts([_unit(UnitStatus.ASSIGNED)]))))
    assert obj["status"] == "open" and obj["units"][0]["status"] == "assigned"
    assert obj["units"][0]["final_state_root"] == "0x" + "01" * 32
    assert obj["units"][0]["window"] == "training, commit by"


def test_mlp_weights_load_into_the_plain_pytorch_mlp():
    widths = (6, 5, 3)
    st = init_state(widths, seed=3)
    st["b0"] = torch.arange(5, dtype=torch.float32).reshape(1, 5)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    model.load_state_dict(torch_state_dict(st, widths))  # strict: every key, every shape
    x = torch.randn(4, 6)
    want = torch.relu(x @ st["w0"].T + st["b0"]) @ st["w1"].T + st["b1"]
    assert torch.allclose(model(x), want)
