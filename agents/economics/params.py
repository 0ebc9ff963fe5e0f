"""Parameters of the incentive model: the deployment, one job (one unit of work), the costs.

Token amounts are in whole tokens (10^18 base units on chain). Rates are fractions here and
basis points (bps, 1/10^4) in the contracts; `Protocol.bps()` gives the on-chain values.

Defaults that already exist in the contracts are copied from PROTOCOL §6.4 /
agents/core/deploy.py (tax 2 %, challenger share 50 %, collateral 100 % of the reward, 2
verifiers, lock 10, bond floor 10). The new ones (forced-error rate, jackpot payout, lazy-slash
factor, whistleblower check rate) are chosen in docs/INCENTIVES.md §5 and checked by
`agents.economics.analysis.check_dominance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

E = math.e


@dataclass(frozen=True)
class Protocol:
    """Deployment-wide parameters.

    Attributes (fractions, not bps):
        tax: share of a unit's reward paid into the jackpot (PROTOCOL `taxBps` = 200).
        challenger_share: share of a loser's slash paid to the winner (`challengerRewardBps`);
            the rest goes to the jackpot so a party cannot recycle its own slash.
        collateral: solver collateral as a multiple of the reward (`collateralBps` = 10 000).
        verifier_lock_min: floor of the per-unit verifier lock, tokens (`verifierLock`).
        challenge_bond: the floor of a challenge's bond, tokens (`challengeBond`); the bond
            itself scales with the job (`Job.challenge_bond`, `challengeBondOf`).
        forced_error_rate: p, probability that a verification round is a forced error.
        jackpot_fee_multiple: J = this x the unit's whole verification fee, paid per caught
            forced error (split 2^-(k-1) per catcher).
        lock_safety: kappa, the assumed bound on (cost of replaying one segment) / (the solver's
            payout per segment); the lazy slash is sized for it (see forced.lazy_slash).
        whistleblower_check_rate: w, fraction of attestations a whistleblower re-replays. An
            assumption about the population, not enforced; dominance does not rely on it.
    """

    tax: float = 0.02
    challenger_share: float = 0.5
    collateral: float = 1.0
    verifier_lock_min: float = 10.0
    challenge_bond: float = 10.0
    forced_error_rate: float = 0.05
    jackpot_fee_multiple: float = 1.0
    lock_safety: float = 1.25
    whistleblower_check_rate: float = 0.1

    def with_(self, **changes: float) -> Protocol:
        """A copy with some fields changed (sweeps, tests)."""
        return replace(self, **changes)

    def lazy_slash_factor(self) -> int:
        """The integer the contract multiplies by: ceil(kappa * e / p) (68 at the defaults).

        Used as `lazySlash = payout * (2m - 1) * factor / n` (forced.lazy_slash): an integer the
        deployer stores, so the contract needs no exponentiation or floating point.
        """
        return math.ceil(self.lock_safety * E / self.forced_error_rate)

    def bps(self) -> dict[str, int]:
        """The on-chain (basis-point / integer) form of the parameters."""
        return {
            "taxBps": round(self.tax * 10_000),
            "challengerRewardBps": round(self.challenger_share * 10_000),
            "collateralBps": round(self.collateral * 10_000),
            "forcedErrorBps": round(self.forced_error_rate * 10_000),
            "jackpotFeeBps": round(self.jackpot_fee_multiple * 10_000),
            "lazySlashFactor": self.lazy_slash_factor(),
        }


@dataclass(frozen=True)
class Job:
    """One unit of work: T steps, checkpoints every k steps, n = T/k segments.

    Attributes:
        reward: W, the unit's reward escrowed by the submitter (tokens).
        fee: the unit's whole verification fee (`verificationFee`), split between attesters.
        verifiers: v, verifiers drawn per unit (`verifiersPerUnit`).
        segments_per_verifier: m, distinct segments each verifier replays.
    """

    name: str
    steps: int
    interval: int
    reward: float
    fee: float
    verifiers: int = 2
    segments_per_verifier: int = 2

    def __post_init__(self) -> None:
        if self.steps <= 0 or self.interval <= 0 or self.steps % self.interval:
            raise ValueError(f"interval {self.interval} must divide steps {self.steps}")
        if not 1 <= self.segments_per_verifier <= self.segments:
            raise ValueError(f"m = {self.segments_per_verifier} not in [1, n = {self.segments}]")
        if self.verifiers < 1:
            raise ValueError("at least one verifier")

    @property
    def segments(self) -> int:
        """n = T / k."""
        return self.steps // self.interval

    @property
    def fee_per_verifier(self) -> float:
        """F: what one attesting verifier earns when all v attest."""
        return self.fee / self.verifiers

    def payout(self, proto: Protocol) -> float:
        """The solver's pay, W - fee - tax (PROTOCOL §6.3)."""
        return self.reward - self.fee - proto.tax * self.reward

    def collateral(self, proto: Protocol) -> float:
        """X: the collateral the solver locks (slashed when a cheat is shown)."""
        return proto.collateral * self.reward

    def challenge_bond(self, proto: Protocol) -> float:
        """B: the bond a challenge of this unit takes (`challengeBondOf`), what a winning
        challenger is paid on top of it (challenger_share x X), at least the floor
        `challenge_bond`: a challenge holds up the unit and the solver's collateral for a whole
        dispute game, so it risks in proportion to the job."""
        return max(proto.challenge_bond, proto.challenger_share * self.collateral(proto))

    def replay_fraction(self) -> float:
        """Total replay work v * m / n, as a fraction of the solver's training."""
        return self.verifiers * self.segments_per_verifier / self.segments

    def with_(self, **changes: object) -> Job:
        return replace(self, **changes)


