"""Fixtures of the marketplace contract tests: a deployed, wired protocol and helpers.

`deployment` deploys TestToken, NodeRegistry, JobManager and MockArbiter with the defaults of
`agents.core.deploy` (but the flat verifier lock, as `make demo` has) and wires them as
`deploy_all` does.
ape snapshots the chain around every test, so module-scoped deployments cost one deploy.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from ape.exceptions import ContractLogicError
from eth_abi import decode
from eth_abi import encode as abi_encode
from eth_utils import keccak

from agents.core.deploy import (
    DEFAULT_MANAGER_CONFIG,
    DEFAULT_REGISTRY_CONFIG,
    MANAGER_FIELDS,
    REGISTRY_FIELDS,
)
from agents.core.enums import JobStatus, Role, UnitStatus, VerifierStatus
from agents.training.merkle import checkpoint_root, final_proof

E18 = 10**18
# Short names of the protocol's enums (agents/core/enums.py, the one copy) for the scenarios
SOLVER, VERIFIER, WHISTLEBLOWER = Role.SOLVER, Role.VERIFIER, Role.WHISTLEBLOWER
U_OPEN, U_SELECTING, U_ASSIGNED = UnitStatus.OPEN, UnitStatus.SELECTING, UnitStatus.ASSIGNED
U_COMMITTED, U_VERIFYING, U_DISPUTED = (
    UnitStatus.COMMITTED,
    UnitStatus.VERIFYING,
    UnitStatus.DISPUTED,
)
U_FINAL, U_CANCELLED = UnitStatus.FINALIZED, UnitStatus.CANCELLED
J_OPEN, J_COMPLETED, J_CANCELLED = JobStatus.OPEN, JobStatus.COMPLETED, JobStatus.CANCELLED
V_PENDING, V_ATTESTED = VerifierStatus.PENDING, VerifierStatus.ATTESTED
V_SEALED, V_SLASHED = VerifierStatus.SEALED, VerifierStatus.SLASHED

REG_CFG = dict(DEFAULT_REGISTRY_CONFIG)
# The flat verifierLock (lazySlashFactor 0) so that the scenarios' 100-token verifiers can be
# drawn for any job; the lazy-slash lock S (PROTOCOL §8) has its own tests (test_job_manager's
# `lazy` deployment, test_forced_errors, the stateful test).
MGR_CFG = {**DEFAULT_MANAGER_CONFIG, "lazySlashFactor": 0}
CAP = (1, 16_384, 100)  # deviceClass, memoryMiB, throughput


def checkpoint_list(n: int, tag: int = 0x20) -> tuple[bytes, bytes, list[bytes]]:
    """A made-up list of `n` state roots as a commitment takes it: (the checkpoint root, the
    final state root — the list's last entry — and the proof that opens it, PROTOCOL §6.5)."""
    roots = [keccak(bytes([tag]) + i.to_bytes(4, "big")) for i in range(n)]
    return checkpoint_root(roots), roots[-1], final_proof(roots)


# The 5-checkpoint list (20 steps, interval 4) the scenarios commit
ROOT, FINAL, FINAL_PROOF = checkpoint_list(5)
# The solvers' forced-error secret, its hash (claim) and the seal of ROOT (commit): PROTOCOL §8.
SECRET = b"\x5e" * 32
SECRET_HASH = keccak(SECRET)
SEAL = keccak(ROOT + SECRET)


@dataclass
class Protocol:
    token: Any
    registry: Any
    manager: Any
    arbiter: Any
    deployer: Any
    submitter: Any
    solvers: list[Any]
    verifiers: list[Any]
    whistleblower: Any
    other: Any
    # the AttestationCourt and its MockSegmentGame (`deploy_protocol(..., court=True)`)
    court: Any = None
    court_game: Any = None


def job_params(now: int, **overrides: Any) -> tuple:
    """A valid JobParams tuple (ABI order) for a job posted at `now`."""
    p: dict[str, Any] = {
        "specHash": b"\x01" * 32,
        "datasetRoot": b"\x02" * 32,
        "initialStateRoot": b"\x03" * 32,
        "steps": 8,
        "checkpointInterval": 2,
        "required": (1, 8_192, 50),
        "reward": 100 * E18,
        "verificationFee": 10 * E18,
        "claimDeadline": now + 600,
        "computeTime": 3_600,
        "configHash": b"\x04" * 32,
    }
    p.update(overrides)
    return tuple(p.values())


#: AttestationCourt constructor values of `deploy_protocol(..., court=True)` (deploy_all's defaults)
COURT_BOND, COURT_PENALTY, COURT_REWARD_BPS = 10 * E18, 20 * E18, 5_000
COURT_WINDOW = 7 * 24 * 3600


def deploy_protocol(
    project, accounts, mgr_cfg: dict[str, int], court: bool = False, slashers: tuple = ()
) -> Protocol:
    """Deploy and wire the protocol with manager config `mgr_cfg`; fund and approve accounts.
    With `court`, also an AttestationCourt (a registry slasher) playing a MockSegmentGame;
    `slashers`: more registry slashers (accounts standing in for protocol contracts)."""
    deployer = accounts[0]
    token = deployer.deploy(project.TestToken)
    registry = deployer.deploy(
        project.NodeRegistry, token, tuple(REG_CFG[k] for k in REGISTRY_FIELDS)
    )
    manager = deployer.deploy(
        project.JobManager, registry, tuple(mgr_cfg[k] for k in MANAGER_FIELDS)
    )
    manager.setExtension(deployer.deploy(project.JobManagerExtension, manager), sender=deployer)
    arbiter = deployer.deploy(project.MockArbiter)
    court_contract = court_game = None
    if court:
        court_contract = deployer.deploy(
            project.AttestationCourt,
            manager,
            registry,
            COURT_BOND,
            COURT_PENALTY,
            COURT_REWARD_BPS,
            COURT_WINDOW,
        )
        court_game = deployer.deploy(project.MockSegmentGame)
        court_game.wire(court_contract, sender=deployer)
        court_contract.setGame(court_game, sender=deployer)
    registry.setSlashers(
        [manager] + ([court_contract] if court else []) + list(slashers), sender=deployer
    )
    arbiter.wire(manager, sender=deployer)
    manager.setArbiter(arbiter, sender=deployer)
    for acct in accounts[1:10]:
        token.mint(acct, 10_000 * E18, sender=deployer)
        token.approve(registry, 2**256 - 1, sender=acct)
        token.approve(manager, 2**256 - 1, sender=acct)
        if court:
            token.approve(court_contract, 2**256 - 1, sender=acct)
    return Protocol(
        token=token,
        registry=registry,
        manager=manager,
        arbiter=arbiter,
        deployer=deployer,
        submitter=accounts[1],
        solvers=[accounts[2], accounts[3], accounts[4]],
        verifiers=[accounts[5], accounts[6], accounts[7]],
        whistleblower=accounts[8],
        other=accounts[9],
        court=court_contract,
        court_game=court_game,
    )


@pytest.fixture(scope="module")
def deployment(project, accounts) -> Protocol:
    return deploy_protocol(project, accounts, MGR_CFG)


def stake_nodes(d: Protocol) -> None:
    """Register three solvers (200 each), three verifiers (100) and a whistleblower (20)."""
    for s in d.solvers:
        d.registry.register(SOLVER, CAP, 200 * E18, sender=s)
    for v in d.verifiers:
        d.registry.register(VERIFIER, CAP, 100 * E18, sender=v)
    d.registry.register(WHISTLEBLOWER, CAP, 20 * E18, sender=d.whistleblower)


@pytest.fixture(scope="module")
def staked(deployment: Protocol) -> Protocol:
    """The deployment with three solvers (200 each), three verifiers (100) and a whistleblower."""
    stake_nodes(deployment)
    return deployment


def now(chain) -> int:
    return chain.pending_timestamp


def advance(chain, seconds: int) -> None:
    """Move the clock forward by `seconds` and mine a block (works on Anvil and py-evm)."""
    chain.mine(1, timestamp=chain.pending_timestamp + seconds)


def _error_selector(name: str, abi_items: list) -> tuple[bytes, list[str], list[str]] | None:
    for item in abi_items:
        if getattr(item, "type", None) == "error" and item.name == name:
            types = [i.canonical_type for i in item.inputs]
            sig = f"{name}({','.join(types)})"
            return keccak(text=sig)[:4], types, [i.name for i in item.inputs]
    return None


def _revert_data(exc: ContractLogicError) -> bytes:
    for candidate in (getattr(exc, "revert_message", None), getattr(exc, "message", None)):
        if not isinstance(candidate, str):
            continue
        if candidate.startswith("0x"):
            return bytes.fromhex(candidate[2:])
        # ape renders an undecoded error of a call as "custom error 0x<selector>: <raw bytes>"
        match = re.fullmatch(r"custom error 0x([0-9a-fA-F]{8}): (.*)", candidate, re.DOTALL)
        if match:
            return bytes.fromhex(match.group(1)) + match.group(2).encode("latin-1")
    raise AssertionError(f"no revert data in {exc!r}")


@contextlib.contextmanager
def reverts(contract: Any, name: str, **inputs: Any) -> Iterator[None]:
    """Assert the block reverts with custom error `name` of `contract` and the given inputs.

    Stricter than `ape.reverts`: the error must be the named one (checked by selector, so errors
    bubbling up from another contract are recognised) and every given input must match.
    """
    spec = _error_selector(name, contract.contract_type.abi)
    assert spec is not None, f"{name} is not an error of {contract.contract_type.name}"
    selector, types, names = spec
    try:
        yield
    except ContractLogicError as exc:
        from ape.exceptions import CustomError

        if isinstance(exc, CustomError):
            assert type(exc).__name__ == name, f"expected {name}, got {type(exc).__name__}"
            actual = dict(exc.inputs)
        else:
            data = _revert_data(exc)
            assert data[:4] == selector, f"expected {name}, got revert data {data.hex()}"
            actual = dict(zip(names, decode(types, data[4:]), strict=True))
        for key, want in inputs.items():
            assert key in actual, f"{name} has no input {key!r}"
            got = actual[key]
            if isinstance(want, str) and isinstance(got, str):
                assert got.lower() == want.lower(), f"{name}.{key}: {got} != {want}"
            else:
                assert got == want, f"{name}.{key}: {got!r} != {want!r}"
    else:
        raise AssertionError(f"did not revert (expected {name})")


def unit_of(manager: Any, job_id: int) -> int:
    return manager.unitIdOf(job_id, 0)


def post(d: Protocol, chain, **overrides: Any) -> tuple[int, int]:
    """Post a job as the submitter; return (jobId, unitId)."""
    tx = d.manager.postJob(job_params(now(chain), **overrides), sender=d.submitter)
    job_id = tx.events.filter(d.manager.JobPosted)[0].jobId
    return job_id, unit_of(d.manager, job_id)


def assign(d: Protocol, chain, solver: Any | None = None, **overrides: Any) -> tuple[int, int]:
    """Post a job and walk its unit to Assigned with `solver` (default solvers[0]) alone."""
    solver = solver or d.solvers[0]
    job_id, unit_id = post(d, chain, **overrides)
    d.manager.claim(unit_id, SECRET_HASH, sender=solver)
    advance(chain, 601)
    d.manager.closeClaims(unit_id, sender=d.other)
    chain.mine(1)
    d.manager.selectAssignee(unit_id, sender=d.other)
    return job_id, unit_id


def commit(d: Protocol, chain, unit_id: int, solver: Any | None = None) -> None:
    solver = solver or d.solvers[0]
    d.manager.commitCheckpoints(
        unit_id, ROOT, 5, FINAL, FINAL_PROOF, "blob://unit", SEAL, sender=solver
    )


def verifying(d: Protocol, chain, **overrides: Any) -> tuple[int, int]:
    """Post, assign, commit and draw verifiers: the unit is Verifying."""
    job_id, unit_id = assign(d, chain, **overrides)
    commit(d, chain, unit_id)
    chain.mine(1)
    d.manager.drawVerifiers(unit_id, sender=d.other)
    return job_id, unit_id


def challenger_wins(d: Protocol, chain, game: int) -> Any:
    """The arbiter rules game `game` for the challenger. With forced errors on (every deployment
    here but those with forcedErrorBps 0) a win before the round's reveal slot ends is held
    (`DisputeResultHeld`): wait past its `until` and settle it (PROTOCOL §6.6). Returns the
    receipt that carries `DisputeResolved`."""
    tx = d.arbiter.resolve(game, True, sender=d.other)
    held = tx.events.filter(d.manager.DisputeResultHeld)
    if not held:
        return tx
    chain.mine(1, timestamp=max(chain.pending_timestamp, held[0].until + 1))
    return d.manager.settleDispute(held[0].unitId, sender=d.other)


def by_address(accounts_list: list[Any], address: str) -> Any:
    for a in accounts_list:
        if a.address.lower() == address.lower():
            return a
    raise KeyError(address)


SALT = b"\x5a" * 32


def attestation_seal(
    d: Protocol, unit_id: int, verifier: Any, roots: list[bytes], salt: bytes = SALT
) -> bytes:
    """`JobManager.sealOf` computed here: keccak of (unit, attempt, verifier, roots, salt)."""
    attempt = d.manager.getUnit(unit_id).attempt
    types = ["uint256", "uint32", "address", "bytes32[]", "bytes32"]
    return keccak(abi_encode(types, [unit_id, attempt, verifier.address, roots, salt]))


def seal_attestation(
    d: Protocol, unit_id: int, verifier: Any, roots: list[bytes], salt: bytes = SALT
) -> Any:
    seal = attestation_seal(d, unit_id, verifier, roots, salt)
    return d.manager.sealAttestation(unit_id, seal, sender=verifier)


def attest(
    d: Protocol, chain, unit_id: int, pairs: list[tuple[Any, list[bytes]]], salt: bytes = SALT
) -> list:
    """Each (verifier, roots) seals, then opens its seal: at once if every drawn verifier sealed,
    else once the challenge window is over. Returns the opening receipts."""
    for verifier, roots in pairs:
        seal_attestation(d, unit_id, verifier, roots, salt)
    drawn = d.manager.getVerifiers(unit_id)
    if any(d.manager.verifierStatus(unit_id, v)[0] == V_PENDING for v in drawn):
        advance(chain, max(0, d.manager.getUnit(unit_id).deadline - chain.pending_timestamp + 1))
    return [d.manager.attest(unit_id, roots, salt, sender=verifier) for verifier, roots in pairs]
