"""Verifier-draw benchmark: is the draw uniform over the pool as it stood before the seed block,
and does it fill seats as PROTOCOL §6.5 says? Measured on the real NodeRegistry.

Run: `python -m bench.draw_bench` (needs build/abi from `make compile`; starts a private Anvil,
about a minute). A pool of ENTRIES verifiers is registered, EXITED of them leave (their entries
die), the seed block is fixed, then LATE nodes register: the first EXITED take the dead
entries (last freed first), the rest append new ones. Then, only through
`pickPoolMember(Verifier, word, seedBlock, …)`:
- `uniformity`: WORDS random words; each live pre-seed node should be hit WORDS/P times
  (P = `poolSizeBefore(seedBlock)`), the dead and late entries never; chi-square over the live
  nodes with its p-value (Wilson–Hilferty);
- `seats`: DRAWS seeds run the job manager's loop (w = 2 seats, 4w tries, drawn ones excluded);
  the distribution of seats filled against the exact one (each try succeeds with probability
  (L − k)/P when k of the L eligible nodes are already drawn).
Writes bench/results/draw.json.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from eth_account import Account
from web3 import Web3

from agents.core.chain import AnvilConfig, connect, dev_private_key, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR, load_artifact

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "draw.json"
E18 = 10**18
VERIFIER = 2
CAP = (1, 16_384, 100)
ENTRIES, EXITED, LATE = 48, 16, 20
WORDS, DRAWS, SEATS = 4_800, 500, 2
REG_CFG = (100 * E18, 50 * E18, 10 * E18, 3_600, 3_600)  # NodeRegistry.Config, ABI order
ACCOUNTS = 1 + ENTRIES + LATE


class Chain:
    def __init__(self, w3: Web3) -> None:
        self.w3 = w3
        self.keys = [dev_private_key(i) for i in range(ACCOUNTS)]
        self.addr = [Account.from_key(k).address for k in self.keys]
        self.nonce = {i: 0 for i in range(ACCOUNTS)}
        self.token = self.deploy("TestToken")
        self.registry = self.deploy("NodeRegistry", self.token.address, REG_CFG)

    def deploy(self, name: str, *args: Any) -> Any:
        art = load_artifact(name, DEFAULT_ABI_DIR)
        factory = self.w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"])
        receipt = self.wait([self.sign(0, factory.constructor(*args))])[0]
        return self.w3.eth.contract(address=receipt["contractAddress"], abi=art["abi"])

    def sign(self, who: int, fn: Any) -> bytes:
        tx = fn.build_transaction(
            {
                "from": self.addr[who],
                "nonce": self.nonce[who],
                "chainId": self.w3.eth.chain_id,
                "gas": 3_000_000,
            }
        )
        self.nonce[who] += 1
        signed = Account.sign_transaction(tx, self.keys[who])
        return self.w3.eth.send_raw_transaction(signed.raw_transaction)

    def wait(self, hashes: list[bytes]) -> list[Any]:
        receipts = [self.w3.eth.wait_for_transaction_receipt(h) for h in hashes]
        if any(r["status"] != 1 for r in receipts):
            raise RuntimeError("a set-up transaction reverted")
        return receipts

    def register(self, nodes: range) -> None:
        t, r = self.token.functions, self.registry.functions
        self.wait([self.sign(0, t.mint(self.addr[i], 100 * E18)) for i in nodes])
        self.wait([self.sign(i, t.approve(self.registry.address, 2**256 - 1)) for i in nodes])
        self.wait([self.sign(i, r.register(VERIFIER, CAP, 60 * E18)) for i in nodes])

    def pick(self, word: int, before: int, exclude: list[str]) -> str | None:
        fn = self.registry.functions.pickPoolMember(VERIFIER, word, before, exclude, 1)
        picked = fn.call()
        return None if int(picked, 16) == 0 else picked


def exact_seats(live: int, size: int, seats: int, tries: int) -> list[float]:
    """P(k seats filled) for the loop: each try picks one of `size` entries uniformly and fills
    a seat if it holds one of the `live` eligible nodes not drawn yet; it stops at `seats`."""
    dist = [1.0] + [0.0] * seats
    for _ in range(tries):
        nxt = [0.0] * (seats + 1)
        for k, p in enumerate(dist):
            if k == seats:
                nxt[k] += p
                continue
            hit = (live - k) / size
            nxt[k + 1] += p * hit
            nxt[k] += p * (1 - hit)
        dist = nxt
    return dist


def chi2_p_value(chi2: float, df: int) -> float:
    """Upper tail of the chi-square distribution (Wilson–Hilferty normal approximation)."""
    z = ((chi2 / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def run(c: Chain) -> dict[str, Any]:
    rng = random.Random(20261130)
    reg = c.registry.functions
    first = range(1, 1 + ENTRIES)
    c.register(first)
    leavers = rng.sample(list(first), EXITED)
    c.wait([c.sign(i, reg.requestUnbond(60 * E18)) for i in leavers])
    seed_block = c.w3.eth.block_number + 1
    c.w3.provider.make_request("evm_mine", [])
    c.register(range(1 + ENTRIES, ACCOUNTS))  # into the dead entries first, then appended
    size = reg.poolSizeBefore(VERIFIER, seed_block).call()
    live = [c.addr[i] for i in first if i not in leavers]
    late = set(c.addr[1 + ENTRIES :])

    hits: dict[str, int] = {a: 0 for a in live}
    empty = late_hits = 0
    for _ in range(WORDS):
        picked = c.pick(rng.getrandbits(256), seed_block, [])
        if picked is None:
            empty += 1
        elif picked in late:
            late_hits += 1
        else:
            hits[picked] += 1
    expected = WORDS / size
    chi2 = sum((h - expected) ** 2 / expected for h in hits.values())

    filled = [0] * (SEATS + 1)
    for _ in range(DRAWS):
        seed = rng.getrandbits(256).to_bytes(32, "big")
        drawn: list[str] = []
        for t in range(4 * SEATS):
            if len(drawn) == SEATS:
                break
            word = int.from_bytes(Web3.keccak(seed + t.to_bytes(32, "big")), "big")
            picked = c.pick(word, seed_block, drawn)
            if picked is not None:
                drawn.append(picked)
        filled[len(drawn)] += 1
    exact = exact_seats(len(live), size, SEATS, 4 * SEATS)
    return {
        "pool": {
            "entries_before_seed": size,
            "live_before_seed": len(live),
            "exited_before_seed": EXITED,
            "late_into_dead_entries": min(LATE, EXITED),
            "late_appended": max(0, LATE - EXITED),
            "entries_now": reg.poolSize(VERIFIER).call(),
            "dead_now": reg.deadPoolEntries(VERIFIER).call(),
        },
        "uniformity": {
            "words": WORDS,
            "expected_hits_per_live_node": round(expected, 2),
            "min_hits": min(hits.values()),
            "max_hits": max(hits.values()),
            "chi2": round(chi2, 2),
            "df": len(live) - 1,
            "p_value": round(chi2_p_value(chi2, len(live) - 1), 3),
            "empty_words": empty,
            "expected_empty_words": round(WORDS * EXITED / size, 1),
            "late_joiner_hits": late_hits,
        },
        "seats": {
            "draws": DRAWS,
            "seats": SEATS,
            "tries": 4 * SEATS,
            "filled": {str(k): n for k, n in enumerate(filled)},
            "exact": {str(k): round(DRAWS * p, 1) for k, p in enumerate(exact)},
        },
    }


def main() -> int:
    with local_anvil(AnvilConfig(accounts=ACCOUNTS)) as url:
        result = run(Chain(connect(url)))
    result["notes"] = (
        "late_joiner_hits must be 0 (PROTOCOL §6.5); empty words ≈ the dead share of P; seats "
        "filled ≈ the exact distribution"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