@dataclass(frozen=True)
class Costs:
    """Off-chain costs, tokens per unit: the economic assumptions (not protocol parameters).

    Attributes:
        train: c_t, the solver's cost of training the whole unit honestly.
        replay_overhead: delta, a replay costs (1 + delta) x training the segment (fetch the
            checkpoint, hash it, replay k steps, hash the result).
        forced_overhead: the solver's extra cost per forced round (perturb and re-upload a few
            checkpoints), as a fraction of c_t.
    """

    train: float
    replay_overhead: float = 0.1
    forced_overhead: float = 0.01

    def replay_segment(self, job: Job) -> float:
        """c_r: a verifier's cost of replaying one segment, c_t / n * (1 + delta)."""
        return self.train / job.segments * (1.0 + self.replay_overhead)


def covering_fee(job: Job, costs: Costs, margin: float = 0.25) -> float:
    """A fee that pays each verifier (1 + margin) x its replay cost m * c_r (participation)."""
    return job.verifiers * (1.0 + margin) * job.segments_per_verifier * costs.replay_segment(job)


def reference_jobs() -> list[tuple[Job, Costs]]:
    """The two jobs the defaults are checked on (docs/INCENTIVES.md §4).

    - digits: examples/digits-mlp.json (T = 400, k = 40, n = 10), reward 10, training cost 5
      (the solver keeps half its payout as margin), the protocol's 2 x 2 sampling;
    - large: T = 100 000, k = 100 (n = 1000), reward 1000, cost 500, v = 2, m = 46 (9.2 %
      replay; 44 is the least m reaching 99 % detection of a 5 % cheat, 46 leaves a margin).
    Fees cover the verifiers' replay with a 25 % margin (`covering_fee`).
    """
    out = []
    for name, steps, interval, reward, train, m in (
        ("digits", 400, 40, 10.0, 5.0, 2),
        ("large", 100_000, 100, 1000.0, 500.0, 46),
    ):
        costs = Costs(train=train)
        job = Job(name, steps, interval, reward, 0.0, 2, m)
        out.append((job.with_(fee=round(covering_fee(job, costs), 6)), costs))
    return out
