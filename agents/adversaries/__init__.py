"""Test adversaries: the cheating behaviours the demo, the e2e tests and `make reliability`
need, as strategy objects the start-up wiring (agents/cli_*.py) hands to a role in place of its
honest one. No production module imports this package (an import-linter contract, pyproject).

- verifier  --lazy (`LazyVerifier`), --cheat-challenge (`LyingVerifier`)
- solver    --cheat KIND[:...] (`FaultySolver`), --false-truth (`FalseTruthSolver`),
            --stale-final C (`StaleFinalSolver`)
- aggregator  --cheat and/or --withhold (`CheatingAggregator`)
- liars     dispute-game players that lie where an honest party never would (tests, benches,
            --cheat-challenge)
- faults    cheating parties' accounts of a claim (`Fault`, `FaultyComputation`, ...): what
            --cheat commits and the dispute tests' liars compute
- flags     the flags above, added to the roles' parsers by the CLI wiring

`verifier_strategy(args)`, `solver_strategy(args)` and `aggregator_strategy(args)` read the
flags once; None: the role's honest strategy.
"""

from __future__ import annotations

import argparse

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


def verifier_strategy(args: argparse.Namespace) -> VerifierStrategy | None:
    """--lazy wins over --cheat-challenge: a lazy verifier never disagrees, so never challenges."""
    if args.lazy:
        return LazyVerifier()
    if args.cheat_challenge:
        return LyingVerifier()
    return None


def solver_strategy(args: argparse.Namespace) -> SolverStrategy | None:
    """--cheat wins over --false-truth: a faulty solver never plays forced rounds."""
    fault = parse_cheat(args.cheat)
    if fault is not None:
        return FaultySolver(fault=fault)
    if args.false_truth:
        return FalseTruthSolver()
    if args.stale_final is not None:
        return StaleFinalSolver(checkpoint=args.stale_final)
    return None


def aggregator_strategy(args: argparse.Namespace) -> AggregatorStrategy | None:
    """--cheat and --withhold combine (the decomposed demo's cheater uses both)."""
    if args.cheat or args.withhold:
        return CheatingAggregator(corrupts=args.cheat, withholds=args.withhold)
    return None
