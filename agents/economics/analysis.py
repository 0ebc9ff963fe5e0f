"""The checks the defaults must pass, and the searches that pick n, v, m and p.

`check_dominance` is the claim of docs/INCENTIVES.md §4: at the given parameters, for the given
job and costs, (1) every verifier deviation earns strictly less than replaying honestly, by at
least `margin` x the fee, with and without a funded jackpot; (2) every solver cheat (each b
in 1..n, so every f and the single-segment cheat) earns strictly less than honest training,
given honest verifiers (iterated dominance: verifiers replay whatever solvers do, so solvers
face honest replays), with detection counted as (1 - p) D (forced rounds credited nothing);
(3) the jackpot is self-funding. The verifier margin is stated against
the smallest saving any deviation makes, one segment's replay cost c_r: the advantage must
exceed `margin` x c_r. Every number is returned so the bench
can publish it and a reader can redo it by hand.
"""

from __future__ import annotations

from agents.economics import detection, forced, jackpot, payoffs
from agents.economics.params import Costs, Job, Protocol

CHEAT_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)


def check_dominance(job: Job, costs: Costs, proto: Protocol, margin: float = 0.05) -> dict:
    """All dominance numbers for one job; `ok` is the conjunction of the claims."""
    n, m, v = job.segments, job.segments_per_verifier, job.verifiers
    c_r = costs.replay_segment(job)
    ver = payoffs.verifier_payoffs(job, costs, proto)
    ver_empty = payoffs.verifier_payoffs(job, costs, proto, jackpot_available=False)
    honest_solver = payoffs.solver_honest(job, costs, proto)
    cheats = [payoffs.solver_cheat(job, costs, proto, b) for b in range(1, n + 1)]
    worst = max(cheats, key=lambda o: o.profit)
    grid = [
        {"requested_fraction": f}
        | _cheat_dict(payoffs.solver_cheat(job, costs, proto, detection.cheated_segments(f, n)))
        for f in CHEAT_FRACTIONS
    ]
    sus = jackpot.sustainability(job, proto)
    need = margin * c_r
    claims = {
        "verifier_strictly_dominant": ver.advantage > need,
        "verifier_dominant_with_empty_jackpot": ver_empty.advantage > need,
        "verifier_participates": ver.honest > 0,
        "solver_strictly_dominant_all_b": all(o.profit < honest_solver for o in cheats),
        "solver_participates": honest_solver > 0,
        "replay_within_bound": c_r < proto.lock_safety * job.payout(proto) / n,
        "jackpot_self_funding": sus.sustainable,
    }
    rho = forced.perturb_rate(m)
    return {
        "job": job.name,
        "n": n,
        "m": m,
        "v": v,
        "reward": job.reward,
        "fee_total": job.fee,
        "fee_per_verifier": job.fee_per_verifier,
        "tax": proto.tax * job.reward,
        "solver_payout": job.payout(proto),
        "collateral": job.collateral(proto),
        "train_cost": costs.train,
        "replay_cost_per_segment": c_r,
        "replay_cost_bound_kappa_payout_per_segment": proto.lock_safety * job.payout(proto) / n,
        "perturb_rate_rho": rho,
        "lazy_catch_lower_bound": forced.catch_lower_bound(m, rho),
        "skip_one_risk_lower_bound": forced.skip_risk_lower_bound(m, rho),
        "lazy_slash_S": forced.lazy_slash(job, proto),
        "jackpot_payout_J": forced.jackpot_payout(job, proto),
        "verifier_margin_required": need,
        "verifier_advantage_over_replay_cost": ver.advantage / c_r,
        "verifier": _ver_dict(ver),
        "verifier_empty_jackpot": _ver_dict(ver_empty),
        "verifier_without_forced_errors": dict(
            zip(("honest", "lazy"), payoffs.verifier_without_forced_errors(job, costs), strict=True)
        ),
        "solver": {
            "honest": honest_solver,
            "cheat_grid": grid,
            "single_segment": _cheat_dict(cheats[0]),
            "best_cheat_over_all_b": _cheat_dict(worst),
            "advantage_over_best_cheat": honest_solver - worst.profit,
            "all_verifiers_lazy_full_cheat": _cheat_dict(
                payoffs.solver_cheat(job, costs, proto, n, detect=0.0)
            ),
            "collusion_one_verifier_5pct": _cheat_dict(
                payoffs.solver_cheat(
                    job,
                    costs,
                    proto,
                    detection.cheated_segments(0.05, n),
                    detect=(1 - proto.forced_error_rate)
                    * payoffs.collusion_detection(job, proto, detection.cheated_segments(0.05, n)),
                )
            ),
        },
        "whistleblower_breakeven_false_share": payoffs.whistleblower_breakeven(job, costs, proto),
        "jackpot": {
            "inflow_per_unit": sus.inflow,
            "outflow_bound_per_unit": sus.outflow_bound,
            "outflow_expected_per_unit": sus.outflow_expected,
            "drift_per_unit": sus.drift,
            "max_fee_share_of_reward": sus.max_fee_share,
            "fee_share_of_reward": job.fee / job.reward,
        },
        "claims": claims,
        "ok": all(claims.values()),
    }


