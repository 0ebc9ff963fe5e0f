"""The README's example numbers work with the deployed defaults: read out of its commands (not
copied here), every role started as the README says can do its job.

For each `submit` / `submitter` command (reward R, verification fee F, the flags' defaults where
omitted) and the job it posts — the spec a `job build` of the same section writes, else the
digits reference job (examples/digits-mlp.json, the job `my-job.json` stands for) — under the
deployment its section makes (its `deploy --config`, else the defaults of agents/core/deploy.py):
- the job can be posted: R > F + tax, and F within the jackpot cap (JobManager.postJob);
- every verifier's `--stake` covers the job's verifier lock S (MarketMath.verifierLock, as
  `_lock` computes it) and the registry's minimum, so it can be drawn; a section that deploys
  starts enough verifiers to fill the draw's seats (`verifiersPerUnit`);
- every solver's `--stake` covers its claim's collateral (R · collateralBps) and the minimum;
- every whistleblower's `--stake` covers the minimum;
- where `deploy --mint` funds the roles (the local journey): each mint covers its role's stake,
  the submitter's covers R, and the whistleblower's unstaked tokens cover a court bond
  (AttestationCourt._bondFor: max(bond, S · rewardBps));
- the lock S the journey's prose states is the one computed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from agents.cli.main import build_parser
from agents.cli.options import options
from agents.core.deploy import (
    DEFAULT_COURT,
    DEFAULT_MANAGER_CONFIG,
    DEFAULT_REGISTRY_CONFIG,
    TOKEN_UNIT,
)
from agents.roles.config import (
    AggregatorConfig,
    SolverConfig,
    SubmitterConfig,
    VerifierConfig,
    WhistleblowerConfig,
)
from tools.readme_commands import README, AgentCommand, agent_commands, sections

REPO = Path(__file__).resolve().parents[2]
REFERENCE_JOB = REPO / "examples" / "digits-mlp.json"
BPS = 10_000
JOURNEY = "The whole journey, on a local chain"


def tokens(text: str | float) -> int:
    return round(float(text) * TOKEN_UNIT)


def verifier_lock(reward: int, fee: int, n: int, cfg: dict[str, int]) -> int:
    """JobManagerBase._lock: MarketMath.verifierLock of the solver's pay."""
    solver_pay = reward - fee - reward * cfg["taxBps"] // BPS
    m = min(cfg["segmentsPerVerifier"], n)
    lazy = solver_pay * (2 * m - 1) * cfg["lazySlashFactor"] // n
    return max(lazy, cfg["verifierLock"])


CONFIGS = {"submit": SubmitterConfig, "submitter": SubmitterConfig, "solver": SolverConfig,
           "verifier": VerifierConfig, "whistleblower": WhistleblowerConfig,
           "aggregator": AggregatorConfig}  # fmt: skip


def parsed(command: AgentCommand) -> SimpleNamespace:
    """The role command's stake, reward and fee as the agents' own parser reads them, an omitted
    flag taking its config's default (agents/roles/config.py)."""
    ns = build_parser().parse_args(list(command.argv))
    wanted = ("stake", "reward", "verification_fee")
    return SimpleNamespace(**{
        o.name: o.default if getattr(ns, o.dest) is None else o.parse(getattr(ns, o.dest))
        for o in options(CONFIGS[command.name]) if o.name in wanted
    })  # fmt: skip


def section_config(commands: list[AgentCommand]) -> tuple[dict[str, int], dict[str, int]]:
    """(manager config, registry config) of the section's `deploy`: defaults plus its --config."""
    manager, registry = dict(DEFAULT_MANAGER_CONFIG), dict(DEFAULT_REGISTRY_CONFIG)
    for c in commands:
        if c.name == "deploy" and c.option("--config") and "$VTP/" in c.option("--config"):
            given = json.loads((REPO / c.option("--config").removeprefix("$VTP/")).read_text())
            manager |= given.get("manager_config", {})
            registry |= given.get("registry_config", {})
    return manager, registry


def segments_of(submit: AgentCommand, commands: list[AgentCommand]) -> int:
    """n = steps / checkpoint interval of the job `submit` posts."""
    spec = submit.option("--spec")
    for c in commands:
        if c.argv[:2] == ("job", "build") and c.option("--out") == spec:
            return int(c.option("--steps")) // int(c.option("--checkpoint-every"))
    ref = json.loads(REFERENCE_JOB.read_text())
    return ref["steps"] // ref["checkpoint_every"]


def mints(commands: list[AgentCommand]) -> dict[str, int]:
    """{key (dev:N): tokens} the section's `deploy --mint` gives."""
    out: dict[str, int] = {}
    for c in commands:
        if c.name == "deploy":
            for item in c.options("--mint"):
                who, _, amount = item.rpartition("=")
                out[who] = tokens(amount)
    return out


