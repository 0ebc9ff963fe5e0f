"""Data-request cost by model size (issue #38, PROTOCOL §6.11): the gas and transaction count of
one request and its answer — `requestData`, `openDataState`, the header parts, the sample
batches — for the final state of three GPTs trained with AdamW: the char GPT of
examples/models/char_gpt.py (113k parameters), nanoGPT's shakespeare-char configuration (10.8M)
and GPT-2 small's layout (124M: vocabulary 50,257, d = 768, 12 layers and heads, context 1,024).

Each state has the version-3 layout `job build` gives (the parameters, AdamW's two moments per
parameter, its two bias-correction scalars; each tensor as its 2-D view, PROTOCOL §2.7): the
113k one is `job build`'s own initial state; the larger two are that layout filled with seeded
random numbers ("a synthetic state of that layout": building them through the front end would
measure the front end, not the answer). A unit is committed on a private Anvil with that state as
its final checkpoint, the submitter requests it, and the solver answers as the agents do
(agents/roles/holding.py: the opening, parts of 256 headers, samples in batches of 16).

Run: `python -m bench.availability_bench` (needs build/abi; a few minutes and ~5 GB of memory
for the 124M state). Writes bench/results/availability.json: per model the parameters, state
tensors and bytes, each call's gas, the totals, and whether they meet the issue's bound (≤ 10M
gas and ≤ 30 transactions); beside them, what posting the state on chain (the answer before,
~0.69 M gas and one transaction per 16 KiB) would have cost.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from web3 import Web3

from agents.core.chain import AnvilConfig, local_anvil
from agents.core.deploy import DEFAULT_ABI_DIR
from agents.dispute.availability import DATA_SAMPLES, StateOpening
from agents.model.job import view2d
from agents.roles.holding import SAMPLE_BATCH
from agents.training.merkle import checkpoint_root, final_proof
from bench.contracts_bench import Bench, fresh, setup_nodes

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "availability.json"
MODEL = ROOT / "examples" / "models" / "char_gpt.py"
GOAL_GAS, GOAL_TXS = 10_000_000, 30
#: What an answer cost when it posted the state: per 16 KiB post, measured before this change
#: (PROTOCOL §6.7's former table: `postData`, 64 chunks).
POST_GAS_PER_16KIB = 685_510
#: The GPTs measured: (name, char_gpt.GPT keyword arguments); None: the module's defaults.
MODELS = [
    ("char GPT (examples/models/char_gpt.py)", None),
    ("nanoGPT shakespeare-char (6 layers, d 384)",
     {"d": 384, "heads": 6, "layers": 6, "block_size": 256}),
    # GPT-2 ties its output head to the token embedding (one parameter used twice): 124.4M
    ("GPT-2 small layout (12 layers, d 768, tied head)",
     {"vocab": 50_257, "d": 768, "heads": 12, "layers": 12, "block_size": 1024, "tied": True}),
]  # fmt: skip


def built_state() -> dict[str, torch.Tensor]:
    """`job build`'s initial state of the char GPT (AdamW), as its root commits it."""
    from agents.__main__ import main as agents_main
    from agents.cli.job import load_job

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "gpt.json"
        with contextlib.redirect_stdout(io.StringIO()):
            code = agents_main(["job", "build", "--model", f"{MODEL}:make_model", "--dataset",
                                "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003",
                                "--batch", "2",
                                "--steps", "4", "--checkpoint-every", "2", "--out", str(spec),
                                "--json"])  # fmt: skip
        if code != 0:
            raise RuntimeError("job build of the char GPT failed")
        _, st = load_job(str(spec), None)
    return {k: view2d(v) for k, v in st.items()}


