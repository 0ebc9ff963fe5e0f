"""An aggregator that commits a wrong aggregate (--cheat) and/or withholds its blob (--withhold:
publishes a locator to nothing, so others must ask for reveals on chain). For demos and tests
only: what the honest aggregator's check, reveal requests, proofs and aggregation game exist to
catch."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from agents.adversaries.banner import Announced
from agents.adversaries.faults import FaultyAggregation, aggregation_cheats
from agents.dispute.aggregation import AggregationComputation
from agents.roles.aggregator import HonestAggregator
from agents.training.keccak import keccak256
from agents.training.state import State


def corrupt(st: State, tensor: int, element: int) -> State:
    """A copy of `st` with one element of its `tensor`-th tensor changed by 0.5."""
    out = {k: v.clone() for k, v in st.items()}
    name = list(out)[tensor]
    flat = out[name].reshape(-1)
    flat[element] = flat[element] + torch.tensor(0.5, dtype=flat.dtype)
    return out


@dataclass(frozen=True, kw_only=True)
class CheatingAggregator(Announced, HonestAggregator):
    """`corrupts`: commits the honest aggregate with element 5 of its first tensor changed
    (version 2), or (version 3) the honest account of the round wrapped into one whose H_{r+1}
    has one element of the outer-updated state wrong (a high bit of one element of one of its
    producers flipped: faults.aggregation_cheats), which it then defends in the game;
    `withholds`: publishes the address of no blob (its own, hashed with b"withheld")."""

    corrupts: bool = False
    withholds: bool = False
    banner: str = ""
    # honest H_{r+1} root -> the cheating account made of it (the same one every turn)
    _cheats: dict[bytes, FaultyAggregation] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        said = [("commit aggregates with one element changed", self.corrupts),
                ("publish locators to nothing", self.withholds)]  # fmt: skip
        object.__setattr__(
            self, "banner", "CHEATING: will " + " and ".join(w for w, on in said if on)
        )

    def aggregate_to_commit(self, honest: State) -> State:
        return corrupt(honest, 0, 5) if self.corrupts else honest

    def aggregation(self, honest: AggregationComputation) -> AggregationComputation:
        if not self.corrupts:
            return honest
        key = honest.final_root()
        if key not in self._cheats:
            ((_, _, cheat),) = aggregation_cheats(honest, 1, seed=0, outputs_only=True)
            self._cheats[key] = cheat
        return self._cheats[key]

    def published_address(self, address: str) -> str:
        if not self.withholds:
            return address
        return "0x" + keccak256(bytes.fromhex(address[2:]) + b"withheld").hex()
