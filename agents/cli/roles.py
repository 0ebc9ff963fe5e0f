"""`python -m agents solver|verifier|whistleblower|submitter|aggregator`: one long-running role
process each (agents/roles), started from its frozen config (agents/roles/config.py).

Each command's flags are its config's fields (agents/cli/options.py); a solver's, a verifier's
and an aggregator's test adversaries (--cheat, --lazy, ...) are added and chosen here, in
agents/cli/adversaries.py, and handed to the role as its strategy: the role knows none.
"""

from __future__ import annotations

import argparse

from agents.cli import adversaries
from agents.cli.options import add_options, build
from agents.roles.config import (
    AggregatorConfig,
    RoleConfig,
    SolverConfig,
    SubmitterConfig,
    VerifierConfig,
    WhistleblowerConfig,
)


def role_parser(
    sub: argparse._SubParsersAction, name: str, config: type[RoleConfig], help_text: str
) -> argparse.ArgumentParser:
    """A role's command: every field of its config as a flag."""
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_options(p, config)
    return p


def register(sub: argparse._SubParsersAction) -> None:
    p = role_parser(sub, "solver", SolverConfig,
                    "run a solver: stake, claim units, train, commit, defend")  # fmt: skip
    adversaries.add_solver_flags(p)
    p.set_defaults(func=run_solver)
    p = role_parser(sub, "verifier", VerifierConfig,
                    "run a verifier: stake, replay sampled segments, seal and open attestations, "
                    "challenge, play dispute games")  # fmt: skip
    adversaries.add_verifier_flags(p)
    p.set_defaults(func=run_verifier)
    p = role_parser(sub, "whistleblower", WhistleblowerConfig,
                    "run a whistleblower: re-check attestations, dispute false ones (attestation "
                    "court), challenge wrong commitments, play dispute games")  # fmt: skip
    p.set_defaults(func=run_whistleblower)
    p = role_parser(sub, "submitter", SubmitterConfig,
                    "post a training job, follow it, fetch and check the model")  # fmt: skip
    p.set_defaults(func=run_submitter)
    p = role_parser(
        sub,
        "aggregator",
        AggregatorConfig,
        "run an aggregator: commit, check and prove decomposed jobs' aggregates",
    )
    adversaries.add_aggregator_flags(p)
    p.set_defaults(func=run_aggregator)


def run_solver(ns: argparse.Namespace) -> int:
    from agents.roles.runner import run_role
    from agents.roles.solver import Solver

    return run_role(Solver, build(SolverConfig, ns), **adversaries.solver(ns))


def run_verifier(ns: argparse.Namespace) -> int:
    from agents.roles.runner import run_role
    from agents.roles.verifier import Verifier

    return run_role(Verifier, build(VerifierConfig, ns), **adversaries.verifier(ns))


def run_whistleblower(ns: argparse.Namespace) -> int:
    from agents.roles.runner import run_role
    from agents.roles.whistleblower import Whistleblower

    return run_role(Whistleblower, build(WhistleblowerConfig, ns))


def run_submitter(ns: argparse.Namespace) -> int:
    from agents.roles.runner import run_role
    from agents.roles.submitter import Submitter

    return run_role(Submitter, build(SubmitterConfig, ns))


def run_aggregator(ns: argparse.Namespace) -> int:
    from agents.roles.aggregator import Aggregator
    from agents.roles.runner import run_role

    return run_role(Aggregator, build(AggregatorConfig, ns), **adversaries.aggregator(ns))
