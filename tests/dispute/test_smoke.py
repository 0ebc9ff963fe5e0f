from __future__ import annotations

from dispute_fixtures import advance, make_job, open_game

from agents.dispute.client import run_game
from agents.dispute.player import Challenger, Defender
from agents.dispute.trace import Fault


def test_element_fault(dep, chain, snapshot):
    job = make_job((5, 4, 3), 3, 20, 7, 4, 2)
    honest = job.honest(4, 2)
    liar = job.party(4, 2, Fault("element", step=1, node=5, element=2, mask=0x00400000))
    gid = open_game(dep, job, liar, honest)
    rec = run_game(
        gid,
        (Defender(liar, job.jg), dep.defender),
        (Challenger(honest, job.jg), dep.challenger),
        advance(chain),
    )
    print(rec)
    assert rec.challenger_won and not rec.by_timeout
