"""Forced errors end to end (PROTOCOL §8.1): every round is forced (forcedErrorBps = 10 000), so
the solver agent publishes its checkpoints with one perturbed; the honest verifier (replaying
every segment) disputes the published root and attests its own end roots, the lazy verifier
attests without replaying (the first to answer seals, the last attests in the clear); once both
attested the solver reveals: the dispute is voided (the challenger gets back its bond, the
scaled challengeBondOf it quoted), the honest verifier, RIGHT, is paid from the jackpot, the lazy
one, WRONG, is slashed without a game, the solver keeps its stake and is paid. The verifiers lock
the lazy-slash S (PROTOCOL §8) with lazySlashFactor = 4 = ceil(1.25 e / p) at p = 100 %:
96 * 3 * 4 / 2 = 576 tokens (the job pays its solver 96 for 2 segments)."""

from __future__ import annotations

import time

import pytest
import rolekit as rk
from eth_account import Account
from web3 import Web3

pytestmark = pytest.mark.timeout(420)
TOKEN = 10**18
SEEDER = 9  # dev account that seeds the jackpot by missing a commit deadline


def _send(w3: Web3, key_index: int, fn) -> None:
    acct = Account.from_key(rk.dev_private_key(key_index))
    tx = fn.build_transaction(
        {
            "from": acct.address,
            "nonce": w3.eth.get_transaction_count(acct.address, "pending"),
            "chainId": w3.eth.chain_id,
        }
    )
    receipt = w3.eth.wait_for_transaction_receipt(
        w3.eth.send_raw_transaction(acct.sign_transaction(tx).raw_transaction), timeout=60
    )
    assert receipt["status"] == 1, fn.fn_name


def _jump(w3: Web3, seconds: int) -> None:
    """Move chain time on and mine, so that gas estimation sees the new time."""
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def _seed_jackpot(w3: Web3, addrs: dict, manager, registry) -> None:
    """A solver claims a job and misses its commit deadline: 100 tokens of collateral go to the
    jackpot, enough to pay a catcher J = the forced job's fee."""
    token = rk.contract(w3, "TestToken", addrs["Token"])
    seeder = rk.Party("seeder", "solver", SEEDER)
    rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [seeder])
    for spender in (registry.address, manager.address):
        _send(w3, SEEDER, token.functions.approve(spender, 2**256 - 1))
    _send(w3, SEEDER, registry.functions.register(1, (0, 0, 0), 200 * TOKEN))
    now = w3.eth.get_block("latest")["timestamp"]
    # (spec, dataset, initial root, T, k, capability, reward, fee, claim deadline, compute time,
    # dispute config)
    params = (
        b"\1" * 32, b"\2" * 32, b"\3" * 32, 2, 1, (0, 0, 0), 100 * TOKEN, 0, now + 5, 5,
        b"\4" * 32,
    )  # fmt: skip
    _send(w3, SEEDER, manager.functions.postJob(params))
    unit = manager.functions.jobCount().call() << 32
    _send(w3, SEEDER, manager.functions.claim(unit, Web3.keccak(b"seeder")))
    _jump(w3, 6)
    _send(w3, SEEDER, manager.functions.closeClaims(unit))
    seed_block = manager.functions.getUnit(unit).call()[5]
    while w3.eth.block_number <= seed_block:  # 1 s blocks: the seed block's hash must exist
        time.sleep(0.2)
    _send(w3, SEEDER, manager.functions.selectAssignee(unit))
    _jump(w3, 6)
    _send(w3, SEEDER, manager.functions.expireAssignment(unit))
    assert manager.functions.jackpot().call() == 100 * TOKEN


