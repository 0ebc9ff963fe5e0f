"""The jackpot: how a payout is split among catchers (and why), and whether it stays solvent.

Split rule (Truebit's): k catchers of one forced round get J / 2^(k-1) each, so the round
pays k J / 2^(k-1) <= J in total (J for k = 1, 2; 3J/4 for k = 3; ...) and the rest stays in
the jackpot. A party that controls s of the k catchers (s Sybil identities) earns
s J / 2^(k-1), which never grows with s: splitting one identity into many earns nothing
(`sybil_table`). An equal split J / k would let a party out-vote honest co-catchers (s / (s+h)
grows with s); no split (J each) would pay a party s J.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import comb

import numpy as np

from agents.economics import forced
from agents.economics.params import Job, Protocol

SplitRule = Callable[[float, int], float]


def split_truebit(jackpot: float, k: int) -> float:
    """Per-catcher payout J / 2^(k-1)."""
    return jackpot / 2 ** (k - 1) if k >= 1 else 0.0


def split_equal(jackpot: float, k: int) -> float:
    """Per-catcher payout J / k (for comparison: rewards Sybils against honest co-catchers)."""
    return jackpot / k if k >= 1 else 0.0


def split_none(jackpot: float, k: int) -> float:
    """Per-catcher payout J (for comparison: pays a party s J for s identities)."""
    return jackpot if k >= 1 else 0.0


RULES: dict[str, SplitRule] = {"truebit": split_truebit, "equal": split_equal, "none": split_none}


def party_payout(rule: SplitRule, jackpot: float, sybils: int, honest_others: int) -> float:
    """Total paid to one party that catches with `sybils` identities beside `honest_others`."""
    return sybils * rule(jackpot, sybils + honest_others)


def sybil_table(jackpot: float, max_sybils: int = 4, max_others: int = 2) -> list[dict]:
    """Party payout and its gain over using one identity, per rule, s and h."""
    rows = []
    for name, rule in RULES.items():
        for h in range(max_others + 1):
            base = party_payout(rule, jackpot, 1, h)
            for s in range(1, max_sybils + 1):
                pay = party_payout(rule, jackpot, s, h)
                rows.append(
                    {
                        "rule": name,
                        "honest_others": h,
                        "sybils": s,
                        "party_payout": pay,
                        "gain_vs_one_identity": pay - base,
                        "round_total_paid": (s + h) * rule(jackpot, s + h),
                    }
                )
    return rows


def expected_outflow_per_round(job: Job, proto: Protocol, catch: float) -> float:
    """Jackpot paid per forced round when each of v verifiers catches with probability `catch`.

    E[k J / 2^(k-1)] over k ~ Binomial(v, catch) (independent samples).
    """
    jackpot = forced.jackpot_payout(job, proto)
    v = job.verifiers
    total = 0.0
    for k in range(1, v + 1):
        prob = comb(v, k) * catch**k * (1 - catch) ** (v - k)
        total += prob * k * split_truebit(jackpot, k)
    return total


@dataclass(frozen=True)
class Sustainability:
    """Per unit, tokens: jackpot inflow and outflow in the honest equilibrium."""

    inflow: float
    outflow_bound: float
    outflow_expected: float
    max_fee_share: float

    @property
    def drift(self) -> float:
        return self.inflow - self.outflow_expected

    @property
    def sustainable(self) -> bool:
        """Inflow covers the worst-case outflow p/(1-p) x J."""
        return self.inflow >= self.outflow_bound


def sustainability(job: Job, proto: Protocol) -> Sustainability:
    """Inflow tax x W per unit (no slashes in the honest equilibrium; they only add).

    Outflow: p forced rounds per unit, each paying at most J (the split's total is <= J). The
    job is self-funding iff tax W >= p J, i.e. (J = fee) the fee is at most tax / p of the
    reward (`max_fee_share`, 40 % at the defaults): the check postJob makes.
    """
    p = proto.forced_error_rate
    rounds = forced.forced_rounds_per_unit(p)
    jackpot = forced.jackpot_payout(job, proto)
    rho = forced.perturb_rate(job.segments_per_verifier)
    catch = forced.catch_lower_bound(job.segments_per_verifier, rho)
    nonempty = forced.perturbed_nonempty(job.segments, rho)
    max_share = proto.tax / (p * proto.jackpot_fee_multiple) if p > 0 else float("inf")
    return Sustainability(
        inflow=proto.tax * job.reward,
        outflow_bound=rounds * jackpot,
        outflow_expected=rounds * nonempty * expected_outflow_per_round(job, proto, catch),
        max_fee_share=max_share,
    )


def project_balance(
    job: Job,
    proto: Protocol,
    units: int,
    seed: int,
    initial: float = 0.0,
    paths: int = 100,
    lazy_share: float = 0.0,
) -> dict:
    """Seeded Monte-Carlo of the jackpot balance over `units` units of `job`.

    Each unit pays tax W in; its round is forced with probability p; in a forced round each
    verifier's sample is perturbed with the lower-bound catch probability; an
    honest one is then a catcher, a lazy one (a share `lazy_share`) is wrong and its slash S
    goes wholly to the jackpot (no challenger is involved). The k catchers are paid
    J / 2^(k-1) each, in total at most the balance (what is left when short).
    Returns the balance percentiles at the end, the minimum, and the share of forced-round
    payouts that could not be paid in full.
    """
    rng = np.random.default_rng(seed)
    p = proto.forced_error_rate
    jackpot = forced.jackpot_payout(job, proto)
    slash = forced.lazy_slash(job, proto)
    rho = forced.perturb_rate(job.segments_per_verifier)
    catch = forced.catch_lower_bound(job.segments_per_verifier, rho)
    tax = proto.tax * job.reward
    finals, minima, short, rounds_total = [], [], 0, 0
    for _ in range(paths):
        balance, low = initial, initial
        forced_rounds = rng.random(units) < p
        for f in forced_rounds:
            balance += tax
            for _ in range(int(f)):
                rounds_total += 1
                lazy = rng.random(job.verifiers) < lazy_share
                caught = rng.random(job.verifiers) < catch
                balance += slash * int(np.sum(lazy & caught))
                k = int(np.sum(~lazy & caught))
                due = k * split_truebit(jackpot, k)
                if due > balance:
                    short += 1
                    due = balance
                balance -= due
                low = min(low, balance)
        finals.append(balance)
        minima.append(low)
    finals_a = np.array(finals)
    return {
        "units": units,
        "paths": paths,
        "seed": seed,
        "initial_balance": initial,
        "lazy_share": lazy_share,
        "expected_drift_per_unit": sustainability(job, proto).drift,
        "final_balance_p5": float(np.percentile(finals_a, 5)),
        "final_balance_p50": float(np.percentile(finals_a, 50)),
        "final_balance_p95": float(np.percentile(finals_a, 95)),
        "min_balance_p5": float(np.percentile(np.array(minima), 5)),
        "forced_rounds": rounds_total,
        "forced_rounds_short_paid_share": short / rounds_total if rounds_total else 0.0,
    }
