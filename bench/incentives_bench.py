"""Incentive-model benchmark: the numbers behind docs/INCENTIVES.md, from agents/economics.

Run: `python -m bench.incentives_bench` (pure Python, a few seconds, no chain). Writes
bench/results/incentives.json with:
- `defaults`: the protocol parameters (fractions and their on-chain integer form) and the two
  reference jobs with their cost assumptions;
- `jobs.<name>`: `check_dominance` for each reference job: every verifier strategy's expected
  profit per round (honest, lazy, skip_one, guess_disagree, abstain; with and without a funded
  jackpot; and with p = 0, the dilemma), every solver strategy's profit per unit (honest,
  cheats at f in a grid, single segment, the best b, all verifiers lazy, one colluding
  verifier), the lazy slash S and jackpot payout J, jackpot inflow / outflow, and the claims;
- `detection_5pct`: per job, the probability that a solver cheating in 5 % of the segments is
  caught (in a normal round; in a forced round, exact for spread-out cheats and simulated for
  a contiguous block; overall), the replay fraction and distinct coverage it costs, and the
  normal-round figure with a with-replacement sampler (the contracts' former one, for
  comparison; the contracts now draw distinct segments, PROTOCOL §6.5);
- `tradeoff`: detection (5 % and single-segment cheats) against replay fraction for n = 1000,
  v = 1, 2, 3, and the least m reaching 99 % for n in {10, 100, 400, 1000, 2000};
- `generic_samples`: Monte-Carlo share of samples for which forced errors enforce every replay;
- `sybil`: payout to a party catching with s identities beside h honest catchers, per rule;
- `jackpot_projection`: seeded Monte-Carlo of the jackpot balance over 10 000 units per job,
  starting empty, starting with 10 J (the seeding the deployer should do), and with 20 % lazy
  verifiers (their slashes feed the jackpot);
- `p_sweep`: what the forced-error rate trades (lock, fee cap, extra rounds);
- `deployed_mechanism`: the verifier's bounds under what the contracts deploy (an anchor
  checkpoint besides the rho draws, PROTOCOL §8.1; INCENTIVES §3.7);
- `goals`: the issue's targets with the measured figure and whether each is met.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from agents.economics import analysis, detection, forced, jackpot, payoffs
from agents.economics.params import Protocol, reference_jobs

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "incentives.json"
SEED = 20261129


def main() -> None:
    started = time.monotonic()
    proto = Protocol()
    jobs = reference_jobs()
    out: dict = {
        "defaults": {
            "protocol": asdict(proto),
            "onchain": proto.bps(),
            "perturb_rate_rule": "rho = 1 / (2m - 1)",
            "lazy_slash_rule": "S = max(verifierLock, payout * (2m - 1) * lazySlashFactor / n)",
            "jackpot_payout_rule": "J = jackpotFeeBps / 1e4 * verificationFee, "
            "k catchers paid J / 2^(k-1) each",
            "jobs": [
                asdict(job) | {"n": job.segments, "costs": asdict(costs)} for job, costs in jobs
            ],
        },
        "jobs": {},
        "detection_5pct": {},
        "generic_samples": {},
        "jackpot_projection": {},
    }
    rng = np.random.default_rng(SEED)
    for job, costs in jobs:
        out["jobs"][job.name] = analysis.check_dominance(job, costs, proto)
        n, m, v = job.segments, job.segments_per_verifier, job.verifiers
        b = detection.cheated_segments(0.05, n)
        out["detection_5pct"][job.name] = {
            "n": n,
            "m": m,
            "v": v,
            "cheated_segments": b,
            "detection": detection.detection_probability(n, m, v, b),
            "replay_fraction": detection.replay_fraction(n, m, v),
            "coverage_fraction": detection.coverage_fraction(n, m, v),
            "detection_with_replacement": detection.detection_with_replacement(n, m, v, b),
        }
        rho = forced.perturb_rate(m)
        p = proto.forced_error_rate
        spread = forced.forced_detection_spread(n, m, v, b, rho)
        contiguous = forced.forced_detection_mc(n, m, v, list(range(1, b + 1)), rho, rng, 20_000)
        normal = out["detection_5pct"][job.name]["detection"]
        out["detection_5pct"][job.name] |= {
            "forced_round_detection_spread_exact": spread,
            "forced_round_detection_contiguous_mc": contiguous,
            "overall_detection": (1 - p) * normal + p * min(spread, contiguous),
            "overall_detection_lower_bound": (1 - p) * normal,
        }
        out["generic_samples"][job.name] = {
            "trials": 20_000,
            "generic_fraction": forced.generic_fraction(n, m, rng, 20_000),
        }
        out["jackpot_projection"][job.name] = [
            jackpot.project_balance(job, proto, 10_000, SEED, initial=initial, lazy_share=lazy)
            for initial, lazy in (
                (0.0, 0.0),
                (10 * forced.jackpot_payout(job, proto), 0.0),
                (0.0, 0.2),
            )
        ]
    out["tradeoff"] = {
        "curves_n1000": {
            f"v{v}": analysis.tradeoff_curve(
                1000, v, 0.05, [*range(1, 10), *range(10, 101, 5), 150, 200, 300, 500]
            )
            for v in (1, 2, 3)
        },
        "curve_n10_v2": analysis.tradeoff_curve(10, 2, 0.05, list(range(1, 11))),
        "min_m_for_99pct_at_5pct": analysis.min_sampling_table(
            [10, 100, 400, 1000, 2000], [1, 2, 3], 0.05, 0.99, 0.10
        ),
    }
    out["sybil"] = {"jackpot": 1.0, "rows": jackpot.sybil_table(1.0)}
    out["p_sweep"] = {
        job.name: analysis.p_sweep(job, costs, proto, [0.01, 0.02, 0.05, 0.1, 0.2])
        for job, costs in jobs
    }
    # What the contracts deploy: an anchor checkpoint besides the rho draws (PROTOCOL §8.1,
    # INCENTIVES §3.7), at the same lock S.
    out["deployed_mechanism"] = {}
    for job, costs in jobs:
        pay = payoffs.verifier_payoffs(job, costs, proto, anchored=True)
        n, m = job.segments, job.segments_per_verifier
        out["deployed_mechanism"][job.name] = {
            "catch_lower_bound": forced.anchored_catch_lower_bound(m, n),
            "skip_risk_lower_bound": forced.anchored_skip_risk_lower_bound(m, n),
            "verifier": asdict(pay) | {"advantage": pay.advantage},
            "strictly_dominant": pay.advantage > 0,
            "slash": forced.lazy_slash(job, proto),
        }
    det_large = out["detection_5pct"]["large"]
    sybil_gain = max(
        r["gain_vs_one_identity"] for r in out["sybil"]["rows"] if r["rule"] == "truebit"
    )
    out["goals"] = (
        [
            {
                "goal": f"honest verifier strictly dominant ({name})",
                "measured": out["jobs"][name]["verifier"]["advantage"],
                "met": out["jobs"][name]["claims"]["verifier_strictly_dominant"]
                and out["jobs"][name]["claims"]["verifier_dominant_with_empty_jackpot"],
            }
            for name in ("digits", "large")
        ]
        + [
            {
                "goal": f"honest verifier strictly dominant, deployed mechanism ({name})",
                "measured": out["deployed_mechanism"][name]["verifier"]["advantage"],
                "met": out["deployed_mechanism"][name]["strictly_dominant"],
            }
            for name in ("digits", "large")
        ]
        + [
            {
                "goal": f"honest solver strictly dominant for every b in 1..n ({name})",
                "measured": out["jobs"][name]["solver"]["advantage_over_best_cheat"],
                "met": out["jobs"][name]["claims"]["solver_strictly_dominant_all_b"],
            }
            for name in ("digits", "large")
        ]
        + [
            {
                "goal": ">= 99 % detection of a 5 % cheat at <= 10 % replay (large, n = 1000)",
                "measured": {
                    "detection_normal_round": det_large["detection"],
                    "detection_overall": det_large["overall_detection"],
                    "replay_fraction": det_large["replay_fraction"],
                },
                "met": det_large["overall_detection"] >= 0.99
                and det_large["replay_fraction"] <= 0.10,
            },
            {
                "goal": "splitting a catcher into identities earns nothing (truebit rule)",
                "measured": sybil_gain,
                "met": sybil_gain <= 1e-12,
            },
            {
                "goal": "jackpot does not drain in expectation (both jobs)",
                "measured": {
                    n: out["jobs"][n]["jackpot"]["drift_per_unit"] for n in ("digits", "large")
                },
                "met": all(
                    out["jobs"][n]["claims"]["jackpot_self_funding"] for n in ("digits", "large")
                ),
            },
        ]
    )
    out["elapsed_s"] = round(time.monotonic() - started, 2)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    for goal in out["goals"]:
        print(("MET  " if goal["met"] else "MISS ") + goal["goal"], goal["measured"])
    print(f"wrote {OUT.relative_to(ROOT)} in {out['elapsed_s']} s")


if __name__ == "__main__":
    main()
