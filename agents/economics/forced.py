"""Forced errors: how a forced round looks, who it catches, how large the lazy slash must be.

Mechanism (docs/INCENTIVES.md §2; the contracts implement it):

- With probability p a verification round is *forced*: the solver, who alone knows it (the bit
  is keccak(r, seed) with r its secret committed at claim time), publishes a checkpoint list in
  which each checkpoint 1..n is independently *perturbed* (one bit of one tensor flipped, data
  uploaded, roots consistent with the data) with probability rho; checkpoint 0 is the job's
  initial root and is never perturbed. Replaying a segment whose start or end checkpoint is
  perturbed ends on a root different from the published end root; nothing short of a replay
  tells a perturbed checkpoint from a true one.
- Each drawn verifier attests, sealed, one flag per sampled segment (agree / disagree with the
  published end root). After the window the solver reveals r: a verifier whose flags are all
  right and who flagged at least one perturbed segment is a *catcher* (paid J / 2^(k-1) from
  the jackpot, k catchers); a verifier with a wrong flag is slashed `lazy_slash`.

Why rho < 1: with every checkpoint perturbed, replaying *one* segment tells a verifier whether
the round is forced, so it could replay one and agree on the rest. With rho = 1/(2m - 1), a
verifier who replays all but one of its m segments and found them clean still faces a
perturbation in the skipped one with probability >= rho (1 - rho)^(2m-2) >= 1 / (e (2m - 1)),
which is the largest such bound over rho (the skipped segment has one private checkpoint, the
others cover at most 2m - 2).

Caveat (quantified by `generic_fraction`): a sampled segment whose *both* checkpoints are also
checkpoints of other sampled segments (its neighbours both sampled, or segment 0 with segment 1
sampled) carries no private checkpoint; replaying its neighbours tells whether it is perturbed.
Such a segment is still checked for real cheats only by replaying it; forced errors do not
enforce that replay. The bounds below are stated for *generic* samples (none such).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from agents.economics.params import Job, Protocol


def perturb_rate(m: int) -> float:
    """rho = 1 / (2m - 1): maximises the skip-one risk bound rho (1 - rho)^(2m - 2)."""
    if m < 1:
        raise ValueError("m >= 1")
    return 1.0 / (2 * m - 1)


def checkpoints_of(sample: Iterable[int]) -> set[int]:
    """Perturbable checkpoints touched by sampled segments: {s, s + 1} for each s, minus 0."""
    out: set[int] = set()
    for s in sample:
        out.update((s, s + 1))
    out.discard(0)
    return out


def catch_probability(sample: Iterable[int], rho: float) -> float:
    """P(a forced round perturbs a checkpoint of this sample): 1 - (1 - rho)^|C(M)|.

    This is the probability that a lazy verifier (agrees on every segment) is wrong in a forced
    round, and that an honest one is a catcher.
    """
    return 1.0 - (1.0 - rho) ** len(checkpoints_of(sample))


def catch_lower_bound(m: int, rho: float) -> float:
    """1 - (1 - rho)^m <= catch_probability for any m distinct segments.

    The end checkpoints s + 1 of distinct segments are distinct and never 0, so |C(M)| >= m.
    """
    return 1.0 - (1.0 - rho) ** m


def skip_risk(sample: Iterable[int], skipped: Iterable[int], rho: float) -> float:
    """P(forced round perturbs a checkpoint of the skipped segments but none of the replayed).

    Exactly the probability that a verifier replaying `sample - skipped` and agreeing on the
    skipped ones is wrong (its replays were clean, so it saw nothing).
    """
    sample, skipped = set(sample), set(skipped)
    replayed = checkpoints_of(sample - skipped)
    private = checkpoints_of(skipped) - replayed
    return (1.0 - rho) ** len(replayed) * (1.0 - (1.0 - rho) ** len(private))


def skip_risk_lower_bound(m: int, rho: float) -> float:
    """rho (1 - rho)^(2m - 2): skipping one segment of a generic sample is wrong at least this
    often in a forced round (one private checkpoint, at most 2m - 2 replayed ones)."""
    return rho * (1.0 - rho) ** (2 * m - 2)


def is_generic(sample: Iterable[int]) -> bool:
    """Every sampled segment has a checkpoint no other sampled segment touches."""
    sample = set(sample)
    for s in sample:
        others = checkpoints_of(sample - {s})
        if not checkpoints_of({s}) - others:
            return False
    return True


def generic_fraction(n: int, m: int, rng, trials: int) -> float:
    """Monte-Carlo share of uniform m-of-n samples that are generic (see the module caveat)."""
    if m == 1:
        return 1.0
    hits = sum(is_generic(rng.choice(n, size=m, replace=False).tolist()) for _ in range(trials))
    return hits / trials


def lazy_slash(job: Job, proto: Protocol) -> float:
    """S: what a drawn verifier locks and loses for a wrong flag in a forced round.

    S = max(verifier_lock_min, payout * (2m - 1) * ceil(kappa e / p) / n).

    Why: skipping one segment saves c_r and risks p * rho (1 - rho)^(2m-2) * S, and
    rho (1 - rho)^(2m-2) >= 1 / (e (2m - 1)). With c_r <= kappa * payout / n (a replay costs
    at most kappa times what the solver is paid for the segment, since the solver trains it for
    less than its pay) the risk exceeds the saving. Contract-friendly: one stored integer, the
    job's payout, m and n.
    """
    m, n = job.segments_per_verifier, job.segments
    return max(
        proto.verifier_lock_min, job.payout(proto) * (2 * m - 1) * proto.lazy_slash_factor() / n
    )


def jackpot_payout(job: Job, proto: Protocol) -> float:
    """J: paid per caught forced round (split 2^-(k-1) per catcher): multiple x the unit's fee.

    Why the fee: a forced round verifies nothing, so its fee is not paid; J repays the catchers'
    work at about the normal rate (v = 2 catchers get J/2 = F each).
    """
    return proto.jackpot_fee_multiple * job.fee


def expected_forced_rounds(p: float) -> float:
    """Forced rounds per unit: rounds repeat until a non-forced one, so p / (1 - p)."""
    if not 0.0 <= p < 1.0:
        raise ValueError("0 <= p < 1")
    return p / (1.0 - p)


def perturbed_nonempty(n: int, rho: float) -> float:
    """P(a forced round perturbs at least one checkpoint); if none, it is a normal round."""
    return 1.0 - (1.0 - rho) ** n


def bound_ratio(m: int) -> float:
    """e (2m - 1) * rho (1 - rho)^(2m - 2) at rho = 1/(2m - 1): >= 1 (how loose the e bound is)."""
    rho = perturb_rate(m)
    return math.e * (2 * m - 1) * skip_risk_lower_bound(m, rho)
