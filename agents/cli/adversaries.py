"""The test adversaries' flags (demos, e2e tests, `make reliability`), added to a role's command
beside its own settings, and the one place one is chosen: the roles and their configs know none
(agents/adversaries, which no production module imports: an import-linter contract)."""

from __future__ import annotations

import argparse
from typing import Any

from agents.adversaries.faults import FAULT_KINDS


def add_solver_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--false-truth",
        action="store_true",
        help="test adversary: in a forced round, seal a true checkpoint list that is itself wrong "
        "at the perturbed checkpoint (the reveal then judges honest verifiers WRONG; they contest)",
    )
    p.add_argument(
        "--cheat",
        metavar="KIND[:step=,node=,element=,mask=]",
        help="test adversary: inject a fault (demos/tests only), e.g. "
        "element:step=217,node=2,element=5,mask=0x40000000 (kinds: " + ", ".join(FAULT_KINDS) + ")",
    )
    p.add_argument(
        "--stale-final",
        type=int,
        metavar="C",
        help="test adversary: train honestly but commit checkpoint C's state root as the final "
        "one, with its own list proof (refused on chain: FinalRootNotLast; tests only)",
    )


def add_verifier_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lazy",
        action="store_true",
        help="test adversary: attest without fetching or replaying anything (demos/tests only)",
    )
    p.add_argument(
        "--cheat-challenge",
        action="store_true",
        help="test adversary: dispute every unit, true or not, and play a lying challenger "
        "(tests of an honest solver's defence only)",
    )


def add_aggregator_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cheat",
        action="store_true",
        help="test adversary: commit wrong aggregates (demos and tests only)",
    )
    p.add_argument(
        "--withhold",
        action="store_true",
        help="test adversary: publish a locator to nothing (others must ask for reveals on "
        "chain; tests only)",
    )


def solver(ns: argparse.Namespace) -> dict[str, Any]:
    """The solver's `strategy` part: a test adversary's, or none (the role's honest one)."""
    from agents.adversaries import solver_strategy

    return _part(solver_strategy(ns.cheat, ns.false_truth, ns.stale_final))


def verifier(ns: argparse.Namespace) -> dict[str, Any]:
    from agents.adversaries import verifier_strategy

    return _part(verifier_strategy(ns.lazy, ns.cheat_challenge))


def aggregator(ns: argparse.Namespace) -> dict[str, Any]:
    from agents.adversaries import aggregator_strategy

    return _part(aggregator_strategy(ns.cheat, ns.withhold))


def _part(strategy: Any) -> dict[str, Any]:
    return {} if strategy is None else {"strategy": strategy}
