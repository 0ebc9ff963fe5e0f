"""Expected profit per unit of each verifier and solver strategy.

Verifier payoffs are per unit it is drawn for (one verification round, forced with
probability p). They are conservative *bounds*: the honest verifier
is credited the least it can get (the smallest catch probability, the smallest jackpot share,
k = v catchers) and each deviation the most it can get, so `honest - deviation` is a lower
bound on the real advantage. The honest solver is assumed to be the counterpart (no real cheat
to find, no challenger reward): the verifier's dilemma at its worst.

Solver payoffs are per unit: cheating in b of n segments saves b/n of the training and is
caught (collateral slashed, no pay) with probability at least (1 - p) D, D the detection
probability of the honest replays (detection.detection_probability); forced rounds (rate p)
are counted as catching nothing, which understates detection (forced.forced_detection_spread).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.economics import detection, forced
from agents.economics.params import Costs, Job, Protocol


@dataclass(frozen=True)
class VerifierPayoffs:
    """Per round, tokens. `advantage` = honest minus the best deviation (a lower bound)."""

    honest: float
    lazy: float
    skip_one: float | None
    guess_disagree: float
    abstain: float

    @property
    def best_deviation(self) -> float:
        dev = [self.lazy, self.guess_disagree, self.abstain]
        if self.skip_one is not None:
            dev.append(self.skip_one)
        return max(dev)

    @property
    def advantage(self) -> float:
        return self.honest - self.best_deviation


@dataclass(frozen=True)
class _Terms:
    """What a drawn verifier's strategies are priced in: p, its fee share F, one replay c_r, the
    lock S, the jackpot payout J, the share J / 2^(v-1) of v catchers, the challenge bond B."""

    p: float
    fee: float
    c_r: float
    slash: float
    jackpot: float
    share: float
    bond: float

    @staticmethod
    def of(
        job: Job, costs: Costs, proto: Protocol, jackpot_available: bool, slash: float | None
    ) -> _Terms:
        jackpot = forced.jackpot_payout(job, proto) if jackpot_available else 0.0
        return _Terms(
            p=proto.forced_error_rate,
            fee=job.fee_per_verifier,
            c_r=costs.replay_segment(job),
            slash=forced.lazy_slash(job, proto) if slash is None else slash,
            jackpot=jackpot,
            share=jackpot / 2 ** (job.verifiers - 1),
            bond=job.challenge_bond(proto),
        )

    def replay_bounds(
        self, m: int, catch: float, skip_risk: float
    ) -> tuple[float, float, float | None]:
        """(honest, lazy, skip_one) for a verifier judged in a forced round with probability at
        least `catch` (honest: a catcher; lazy: WRONG), and wrong with probability at least
        `skip_risk` when it skips one of its m segments (None for m = 1)."""
        honest = self.fee + self.p * catch * self.share - m * self.c_r
        lazy = self.fee - self.p * catch * (self.fee + self.slash)
        if m < 2:
            return honest, lazy, None
        return (
            honest,
            lazy,
            honest + self.c_r - self.p * skip_risk * (self.fee + self.slash + self.share),
        )


def verifier_payoffs(
    job: Job,
    costs: Costs,
    proto: Protocol,
    jackpot_available: bool = True,
    slash: float | None = None,
    anchored: bool = False,
) -> VerifierPayoffs:
    """Bounds on a drawn verifier's expected profit per round for each strategy.

    - honest: replays its m segments, flags right: the fee F, plus, in a forced round, as a
      catcher (probability >= catch_lb) a share >= J / 2^(v-1). Minus m c_r.
    - lazy: agrees on everything without replaying: F, except in a forced round where it is
      wrong (probability >= catch_lb): no fee and slashed S.
    - skip_one: replays m - 1 segments, agrees on the last; saves c_r, and is wrong where the
      honest verifier is a catcher with probability >= skip_risk_lb (generic samples), losing
      F, S and the share: honest - skip_one >= p * skip_risk_lb * (F + S + J_h) - c_r.
    - guess_disagree: disagrees on everything without replaying. Non-forced: its challenge loses
      the dispute game, bond B forfeited (`Job.challenge_bond`: max(floor, challenger share x
      X)), no fee. Forced: right only if every sampled segment is perturbed (probability <=
      mu = 1 - (1 - rho)^2, that of one segment), paid at most F + J; else slashed S.
    - abstain: neither attests nor challenges: its lock S is slashed (PROTOCOL §6.7).
    `jackpot_available=False` sets J = 0 (an empty jackpot): dominance must survive it.
    `slash` overrides the lock rule's S (sweeps at a fixed slash).
    `anchored=True` prices the mechanism the contracts deploy (PROTOCOL §8.1): besides the rho
    draws a forced round always perturbs an anchor checkpoint (`forced.anchored_*`), which only
    raises the catch probability, leaves the skip risk at the model's bound once n >= 2m, and
    raises guess_disagree's mu by the anchor's 2/(n-1) (an upper bound).
    """
    m, n = job.segments_per_verifier, job.segments
    rho = forced.perturb_rate(m)
    t = _Terms.of(job, costs, proto, jackpot_available, slash)
    mu = forced.masked_probability(rho) if m >= 2 else rho
    if anchored:
        catch = forced.anchored_catch_lower_bound(m, n)
        risk = forced.anchored_skip_risk_lower_bound(m, n)
        mu = min(1.0, mu + 2 / max(n - 1, 1))
    else:
        catch, risk = forced.catch_lower_bound(m, rho), forced.skip_risk_lower_bound(m, rho)
    honest, lazy, skip_one = t.replay_bounds(m, catch, risk)
    guess = t.p * (mu * (t.fee + t.jackpot) - (1 - mu) * t.slash) - (1 - t.p) * t.bond
    return VerifierPayoffs(honest, lazy, skip_one, guess, -t.slash)


def verifier_without_forced_errors(job: Job, costs: Costs) -> tuple[float, float]:
    """(honest, lazy) profit per round with p = 0 and an honest solver: the dilemma itself.

    Lazy earns the fee for nothing; honest earns the fee minus m c_r; laziness wins.
    """
    fee = job.fee_per_verifier
    return fee - job.segments_per_verifier * costs.replay_segment(job), fee


@dataclass(frozen=True)
class SolverOutcome:
    """A solver strategy's expected profit per unit and its probability of being caught."""

    cheated_segments: int
    fraction: float
    detection: float
    profit: float