def tradeoff_curve(n: int, v: int, fraction: float, m_values: list[int]) -> list[dict]:
    """Detection of a fraction-f cheat and of a one-segment cheat against the replay it costs."""
    b = detection.cheated_segments(fraction, n)
    return [
        {
            "m": m,
            "replay_fraction": detection.replay_fraction(n, m, v),
            "coverage_fraction": detection.coverage_fraction(n, m, v),
            "detection": detection.detection_probability(n, m, v, b),
            "detection_with_replacement": detection.detection_with_replacement(n, m, v, b),
            "detection_single_segment": detection.detection_probability(n, m, v, 1),
        }
        for m in m_values
    ]


def min_sampling_table(
    n_values: list[int], v_values: list[int], fraction: float, target: float, budget: float
) -> list[dict]:
    """For each n and v: the least m reaching `target` detection of a fraction-f cheat, the
    replay fraction it costs, and the best detection within the replay `budget`."""
    rows = []
    for n in n_values:
        b = detection.cheated_segments(fraction, n)
        for v in v_values:
            m = detection.min_segments_for(n, v, b, target)
            m_budget = max(1, int(budget * n // v))
            rows.append(
                {
                    "n": n,
                    "v": v,
                    "cheated_segments": b,
                    "min_m": m,
                    "replay_fraction_at_min_m": None
                    if m is None
                    else detection.replay_fraction(n, m, v),
                    "meets_budget": m is not None and v * m <= budget * n + 1e-9,
                    "m_at_budget": m_budget if v * m_budget <= budget * n + 1e-9 else None,
                    "detection_at_budget": detection.detection_probability(n, m_budget, v, b)
                    if v * m_budget <= budget * n + 1e-9
                    else None,
                }
            )
    return rows


def p_sweep(job: Job, costs: Costs, proto: Protocol, rates: list[float]) -> list[dict]:
    """What the forced-error rate p trades: lock size, jackpot fee cap, extra rounds."""
    rows = []
    for p in rates:
        pr = proto.with_(forced_error_rate=p)
        res = check_dominance(job, costs, pr)
        rows.append(
            {
                "p": p,
                "forced_rounds_per_unit": forced.forced_rounds_per_unit(p),
                "lazy_slash_S": res["lazy_slash_S"],
                "lazy_slash_over_reward": res["lazy_slash_S"] / job.reward,
                "max_fee_share_of_reward": res["jackpot"]["max_fee_share_of_reward"],
                "verifier_advantage": res["verifier"]["advantage"],
                "ok": res["ok"],
            }
        )
    return rows


def _ver_dict(ver: payoffs.VerifierPayoffs) -> dict:
    return {
        "honest": ver.honest,
        "lazy": ver.lazy,
        "skip_one": ver.skip_one,
        "guess_disagree": ver.guess_disagree,
        "abstain": ver.abstain,
        "best_deviation": ver.best_deviation,
        "advantage": ver.advantage,
    }


def _cheat_dict(o: payoffs.SolverOutcome) -> dict:
    return {
        "cheated_segments": o.cheated_segments,
        "fraction": o.fraction,
        "detection": o.detection,
        "profit": o.profit,
    }
