"""The least gas a role gives a call whose cost depends on state a rival can change between my
gas estimate and my transaction's inclusion (agents/core/tx.gas_limit).

A claim is estimated against the unit as it is; when rivals' claims land first, mine reads every
earlier claimant (AlreadyClaimed) and fills slots nobody filled before: on a recycled record the
estimate (62,805 gas, the warm lifecycle of bench/results/contracts.json) plus the sender's
margin gave 85,939 where the second claimant needed 99,299, and on a fresh record the sixteenth
claimant (MAX_CLAIMANTS) needs 131,605 against a lone claim's estimate of 97,042 (126,450 with
the margin). The floor is that worst case with headroom; tests/roles/test_claim_gas_floor.py
measures it on chain, so a contract change that makes the worst case dearer fails there.

A post is estimated against the record it would take now: a recycled one (89,586 gas, the warm
lifecycle) when the record cursor is on a free one. Posts sent together (`submit --count`) take
the free records in turn, and the later ones in the same block take new records (231,465 on a
fresh deployment): in issue #45's load bench, 107 of 200 posts estimated on a recycled record
ran out of gas. The floor covers a new record with headroom.
"""

from __future__ import annotations

from typing import Any

#: JobManager function name -> the least gas its transaction is given.
STATE_GAS_FLOORS: dict[str, int] = {
    "claim": 150_000,  # the 16th claimant on a fresh record: 131,605 measured
    "postJob": 300_000,  # a post on a new record: 231,465 (bench/results/contracts.json)
}


def gas_floor(contract_function: Any) -> int:
    """The floor for a web3 ContractFunction (0: its estimate and margin are enough)."""
    return STATE_GAS_FLOORS.get(getattr(contract_function, "fn_name", ""), 0)
