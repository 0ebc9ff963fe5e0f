"""Test adversaries: the cheating behaviours the demo, the e2e tests and `make reliability`
need, as strategy objects the start-up wiring (agents/cli/adversaries.py, which declares their
flags) hands to a role in place of its honest one. No production module imports this package
(an import-linter contract, pyproject).

- verifier  --lazy (`LazyVerifier`), --cheat-challenge (`LyingVerifier`)
- solver    --cheat KIND[:...] (`FaultySolver`), --false-truth (`FalseTruthSolver`),
            --stale-final C (`StaleFinalSolver`)
- aggregator  --cheat and/or --withhold (`CheatingAggregator`)
- liars     dispute-game players that lie where an honest party never would (tests, benches,
            --cheat-challenge)
- faults    cheating parties' accounts of a claim (`Fault`, `FaultyComputation`, ...): what
            --cheat commits and the dispute tests' liars compute
`verifier_strategy`, `solver_strategy` and `aggregator_strategy` pick one from the flags' values;
None: the role's honest strategy.
"""

from __future__ import annotations

from agents.adversaries.aggregator import CheatingAggregator
from agents.adversaries.solver import (
    FalseTruthSolver,
    FaultySolver,
    StaleFinalSolver,
    parse_cheat,
)
from agents.adversaries.verifier import LazyVerifier, LyingVerifier
from agents.roles.aggregator import AggregatorStrategy
from agents.roles.solver import SolverStrategy
from agents.roles.verifier import VerifierStrategy


def verifier_strategy(lazy: bool, cheat_challenge: bool) -> VerifierStrategy | None:
    """--lazy wins over --cheat-challenge: a lazy verifier never disagrees, so never challenges."""
    if lazy:
        return LazyVerifier()
    if cheat_challenge:
        return LyingVerifier()
    return None


def solver_strategy(
    cheat: str | None, false_truth: bool, stale_final: int | None = None
) -> SolverStrategy | None:
    """--cheat wins over --false-truth: a faulty solver never plays forced rounds."""
    fault = parse_cheat(cheat)
    if fault is not None:
        return FaultySolver(fault=fault)
    if false_truth:
        return FalseTruthSolver()
    if stale_final is not None:
        return StaleFinalSolver(checkpoint=stale_final)
    return None


def aggregator_strategy(cheat: bool, withhold: bool) -> AggregatorStrategy | None:
    """--cheat and --withhold combine (the decomposed demo's cheater uses both)."""
    if cheat or withhold:
        return CheatingAggregator(corrupts=cheat, withholds=withhold)
    return None
