"""A dev network's parties: who plays which role with which dev key (`Party`), their tokens
(`fund`), and the audit that no agent sent a transaction twice (`audit_sends`).

Shared by the demos (scripts/), the role scenarios' kit (tests/roles/rolekit.py) and the benches
that run agent processes, so that none of them imports another's script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eth_account import Account
from web3 import Web3
from web3.logs import DISCARD

from agents.core.chain import dev_private_key
from agents.core.deploy import load_artifact

TOKEN = 10**18

#: What a dev network's job pays, unless its command names its own: the demos' and the role
#: scenarios' deployments (verifier lock, stakes) and their figures (a slashed collateral of 100, a
#: solver paid 88) are set for a job of 100 with a fee of 10, the submitter's defaults before they
#: became the README's 10 and 2.75.
JOB_PAY = ("--reward", "100", "--verification-fee", "10")


class DevnetError(RuntimeError):
    """A dev-network step failed (a mint reverted)."""


@dataclass
class Party:
    name: str
    role: str
    key_index: int
    extra: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return Account.from_key(dev_private_key(self.key_index)).address


def fund(w3: Web3, token_addr: str, deployer_key: str, parties: list[Party]) -> None:
    token = w3.eth.contract(address=token_addr, abi=load_artifact("TestToken")["abi"])
    acct = Account.from_key(deployer_key)
    nonce = w3.eth.get_transaction_count(acct.address, "pending")
    hashes = []
    for p in parties:
        tx = token.functions.mint(p.address, 1000 * TOKEN).build_transaction(
            {"from": acct.address, "nonce": nonce, "chainId": w3.eth.chain_id}
        )
        hashes.append(w3.eth.send_raw_transaction(acct.sign_transaction(tx).raw_transaction))
        nonce += 1
    for h in hashes:
        if w3.eth.wait_for_transaction_receipt(h, timeout=60)["status"] != 1:
            raise DevnetError("minting dev tokens failed")


def audit_sends(w3: Web3, first: int, data_dirs: dict[str, Path]) -> list[dict]:
    """Transactions sent twice, from the chain's history and the agents' intent records.

    Every transaction an agent sends belongs to one recorded intent (one logical action); a
    double send is a mined transaction that is not the recorded one of exactly one intent, or
    two mined transactions for one intent."""
    from agents.core.store import Store

    problems: list[dict] = []
    for sender, folder in data_dirs.items():
        db = folder / "agent.db"
        if not db.exists():
            continue
        store = Store(db)
        try:
            intents = store.intents(sender)
        finally:
            store.close()
        by_hash = {i.tx_hash.lower(): i.intent_id for i in intents}
        mined: dict[str, list[str]] = {}
        for n in range(first, w3.eth.block_number + 1):
            for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
                if tx["from"] != sender:
                    continue
                h = "0x" + bytes(tx["hash"]).hex()
                intent = by_hash.get(h.lower())
                if intent is None:
                    problems.append({"from": sender, "tx": h, "problem": "no recorded intent"})
                else:
                    mined.setdefault(intent, []).append(h)
        for intent, hashes in mined.items():
            if len(hashes) > 1:
                problems.append({"from": sender, "intent": intent, "txs": hashes})
    return problems


def post_job_like(
    w3: Web3,
    addresses: dict[str, str],
    key_index: int,
    like: int,
    reward: int = 100 * TOKEN,
    fee: int = 10 * TOKEN,
) -> int:
    """Post a new job with job `like`'s spec, data and size from dev key `key_index`, open for
    claims for an hour; its id. What a second submitter of the same model does, without an
    agent (the explorer's test watches it appear)."""
    manager = w3.eth.contract(
        address=addresses["JobManager"], abi=load_artifact("JobManager")["abi"], decode_tuples=True
    )
    j = manager.functions.getJob(like).call()
    now = int(w3.eth.get_block("latest")["timestamp"])
    params = (bytes(j.specHash), bytes(j.datasetRoot), bytes(j.initialStateRoot), j.steps,
              j.checkpointInterval, (j.deviceClass, j.memoryMiB, j.throughput), reward, fee,
              now + 3600, j.computeTime, bytes(j.configHash))  # fmt: skip
    return post_job(w3, addresses, key_index, params)


def post_job(w3: Web3, addresses: dict[str, str], key_index: int, params: tuple) -> int:
    """Approve the reward and post `params` (IJobManager.JobParams, in its order) from dev key
    `key_index`; the new job's id."""
    manager = w3.eth.contract(
        address=addresses["JobManager"], abi=load_artifact("JobManager")["abi"]
    )
    token = w3.eth.contract(address=addresses["Token"], abi=load_artifact("TestToken")["abi"])
    acct = Account.from_key(dev_private_key(key_index))
    reward = params[6]
    nonce = w3.eth.get_transaction_count(acct.address, "pending")
    receipt = None
    for call in (
        token.functions.approve(manager.address, reward),
        manager.functions.postJob(params),
    ):
        tx = call.build_transaction(
            {"from": acct.address, "nonce": nonce, "chainId": w3.eth.chain_id}
        )
        h = w3.eth.send_raw_transaction(acct.sign_transaction(tx).raw_transaction)
        receipt = w3.eth.wait_for_transaction_receipt(h, timeout=60)
        if receipt["status"] != 1:
            raise DevnetError(f"posting a job from dev:{key_index} reverted")
        nonce += 1
    (posted,) = manager.events.JobPosted().process_receipt(receipt, errors=DISCARD)
    return int(posted["args"]["jobId"])
