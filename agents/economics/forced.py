"""Forced errors: how a forced round looks, who it catches, how large the lazy slash must be.

Mechanism (docs/INCENTIVES.md §2). One verification round per unit, as today; what changes is
what the solver publishes and how attestations are judged. The contracts deploy it with an
*anchor* checkpoint always perturbed besides the rho draws (PROTOCOL §8.1); the `anchored_*`
functions at the end show the bounds below hold for it unchanged (INCENTIVES §3.7).

- The solver commits a secret r (hash) with its claim, then, when it commits, a *seal* of its
  true checkpoint root C. Only then is the round's randomness fixed (the next block): the
  round is *forced* iff keccak(r, seed) < p (only the solver can compute it, and it can no
  longer change C), and then each checkpoint 1..n is *perturbed* iff keccak(r, seed, i) < rho
  (checkpoint 0, the job's initial root, never is). The solver publishes the list P: P = C, or
  C with the perturbed checkpoints replaced by real states one bit away (data uploaded, roots
  consistent with the data). Replaying a segment with a perturbed start or end checkpoint
  ends on a root different from the published end root; only a replay can tell.
- Each drawn verifier attests, sealed (commit, then reveal), its end root for each sampled
  segment, i.e. a flag agree / disagree per segment. In a forced round the solver then
  reveals r and opens C at the perturbed checkpoints (the contract checks P_i != C_i there and
  P_i = C_i is implied elsewhere by P's root). A verifier whose flags are all right earns the
  fee as usual; a *catcher* (all right, at least one disagree) also gets J / 2^(k-1) from the
  jackpot (k catchers); a verifier with a wrong flag loses `lazy_slash` and its fee. The unit's
  result is C; its segments not touching a perturbed checkpoint were verified by the same
  replays as in a normal round (`forced_detection_spread`).

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

import numpy as np

from agents.economics import detection
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

    Why the fee: it scales with the work a catcher did, so the reward for catching is job-size
    free (two catchers get J/2 = F each, a second fee); dominance does not need it (it holds
    with J = 0), J is the positive reward that makes checking worth more than the fee alone.
    """
    return proto.jackpot_fee_multiple * job.fee


def forced_rounds_per_unit(p: float) -> float:
    """Forced rounds per unit: p (one round per unit; a forced round still verifies C)."""
    if not 0.0 <= p < 1.0:
        raise ValueError("0 <= p < 1")
    return p


def masked_probability(rho: float) -> float:
    """P(an interior segment touches a perturbed checkpoint) = 1 - (1 - rho)^2.

    A cheated segment touching a perturbed checkpoint is not checked against C in a forced
    round (its replay mismatches anyway); segment 0 is masked with probability rho only.
    """
    return 1.0 - (1.0 - rho) ** 2


def forced_detection_spread(n: int, m: int, v: int, b: int, rho: float) -> float:
    """Detection in a forced round of b cheated segments no two of which share a checkpoint.

    Each is then masked independently with probability mu = 1 - (1 - rho)^2 (an upper bound:
    segment 0 is masked less), so the unmasked count is b - Y, Y ~ Binomial(b, mu), and
    D = 1 - sum_y P(Y = y) * miss(n, m, b - y)^v. Cheated segments sharing checkpoints are
    masked together (positively correlated); the bench measures that placement by simulation.
    """
    mu = masked_probability(rho)
    total = 0.0
    for y in range(b + 1):
        prob = math.comb(b, y) * mu**y * (1.0 - mu) ** (b - y)
        total += prob * detection.miss_probability(n, m, b - y) ** v
    return 1.0 - total


def forced_detection_mc(
    n: int, m: int, v: int, cheated: list[int], rho: float, rng, trials: int
) -> float:
    """Seeded Monte-Carlo detection in a forced round for an explicit placement of cheats."""
    cheated_a = np.zeros(n, dtype=bool)
    cheated_a[cheated] = True
    pert = rng.random((trials, n + 1)) < rho
    pert[:, 0] = False
    masked = pert[:, :-1] | pert[:, 1:]
    live = cheated_a[None, :] & ~masked
    caught = np.zeros(trials, dtype=bool)
    for _ in range(v):
        keys = rng.random((trials, n))
        draws = (
            np.argpartition(keys, m - 1, axis=1)[:, :m]
            if m < n
            else np.tile(np.arange(n), (trials, 1))
        )
        caught |= np.take_along_axis(live, draws, axis=1).any(axis=1)
    return float(caught.mean())


def perturbed_nonempty(n: int, rho: float) -> float:
    """P(a forced round perturbs at least one checkpoint); if none, it is a normal round."""
    return 1.0 - (1.0 - rho) ** n


def bound_ratio(m: int) -> float:
    """e (2m - 1) * rho (1 - rho)^(2m - 2) at rho = 1/(2m - 1): >= 1 (how loose the e bound is)."""
    rho = perturb_rate(m)
    return math.e * (2 * m - 1) * skip_risk_lower_bound(m, rho)


# ---------------------------------------------------------------------------------------------
# The deployed mechanism (PROTOCOL §8.1, INCENTIVES §3.7): a forced round perturbs an *anchor*
# checkpoint a, uniform over 1..n-1 (so every forced round perturbs something), and each other
# checkpoint 1..n-1 independently with probability rho; a verifier is judged on its sampled
# segments that start or end at a perturbed checkpoint.


def anchored_catch_probability(n: int, touched: int, rho: float) -> float:
    """P(some of the `touched` perturbable checkpoints of a sample is perturbed | forced): the
    anchor misses all t of them with probability 1 - t/(n-1), and then each is still perturbed
    with probability rho; never below the model's 1 - (1 - rho)^t."""
    if n < 2 or not 0 <= touched <= n - 1:
        raise ValueError("n >= 2 and 0 <= touched <= n - 1")
    return 1.0 - (1.0 - touched / (n - 1)) * (1.0 - rho) ** touched


def anchored_skip_risk(n: int, replayed: int, rho: float) -> float:
    """P(wrong | forced) for a verifier that replays segments touching `replayed` perturbable
    checkpoints (all clean) and copies the published root of a segment with one perturbable
    checkpoint c of its own: the anchor is c (then c is perturbed), or elsewhere outside the
    replayed ones (then c is with probability rho), and no replayed one is perturbed:

        (1 - rho)^r (1 + rho (n - 2 - r)) / (n - 1).

    At rho = 1 / (2m - 1) and r = 2m - 2 (the most a generic sample replays) this is exactly
    rho (1 - rho)^(2m - 2), the model's bound, for every n: the anchor costs nothing."""
    if n < 2 or not 0 <= replayed <= n - 2:
        raise ValueError("n >= 2 and 0 <= replayed <= n - 2")
    return (1.0 - rho) ** replayed * (1.0 + rho * (n - 2 - replayed)) / (n - 1)


def anchored_catch_lower_bound(m: int, n: int) -> float:
    """min over m distinct segments of `anchored_catch_probability`: any m segments touch at
    least min(m, n - 1) perturbable checkpoints (their distinct ends, one of which may be n)."""
    return anchored_catch_probability(n, min(m, n - 1), perturb_rate(m))


def anchored_skip_risk_lower_bound(m: int, n: int) -> float:
    """`anchored_skip_risk` at the most checkpoints a generic sample's other segments replay,
    min(2m - 2, n - 2): rho (1 - rho)^(2m - 2), the model's bound, once n >= 2m."""
    if n < 2:
        return 0.0  # one segment: never forced
    return anchored_skip_risk(n, min(2 * m - 2, n - 2), perturb_rate(m))