def solver_honest(job: Job, costs: Costs, proto: Protocol) -> float:
    """Payout - c_t - p x (forced-round overhead)."""
    forced_cost = forced.forced_rounds_per_unit(proto.forced_error_rate) * costs.forced_overhead
    return job.payout(proto) - costs.train * (1.0 + forced_cost)


def solver_cheat(
    job: Job, costs: Costs, proto: Protocol, cheated: int, detect: float | None = None
) -> SolverOutcome:
    """Cheat in `cheated` of n segments (skip their training, publish made-up end roots).

    profit = (1 - D) * payout - D * X - (1 - b/n) * c_t - forced overhead, with D =
    (1 - p) x the detection probability by the v honest verifiers (a lower bound: forced rounds
    counted as catching nothing), or `detect` if given (lazy or colluding verifiers). Caught:
    collateral X slashed, no pay, the training already spent is lost.
    """
    n = job.segments
    p = proto.forced_error_rate
    d = (
        (1 - p)
        * detection.detection_probability(n, job.segments_per_verifier, job.verifiers, cheated)
        if detect is None
        else detect
    )
    frac = cheated / n
    forced_cost = forced.forced_rounds_per_unit(p) * costs.forced_overhead
    profit = (
        (1 - d) * job.payout(proto)
        - d * job.collateral(proto)
        - (1 - frac) * costs.train
        - costs.train * forced_cost
    )
    return SolverOutcome(cheated, frac, d, profit)


def collusion_detection(job: Job, proto: Protocol, cheated: int) -> float:
    """Detection of a solver whose accomplice is one of the v drawn verifiers.

    The accomplice attests the made-up roots; the other v - 1 verifiers replay honestly; a
    whistleblower re-replays the accomplice's m segments with probability w and catches it if
    they include a cheated one. D = 1 - miss^(v-1) * (1 - w (1 - miss)).
    """
    miss = detection.miss_probability(job.segments, job.segments_per_verifier, cheated)
    w = proto.whistleblower_check_rate
    return 1.0 - miss ** (job.verifiers - 1) * (1.0 - w * (1.0 - miss))


def whistleblower_breakeven(job: Job, costs: Costs, proto: Protocol) -> float:
    """Share of attestations that must be false for re-checking to pay a whistleblower.

    A check costs m c_r and, on a false attestation, earns challenger_share x S (the court's
    bond, max(floor, x S), comes back: the whistleblower disputes only what its replay showed
    false). Below this share whistleblowing loses money, so in an honest equilibrium (no false
    attestations) whistleblowers are volunteers: the dominance results do not rely on them.
    """
    gain = proto.challenger_share * forced.lazy_slash(job, proto)
    return job.segments_per_verifier * costs.replay_segment(job) / gain