def synthetic_state(kwargs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The layout `job build` gives a char_gpt.GPT(**kwargs) with AdamW, filled with seeded
    random numbers: p.<name>, m.<name>, v.<name> per parameter, then adam.b1t, adam.b2t.
    `tied`: the output head is the token embedding (GPT-2's), one parameter."""
    sys.path.insert(0, str(MODEL.parent))
    import char_gpt

    kwargs = dict(kwargs)
    tied = kwargs.pop("tied", False)
    with torch.device("meta"):  # shapes only: the values are drawn below
        module = char_gpt.GPT(**kwargs)
    named = [(n, p) for n, p in module.named_parameters() if not (tied and n == "lm_head.weight")]
    g = torch.Generator().manual_seed(7)
    st: dict[str, torch.Tensor] = {}
    for group in ("p", "m", "v"):
        for name, p in named:
            st[f"{group}.{name}"] = view2d(torch.randn(p.shape, generator=g))
    for name in ("adam.b1t", "adam.b2t"):
        st[name] = view2d(torch.rand((), generator=g))
    return st


def measure(b: Bench, opening: StateOpening) -> dict[str, Any]:
    """Commit a unit whose final checkpoint is the opening's state; the submitter requests it and
    the solver answers. Every call's gas, in order."""
    unit, _ = b.to_selected(solver=2)
    roots = [fresh("checkpoint", unit, c) for c in range(4)] + [opening.state_root]
    root = checkpoint_root(roots)
    seal = Web3.keccak(root + fresh("secret", unit))
    b.send(2, b.manager.functions.commitCheckpoints(unit, root, 5, roots[-1], final_proof(roots),
                                                   "http://solver/blobs#0x01", seal))  # fmt: skip
    b.mine()
    b.send(9, b.manager.functions.drawVerifiers(unit))
    calls: list[tuple[str, int]] = []
    calls.append(("requestData", b.gas(1, b.manager.functions.requestData(unit, 4))))
    s = opening.open_state(roots, 4)
    fn = b.manager.functions.openDataState(unit, s.tensor_count, s.state_tree, s.checkpoint_proof)
    calls.append(("openDataState", b.gas(2, fn)))
    for part in opening.header_parts():
        fn = b.manager.functions.openDataHeaders(unit, *part.args())
        calls.append((f"openDataHeaders ({len(part.headers)} headers)", b.gas(2, fn)))
    seed_block = b.manager.functions.dataRequestOf(unit).call()[4]
    seed = bytes(b.w3.eth.get_block(seed_block)["hash"])
    for first in range(0, DATA_SAMPLES, SAMPLE_BATCH):
        batch = [x.args() for x in opening.samples(seed, first, SAMPLE_BATCH)]
        fn = b.manager.functions.proveDataSamples(unit, batch, "http://solver/blobs#0x02")
        calls.append((f"proveDataSamples ({SAMPLE_BATCH} samples)", b.gas(2, fn)))
    assert b.manager.functions.getUnit(unit).call()[0] == 5, "the request is not answered"
    return {"calls": [{"call": c, "gas": g} for c, g in calls],
            "transactions": len(calls), "total_gas": sum(g for _, g in calls),
            "largest_call_gas": max(g for _, g in calls)}  # fmt: skip


def run() -> dict[str, Any]:
    results = []
    with local_anvil(AnvilConfig(extra_args=("--gas-limit", "60000000"))) as url:
        b = Bench(Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 600})), DEFAULT_ABI_DIR)
        setup_nodes(b)
        for name, kwargs in MODELS:
            t0 = time.monotonic()
            st = built_state() if kwargs is None else synthetic_state(kwargs)
            params = sum(t.numel() for k, t in st.items() if k.startswith("p."))
            nbytes = 4 * sum(t.numel() for t in st.values())
            opening = StateOpening(st)
            build_s = time.monotonic() - t0
            got = measure(b, opening)
            posts = math.ceil(nbytes / 16_384)
            results.append({
                "model": name,
                "parameters": params,
                "state_tensors": opening.tensor_count,
                "state_bytes": nbytes,
                "state_chunks": opening.total_leaves,
                **got,
                "meets_bound": got["total_gas"] <= GOAL_GAS and got["transactions"] <= GOAL_TXS,
                "posting_the_state_instead": {"transactions": posts + 2,
                                              "gas": posts * POST_GAS_PER_16KIB},
                "opening_build_s": round(build_s, 1),
            })  # fmt: skip
            print(
                f"{name}: {params:,} parameters, {opening.tensor_count} tensors: "
                f"{got['transactions']} transactions, {got['total_gas']:,} gas",
                flush=True,
            )
            del st, opening
    return {
        "what": "gas and transactions of one data request and its answer (PROTOCOL §6.11)",
        "goal": {"max_gas": GOAL_GAS, "max_transactions": GOAL_TXS},
        "samples": DATA_SAMPLES,
        "sample_batch": SAMPLE_BATCH,
        "results": results,
        "all_meet_the_bound": all(r["meets_bound"] for r in results),
    }


def main() -> int:
    out = run()
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0 if out["all_meet_the_bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