def problems(text: str) -> list[str]:
    """Every way a role started as `text` (a README) says could not do its job."""
    everything = agent_commands(text)
    by_section: dict[str, list[AgentCommand]] = {}
    for c in everything:
        by_section.setdefault(c.section, []).append(c)
    roles = {
        name: [c for c in everything if c.name == name]
        for name in ("solver", "verifier", "whistleblower")
    }
    found: list[str] = []
    submits = [c for c in everything if c.name in ("submit", "submitter")]
    assert submits, "the README has no submit command"
    for submit in submits:
        commands = by_section[submit.section]
        manager, registry = section_config(commands)
        args = parsed(submit)
        reward, fee = tokens(args.reward), tokens(args.verification_fee)
        where = (
            f"{submit.section}: {submit.name} --reward {args.reward:g} "
            f"--verification-fee {args.verification_fee:g}"
        )
        tax = reward * manager["taxBps"] // BPS
        if reward <= fee + tax:
            found.append(f"{where}: reward not above fee + tax (RewardBelowFees)")
        if fee * manager["forcedErrorBps"] > reward * manager["taxBps"]:
            found.append(f"{where}: fee above the jackpot cap (FeeAboveJackpotCap)")
        n = segments_of(submit, commands)
        lock = verifier_lock(reward, fee, n, manager)
        for v in roles["verifier"]:
            stake = tokens(parsed(v).stake)
            if stake < lock:
                found.append(
                    f"{where}: {v.section}'s verifier stake {stake / TOKEN_UNIT:g} < "
                    f"its lock S {lock / TOKEN_UNIT:.2f} (n = {n}): never drawn"
                )
            if stake < registry["minVerifierStake"]:
                found.append(f"{v.section}: verifier stake below minVerifierStake")
        for s in roles["solver"]:
            stake = tokens(parsed(s).stake)
            collateral = reward * manager["collateralBps"] // BPS
            if stake < collateral or stake < registry["minSolverStake"]:
                found.append(
                    f"{where}: {s.section}'s solver stake {stake / TOKEN_UNIT:g} "
                    f"cannot claim (collateral {collateral / TOKEN_UNIT:g})"
                )
        for w in roles["whistleblower"]:
            if tokens(parsed(w).stake) < registry["minWhistleblowerStake"]:
                found.append(f"{w.section}: whistleblower stake below minWhistleblowerStake")
        # a section that deploys starts a network of its own: its verifiers fill the seats
        seated = [c for c in commands if c.name == "verifier"]
        deploys = any(c.name == "deploy" for c in commands)
        if deploys and len(seated) < manager["verifiersPerUnit"]:
            found.append(
                f"{submit.section}: {len(seated)} verifiers for {manager['verifiersPerUnit']} seats"
            )
        funded = mints(commands)
        if funded:
            found += mint_problems(commands, funded, reward, lock)
        stated = f"{lock / TOKEN_UNIT:.1f} tokens"
        if submit.section == JOURNEY and stated not in sections(text)[JOURNEY]:
            found.append(f"{JOURNEY}: its prose does not state S = {lock / TOKEN_UNIT:.1f} tokens")
    return found


def mint_problems(
    commands: list[AgentCommand], funded: dict[str, int], reward: int, lock: int
) -> list[str]:
    found = []
    for c in commands:
        if c.name not in ("submit", "submitter", "solver", "verifier", "whistleblower"):
            continue
        key = c.option("--key")
        have = funded.get(key, 0)
        need = reward if c.name in ("submit", "submitter") else tokens(parsed(c).stake)
        if c.name == "whistleblower":
            bond = max(DEFAULT_COURT["bond"], lock * DEFAULT_COURT["reward_bps"] // BPS)
            need += bond
        if have < need:
            found.append(
                f"{c.section}: {c.name} {key} is minted {have / TOKEN_UNIT:g} tokens, "
                f"needs {need / TOKEN_UNIT:g}"
            )
    return found


def test_every_role_the_readme_starts_can_do_its_job() -> None:
    assert problems(README.read_text()) == []


def test_the_readme_journey_is_read_in_full() -> None:
    """The check reads what it should: the journey's deploy, four roles, build, submit, fetch."""
    journey = [c for c in agent_commands() if c.section == JOURNEY]
    names = [" ".join(c.argv[:2]) if c.name == "job" else c.name for c in journey]
    assert names[0] == "deploy" and names.count("verifier") == 2
    for name in ("solver", "whistleblower", "job build", "submit", "job fetch"):
        assert name in names, names
    assert len(mints(journey)) == 5


def test_numbers_that_do_not_work_are_caught() -> None:
    """The README of before (`--reward 100 --verification-fee 10` with a verifier `--stake 300`:
    S = 1795.2) fails the check, and so do a short stake and a thin mint."""
    text = README.read_text()
    old = text.replace("--reward 10 --verification-fee 2.75", "--reward 100 --verification-fee 10")
    assert any("never drawn" in p and "1795.20" in p for p in problems(old)), problems(old)
    short = text.replace("--stake 200", "--stake 5")
    assert any("solver stake 5 cannot claim" in p for p in problems(short))
    thin = re.sub(r"--mint dev:5=\d+", "--mint dev:5=50", text)
    assert any("whistleblower dev:5 is minted 50" in p for p in problems(thin))
    fee = text.replace("--verification-fee 2.75", "--verification-fee 9.9")
    assert any("RewardBelowFees" in p for p in problems(fee))


def test_the_defaults_post_a_job_the_default_roles_can_run() -> None:
    """`submit` with no --reward / --verification-fee, and every role at its default --stake, on
    the reference job under the default deployment: a first job runs without picking numbers
    (the old defaults, 100 and 10, locked 1,795 tokens per verifier: none was ever drawn)."""
    fence = "`" * 3
    defaults = "\n".join(
        [
            "## Defaults",
            f"{fence}sh",
            "python -m agents solver --key dev:1",
            "python -m agents verifier --key dev:2",
            "python -m agents whistleblower --key dev:3",
            "python -m agents submit --key dev:0 --spec my-job.json",
            fence,
            "",
        ]
    )
    assert len(agent_commands(defaults)) == 4
    assert problems(defaults) == []
    old = defaults.replace(
        "--spec my-job.json", "--spec my-job.json --reward 100 --verification-fee 10"
    )
    assert any("never drawn" in p for p in problems(old)), problems(old)