def test_forced_round_reveal_pays_the_catcher_and_slashes_the_lazy_verifier(tmp_path):
    spec = rk.write_spec(tmp_path / "spec.json", steps=400, every=200)  # 2 segments
    submitter = rk.Party("submitter", "submitter", 1)
    solver = rk.Party("solver", "solver", 2, ["--stake", "200"])
    honest = rk.Party("verifier", "verifier", 5, ["--stake", "700", "--replay-all"])
    lazy = rk.Party("verifier-lazy", "verifier", 6, ["--stake", "700", "--lazy"])
    with rk.chain() as (url, w3):
        cfg = {"forcedErrorBps": 10_000, "lazySlashFactor": 4, "verifiersPerUnit": 2}
        addrs = rk.deploy(w3, {**cfg, "verifyWindow": 90})
        rk.fund(w3, addrs["Token"], rk.dev_private_key(0), [submitter, solver, honest, lazy])
        manager = rk.contract(w3, "JobManager", addrs["JobManager"])
        registry = rk.contract(w3, "NodeRegistry", addrs["NodeRegistry"])
        _seed_jackpot(w3, addrs, manager, registry)
        # the windows' waits after everyone acted (the one solver claimed; both verifiers
        # responded and the forced error was revealed) are skipped on chain (rk.Warp); the
        # seeder's abandoned job 1 stays open and is not waited for
        warp = rk.Warp(url, addrs, claimants=1, skip_jobs=(1,))
        with rk.agents(tmp_path, url, addrs["JobManager"]) as ag, warp:
            for p in (solver, honest, lazy):
                ag.start(p)
            rk.wait_registered(registry, ag, [solver, honest, lazy])
            # fee <= 2 % of the reward: the jackpot cap at forcedErrorBps = 10 000
            ag.start(
                submitter,
                *("--spec", str(spec), "--claim-window", "8", "--compute-time", "300"),
                *("--reward", "100", "--verification-fee", "2"),
            )
            rk.wait_for(
                "the forced error's reveal",
                lambda: bool(manager.events.ForcedErrorRevealed().get_logs(from_block=0)),
                240,
                ag,
                ("solver", "verifier", "verifier-lazy"),
            )
            rk.wait_job_completed(ag, 150, ("solver",))
            assert any(m.startswith("unit") and "forced round" in m for m in ag.messages("solver"))

        (revealed,) = manager.events.ForcedErrorRevealed().get_logs(from_block=0)
        assert revealed["args"]["solver"] == solver.address and revealed["args"]["position"] == 1
        # the first to answer sealed, the last attested in the clear (or both sealed); every
        # opening came after every seal, and the secret after both attestations
        sealed = manager.events.AttestationSealed().get_logs(from_block=0)
        opened = manager.events.Attested().get_logs(from_block=0)
        both = sorted([honest.address, lazy.address])
        assert sealed and {e["args"]["verifier"] for e in sealed} <= set(both)
        assert sorted(e["args"]["verifier"] for e in opened) == both
        assert max(e["blockNumber"] for e in sealed) < min(e["blockNumber"] for e in opened)
        assert max(e["blockNumber"] for e in opened) < revealed["blockNumber"]
        # the honest verifier disputed the perturbed root: the dispute was voided, its bond
        # refunded; its opened attestation was RIGHT, so it was paid J = the fee from the
        # jackpot when the unit finalized (the only catcher; as the challenger it would get
        # nothing more)
        (voided,) = manager.events.DisputeVoided().get_logs(from_block=0)
        assert voided["args"]["challenger"] == honest.address
        # the agent paid the bond quoted by challengeBondOf: half the 100-token collateral, not
        # the 10-token floor (an agent approving the flat bond opens no dispute)
        (opened,) = manager.events.ChallengeOpened().get_logs(from_block=0)
        unit = opened["args"]["unitId"]
        assert opened["args"]["challenger"] == honest.address
        assert opened["args"]["bond"] == manager.functions.challengeBondOf(unit).call()
        assert opened["args"]["bond"] == 50 * TOKEN
        paid = manager.events.JackpotPaid().get_logs(from_block=0)
        assert [(e["args"]["catcher"], e["args"]["amount"]) for e in paid] == [
            (honest.address, 2 * TOKEN)
        ]
        # the lazy verifier attested without replaying: judged WRONG at the reveal, and its lock
        # was slashed without a game when the unit finalized with C standing
        (judged,) = manager.events.AttestationJudgedWrong().get_logs(from_block=0)
        assert judged["args"]["verifier"] == lazy.address
        lock = manager.functions.verifierLockOf(
            manager.functions.jobIdOf(revealed["args"]["unitId"]).call()
        ).call()
        assert lock == 576 * TOKEN and judged["args"]["amount"] == lock
        penalised = manager.events.VerifierPenalised().get_logs(from_block=0)
        assert [(e["args"]["verifier"], e["args"]["amount"]) for e in penalised] == [
            (lazy.address, lock)
        ]
        assert registry.functions.getNode(lazy.address).call()[8] == 700 * TOKEN - lock  # stake
        # the solver proved its forced error: it was paid and never slashed
        slashed = [e["args"]["node"] for e in registry.events.NodeSlashed().get_logs(from_block=0)]
        assert solver.address not in slashed and lazy.address in slashed
        (final,) = manager.events.UnitFinalized().get_logs(from_block=0)
        assert final["args"]["solver"] == solver.address and final["args"]["solverPay"] > 0
        assert manager.functions.getUnit(final["args"]["unitId"]).call()[8] is True
