"""Jackpot split (Sybil table), sustainability and the seeded projection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.economics import forced, jackpot
from agents.economics.params import Protocol, reference_jobs

PROTO = Protocol()


@given(st.integers(1, 12), st.integers(0, 12), st.floats(0.1, 1e6))
def test_truebit_split_never_rewards_sybils(s: int, h: int, j: float) -> None:
    one = jackpot.party_payout(jackpot.split_truebit, j, 1, h)
    assert jackpot.party_payout(jackpot.split_truebit, j, s, h) <= one * (1 + 1e-12)
    # and the round never pays more than J
    k = s + h
    assert k * jackpot.split_truebit(j, k) <= j * (1 + 1e-12)


def test_other_rules_reward_sybils() -> None:
    rows = jackpot.sybil_table(1.0)
    gain = {
        r["rule"]: max(x["gain_vs_one_identity"] for x in rows if x["rule"] == r["rule"])
        for r in rows
    }
    assert gain["truebit"] == 0.0
    assert gain["equal"] > 0.0  # against one honest co-catcher: 2/3 > 1/2
    assert gain["none"] > 0.0
    eq = {
        (r["honest_others"], r["sybils"]): r["party_payout"] for r in rows if r["rule"] == "equal"
    }
    assert eq[(1, 2)] == pytest.approx(2 / 3)


def test_sustainability_condition() -> None:
    for job, _ in reference_jobs():
        sus = jackpot.sustainability(job, PROTO)
        assert sus.sustainable and sus.drift > 0
        assert sus.outflow_expected <= sus.outflow_bound + 1e-12
        assert sus.max_fee_share == pytest.approx(0.02 / 0.05)
        # at exactly the fee cap the bound binds
        edge = job.with_(fee=sus.max_fee_share * job.reward)
        assert jackpot.sustainability(edge, PROTO).outflow_bound == pytest.approx(
            PROTO.tax * job.reward
        )


def test_expected_outflow_for_two_catchers() -> None:
    job, _ = reference_jobs()[0]
    j = forced.jackpot_payout(job, PROTO)
    # both catch: 2 * J/2; one: J; none: 0  -> J * (1 - (1-c)^2)
    c = 0.4
    assert jackpot.expected_outflow_per_round(job, PROTO, c) == pytest.approx(j * (1 - 0.6**2))


def test_projection_is_seeded_and_tracks_the_drift() -> None:
    job, _ = reference_jobs()[0]
    a = jackpot.project_balance(job, PROTO, 2000, seed=7, paths=20)
    b = jackpot.project_balance(job, PROTO, 2000, seed=7, paths=20)
    assert a == b
    mean_expected = 2000 * jackpot.sustainability(job, PROTO).drift
    assert abs(a["final_balance_p50"] - mean_expected) < 0.25 * mean_expected
    lazy = jackpot.project_balance(job, PROTO, 2000, seed=7, paths=20, lazy_share=0.5)
    assert lazy["final_balance_p50"] > a["final_balance_p50"]  # slashes feed the jackpot
