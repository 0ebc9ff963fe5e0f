"""Every role's settings: one frozen dataclass per role, each default defined here once.

A role process is built from one of these (agents/roles/runner.py `run_role`), never from a
parsed command line: the CLI (agents/cli/options.py) turns each field into its flag and its
VTP_ environment variable (`setting`: help, parse, flag and variable names) and a command line
into the dataclass, flag > variable > default, every problem at once. Cross-field checks are the
roles' own (`RoleAgent.check_config`).

    RoleConfig              what every role has: the agent (key, node, data folder, blobs),
                            the deployment it works on, logging, its memory and fetch budgets
      PublisherConfig       + the blobs it publishes for others (solver, verifier, aggregator)
        SolverConfig, VerifierConfig, AggregatorConfig
      WhistleblowerConfig, SubmitterConfig, NodeConfig
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agents.core.config import (  # noqa: F401 - DEFAULT_DEPLOYMENT: re-exported, where roles find it
    DEFAULT_DEPLOYMENT,
    AgentConfig,
    nonneg,
    nonneg_int,
    positive,
    positive_int,
    setting,
)
from agents.core.fetches import DEFAULT_FETCH_WORKERS
from agents.data.chunks import FetchConfig
from agents.dispute.budget import DEFAULT_STATE_CACHE_BYTES
from agents.roles.jobs import DEFAULT_MAX_LOADED_JOBS, DEFAULT_MAX_PARAMS

#: Million multiply-adds a second a solver's engine sustains in training (conservative for one
#: CPU core): what its claims are planned with unless --train-speed says otherwise.
DEFAULT_TRAIN_SPEED = 200.0
DEFAULT_MAX_CLAIM_WAIT = 4 * 3600  # seconds
NODE_ACTIONS = ("status", "add-stake", "unbond", "withdraw-unbonded", "withdraw", "set-network")
#: NodeRegistry.MIN_BANDWIDTH_MBPS, MAX_BANDWIDTH_MBPS (PROTOCOL §6.2)
BANDWIDTH_MBPS_RANGE = (1, 1_000_000)


def address(text: str) -> str:
    from web3 import Web3  # here: commands that take no address never import web3 (~0.5 s)

    if not Web3.is_address(text):
        raise ValueError("not an address")
    return Web3.to_checksum_address(text)


def folder(text: str) -> Path:
    if not Path(text).is_dir():
        raise ValueError("not a folder")
    return Path(text)


def host_port(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("expected HOST:PORT, e.g. 0.0.0.0:8600")
    return text


def bandwidth_mbps(text: str) -> int:
    lo, hi = BANDWIDTH_MBPS_RANGE
    if not text.strip().isdigit() or not lo <= int(text) <= hi:
        raise ValueError(f"expected whole Mbit/s from {lo} to {hi:,}")
    return int(text)


def zone_id(text: str) -> int:
    """A network zone (PROTOCOL §6.2) as REGION.SITE (each 0-255, the site at least 1) or as
    its number region * 256 + site."""
    region, dot, site = text.strip().rpartition(".")
    try:
        r, z = (int(region), int(site)) if dot else divmod(int(text, 0), 256)
    except ValueError:
        raise ValueError("expected REGION.SITE, e.g. 1.2 (or region * 256 + site)") from None
    if not (0 <= r <= 255 and 1 <= z <= 255):
        raise ValueError("region must be 0-255 and site 1-255 (site 0 marks no zone)")
    return r * 256 + z


@dataclass(frozen=True, kw_only=True)
class RoleConfig:
    """What every role process has."""

    agent: AgentConfig
    fetch: FetchConfig = field(default_factory=FetchConfig)
    manager: str | None = setting(
        None, "JobManager address (token, registry, arbiter are read from it); default: the "
        "JobManager in --deployment", parse=address)  # fmt: skip
    deployment: Path = setting(
        DEFAULT_DEPLOYMENT, "deployment JSON written by `deploy` or `make demo`"
    )
    court: str | None = setting(
        None, "AttestationCourt address (attestation disputes); default: the one in --deployment "
        "when it belongs to the same JobManager, else none", parse=address)  # fmt: skip
    round_manager: str | None = setting(
        None, "RoundManager address (decomposed jobs); default: the one in --deployment when it "
        "belongs to the same JobManager, else none", parse=address)  # fmt: skip
    lens: str | None = setting(
        None, "JobLens address (a unit's reads in one call); default: the one in --deployment "
        "when it belongs to the same JobManager, else none: each unit is then read getter by "
        "getter, one verifierStatus per drawn verifier", parse=address)  # fmt: skip
    spec_store: tuple[str, ...] = setting(
        (), "extra blob store(s) to fetch job specs from (repeatable)", metavar="URL"
    )
    json_logs: bool = setting(False, "one JSON object per log line")
    progress: bool = setting(True, "never draw progress bars")
    verbose: bool = setting(False, "debug logging")
    run_for: float = setting(
        0.0, "stop after this many seconds (0: run until SIGINT/SIGTERM)", parse=nonneg
    )
    mine_when_idle: bool = setting(
        False, "dev chains only: mine an empty block (evm_mine) each round nothing else happens, "
        "so deadlines pass on an automining chain; paced so that chain time does not run ahead "
        "of the wall clock")  # fmt: skip
    device: str = setting(
        "cpu", "where I train and replay: cpu (the native kernels) or cuda (the device kernels "
        "of agents/training/triton_ops.py, the same bits); without CUDA it says so in one line "
        "and runs on the CPU")  # fmt: skip
    max_params: int = setting(
        DEFAULT_MAX_PARAMS, "take part only in jobs whose model has at most this many "
        "parameters: a state is 4 bytes a parameter, twice with the optimizer's",
        parse=positive_int)  # fmt: skip
    state_cache_mib: int = setting(
        DEFAULT_STATE_CACHE_BYTES >> 20, "memory for the training states all my replays and "
        "disputes keep together (least recently used out first, recomputed when needed again)",
        parse=positive_int)  # fmt: skip
    max_loaded_jobs: int = setting(
        DEFAULT_MAX_LOADED_JOBS, "how many jobs' datasets and engines I keep in memory at once "
        "(least recently used out first, loaded again when needed)",
        parse=positive_int)  # fmt: skip
    fetch_workers: int = setting(
        DEFAULT_FETCH_WORKERS, "reads of other parties' data (checkpoints) run at once, off the "
        "round loop; each waits at most a quarter of its window's time left, then I replay "
        "myself", parse=positive_int)  # fmt: skip
    allow_local_locators: bool = setting(
        False, "dev chains only: also read checkpoints from blob locators naming a local folder "
        "(agents sharing one disk); otherwise a locator must be an http(s) URL")  # fmt: skip

    @property
    def state_cache_bytes(self) -> int:
        return self.state_cache_mib << 20


@dataclass(frozen=True, kw_only=True)
class PublisherConfig(RoleConfig):
    """A role that publishes blobs other agents read (checkpoints, aggregates, the results it
    holds)."""

    serve_blobs: str | None = setting(
        None, "serve my blob folder read-only over HTTP here (the locator I commit then "
        "points at it unless --public-blob-url is given)", parse=host_port,
        metavar="HOST:PORT")  # fmt: skip
    public_blob_url: str | None = setting(
        None, "blob store URL others read my blobs from (default: --blob-url / the data "
        "folder's blobs)")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SolverConfig(PublisherConfig):
    stake: float = setting(200.0, "tokens to stake on registration", parse=positive)
    device_class: int = setting(0, "declared device class", parse=nonneg_int)
    memory_mib: int = setting(4096, "declared memory in MiB", parse=nonneg_int)
    throughput: int = setting(
        1000, "declared throughput score (registered; submitters may require a minimum)",
        parse=nonneg_int)  # fmt: skip
    train_speed: float = setting(
        DEFAULT_TRAIN_SPEED, "million multiply-adds per second my engine sustains in training; "
        "a unit is claimed only if its estimate fits computeTime / 2 after the units I hold",
        parse=positive, metavar="MMAC/S")  # fmt: skip
    max_claim_wait: int = setting(
        DEFAULT_MAX_CLAIM_WAIT, "claim no unit whose claim deadline is further away: the claim "
        "locks my collateral until then", parse=nonneg_int, metavar="SECONDS")  # fmt: skip
    units_per_round: int = setting(
        1, "decomposed jobs: take at most this many units of one round (0: no limit)",
        parse=nonneg_int)  # fmt: skip

    @property
    def capability(self) -> tuple[int, int, int]:
        return (self.device_class, self.memory_mib, self.throughput)


@dataclass(frozen=True, kw_only=True)
class VerifierConfig(PublisherConfig):
    stake: float = setting(
        300.0, "tokens to stake on registration; each drawn unit locks its verifier lock S "
        "(JobManager.verifierLockOf: 143.8 tokens for a digits job at the default "
        "lazySlashFactor), and a verifier whose free stake cannot cover S is not drawn",
        parse=positive)  # fmt: skip
    replay_all: bool = setting(
        False, "replay every segment, not only the sampled ones (attest the sampled)"
    )


@dataclass(frozen=True, kw_only=True)
class WhistleblowerConfig(RoleConfig):
    stake: float = setting(20.0, "tokens to stake on registration", parse=positive)
    leaked_secrets: Path | None = setting(
        None, "a folder standing for an off-chain leak channel: each file <unitId>.hex holds a "
        "solver's forced-error secret in hex; one that matches the assignee's claim before the "
        "verdicts are fixed is reported (reportPrematureReveal: the solver is slashed)",
        parse=folder, metavar="DIR")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SubmitterConfig(RoleConfig):
    spec: str = setting(help="job spec JSON file (PROTOCOL §5)", env=None)
    spec_blobs: str | None = setting(
        None, "version-3 specs: the blob store holding the model bundle and initial state "
        "(default: where `job build` wrote them: recorded beside the spec, else <spec>.blobs)",
        metavar="URL")  # fmt: skip
    # With 2.75 of it as the fee, a job of the reference's 10 checkpoints locks 143.8 tokens in
    # each drawn verifier's stake, under the default stake 300 of `verifier` (the lock grows
    # with the solver's pay; tests/foundation/test_readme_numbers.py).
    reward: float = setting(
        10.0, "tokens escrowed for the job (a version-2 spec: for each of its R x S units); each "
        "drawn verifier locks a multiple of the solver's pay from its stake (PROTOCOL §6.5)",
        parse=positive)  # fmt: skip
    aggregator_reward: float = setting(
        5.0, "version-2 specs: tokens paid to each round's aggregator", parse=nonneg
    )
    verification_fee: float = setting(
        2.75, "part of the reward shared by attesting verifiers", parse=nonneg
    )
    claim_window: float = setting(
        3600.0, "seconds from now until the first claim window closes", parse=positive
    )
    compute_time: float = setting(
        3600.0, "seconds the assigned solver has to commit", parse=positive
    )
    device_class: int = setting(0, "minimum solver device class", parse=nonneg_int)
    memory_mib: int = setting(0, "minimum solver memory (MiB)", parse=nonneg_int)
    throughput: int = setting(0, "minimum solver throughput", parse=nonneg_int)
    out: Path | None = setting(None, "write the result JSON here too", env=None)
    no_follow: bool = setting(
        False, "post the job (and its dispute config) and exit: `job status ID` reads it later",
        env=None)  # fmt: skip
    count: int = setting(
        1, "post this many jobs of the spec at once, from this one process (one approval, the "
        "posts sent together); each job's id is printed", parse=positive_int, env=None)  # fmt: skip

    @property
    def requirements(self) -> tuple[int, int, int]:
        return (self.device_class, self.memory_mib, self.throughput)


@dataclass(frozen=True, kw_only=True)
class AggregatorConfig(PublisherConfig):
    stake: float = setting(200.0, "tokens to stake (as a solver)", parse=positive)


@dataclass(frozen=True, kw_only=True)
class NodeConfig(RoleConfig):
    action: str = setting(
        help="what to do (status: read only)", positional=True, choices=NODE_ACTIONS, env=None
    )
    amount: str | None = setting(
        None, "tokens, for add-stake and unbond (unbond: or `all`)", positional=True, nargs="?",
        env=None)  # fmt: skip
    json: bool = setting(False, "print the status as one JSON object", env=None)
    bandwidth_mbps: int | None = setting(
        None, "set-network: my link bandwidth in Mbit/s, as declared to the registry",
        parse=bandwidth_mbps, env=None, metavar="MBIT/S")  # fmt: skip
    zone: int | None = setting(
        None, "set-network: my network zone REGION.SITE (nodes of one site: low mutual "
        "latency; sites of one region: neighbours)", parse=zone_id, env=None,
        metavar="REGION.SITE")  # fmt: skip
