"""Economic model of the protocol's incentives: forced errors, the jackpot, whistleblowers.

Pure functions over frozen dataclasses, no chain code, no randomness except where a seed is
passed in. It answers one question for the contracts: which parameters make honesty *strictly
dominant* for verifiers (replay every sampled segment) and for solvers (train every segment),
and keep the jackpot solvent. The write-up with every formula and number is docs/INCENTIVES.md;
the numbers themselves come from bench/incentives_bench.py (bench/results/incentives.json).

Modules:
- params     the deployment parameters (PROTOCOL §6.4 plus the new ones), a job, the costs
- detection  probability that sampled replays catch a solver cheating in b of n segments
- forced     forced errors: perturbation rate, catch probabilities, the lazy-verifier slash
- payoffs    expected profit per unit of each verifier and solver strategy
- jackpot    split rules (Sybil table), sustainability, a seeded balance projection
- analysis   the dominance check and the detection / replay trade-off search
"""

from agents.economics.params import Costs, Job, Protocol

__all__ = ["Costs", "Job", "Protocol"]
