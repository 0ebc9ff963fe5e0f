"""Gas of the Float32 library: add/sub/mul/div per call, RepOps.dot at K = 64, 256, 1024, and
the version-3 elementwise scalars (sqrt, tanh32, erf32, toI32, fromI32, maximum, minimum).

Run: `python bench/float32_bench.py` (starts a local Anvil through ape, ~1 minute). Writes
bench/results/float32.json.

Method: Float32Harness.gasOfMany / gasOfDot read gasleft() immediately before and after the
internal library call and subtract the cost of one bare gasleft() pair measured in the same
loop iteration (so loop, calldata decoding and result storage are excluded). The figure is the
gas a contract pays for the call itself, including the internal JUMP in and out and argument
passing. For dot the figure also includes copying both calldata vectors into memory (RepOps.dot
takes memory arrays). exp32/log32/tanh32/erf32 use OpHarness.gasOfUnaryMany and
sqrt/toI32/fromI32 Float32Harness.gasOfUnaryMany the same way. The calls are made with eth_call
(no intrinsic transaction gas involved).
"""

from __future__ import annotations

import json
import random
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "float32.json"
NETWORK = "ethereum:local:foundry"
SEED = 20261129
N_PER_CLASS = 150


def _f32_bits(v: float) -> int:
    return struct.unpack(">I", struct.pack(">f", v))[0]


def _pattern(rng: random.Random, cls: str) -> int:
    s = rng.choice([0, 0x80000000])
    if cls == "normal":
        return s | (rng.randint(100, 154) << 23) | rng.getrandbits(23)
    if cls == "wide":
        return s | (rng.randint(1, 254) << 23) | rng.getrandbits(23)
    if cls == "subnormal":
        return s | rng.randint(1, 0x7FFFFF)
    if cls == "special":
        return rng.choice(
            [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF]
        )
    if cls == "huge":
        return s | (rng.randint(230, 254) << 23) | rng.getrandbits(23)
    raise ValueError(cls)


def sample(rng: random.Random) -> tuple[list[int], list[int], dict[str, int]]:
    """Representative operand pairs: mostly training-range normals, plus the hard classes."""
    a: list[int] = []
    b: list[int] = []
    classes: dict[str, int] = {}

    def put(name: str, pairs: list[tuple[int, int]]) -> None:
        classes[name] = len(pairs)
        for x, y in pairs:
            a.append(x)
            b.append(y)

    n = N_PER_CLASS
    put(
        "normal x normal (exponents 100..154)",
        [(_pattern(rng, "normal"), _pattern(rng, "normal")) for _ in range(4 * n)],
    )
    put("full exponent range", [(_pattern(rng, "wide"), _pattern(rng, "wide")) for _ in range(n)])
    put(
        "subnormal operand",
        [
            (_pattern(rng, "subnormal"), _pattern(rng, rng.choice(["normal", "subnormal"])))
            for _ in range(n // 2)
        ],
    )
    ties = []
    for _ in range(n // 2):  # x + half-ulp(x): exact ties
        x = _pattern(rng, "normal")
        e = (x >> 23) & 0xFF
        ties.append((x, (rng.choice([0, 0x80000000])) | ((e - 24) << 23)))
    put("ties (x, half-ulp)", ties)
    canc = []
    for _ in range(n // 2):  # nearby magnitudes, opposite signs: cancellation
        x = _pattern(rng, "normal")
        canc.append((x, (x ^ 0x80000000) + rng.randint(-3, 3)))
    put("cancellation", canc)
    put(
        "overflow (huge x huge)",
        [(_pattern(rng, "huge"), _pattern(rng, "huge")) for _ in range(n // 4)],
    )
    put(
        "specials (0, inf, NaN)",
        [
            (_pattern(rng, "special"), _pattern(rng, rng.choice(["special", "normal"])))
            for _ in range(n // 4)
        ],
    )
    return a, b, classes


def main() -> int:
    from ape import accounts, networks, project

    rng = random.Random(SEED)
    a, b, classes = sample(rng)
    results: dict = {
        "method": __doc__.split("Method:")[1].strip().replace("\n", " "),
        "compiler": "solc 0.8.37, optimizer 200 runs, evm paris (ape-config.yaml)",
        "sample": {"seed": SEED, "size": len(a), "classes": classes},
        "ops": {},
        "dot": {},
        "goals": {"add_avg": 800, "mul_avg": 600, "dot_K256": 600_000},
        "notes": "exp32: x uniform in [-30, 30]; log32: positive normals of every binade; "
        "tanh32/erf32: x uniform in [-5, 5]; sqrt: positive patterns of every binade and "
        "subnormals; toI32: x uniform in [-1e6, 1e6]; fromI32: uniform 32-bit words; "
        "maximum/minimum: the add sample",
    }
    t0 = time.time()
    with networks.parse_network_choice(NETWORK):
        sender = accounts.test_accounts[0]
        h = sender.deploy(project.Float32Harness)
        chunk = 200
        for op_id, op in [
            (0, "add"),
            (1, "sub"),
            (2, "mul"),
            (3, "div"),
            (10, "maximum"),
            (11, "minimum"),
        ]:
            gas: list[int] = []
            for i in range(0, len(a), chunk):
                res = h.gasOfMany(op_id, a[i : i + chunk], b[i : i + chunk])
                gas.extend(int(g) for g in res[0])
            normal = gas[: classes["normal x normal (exponents 100..154)"]]
            results["ops"][op] = {
                "avg": round(statistics.fmean(gas), 1),
                "max": max(gas),
                "min": min(gas),
                "avg_normal_operands": round(statistics.fmean(normal), 1),
                "calls": len(gas),
            }
        ops_h = sender.deploy(project.OpHarness)
        xs = [_f32_bits(rng.uniform(-30.0, 30.0)) for _ in range(300)]  # softmax-range inputs
        pos = [_pattern(rng, "wide") & 0x7FFFFFFF for _ in range(300)]  # positive, any binade
        v3 = random.Random(SEED + 3)  # its own stream: the earlier samples stay as they were
        act = [_f32_bits(v3.uniform(-5.0, 5.0)) for _ in range(300)]  # activation inputs
        roots = pos[:250] + [_pattern(v3, "subnormal") & 0x7FFFFFFF for _ in range(50)]
        ints = [_f32_bits(v3.uniform(-1e6, 1e6)) for _ in range(300)]
        words = [v3.getrandbits(32) for _ in range(300)]
        unary = [
            (ops_h, 0, "exp32", xs),
            (ops_h, 1, "log32", pos),
            (ops_h, 3, "tanh32", act),
            (ops_h, 4, "erf32", act),
            (h, 9, "sqrt", roots),
            (h, 10, "toI32", ints),
            (h, 11, "fromI32", words),
        ]
        for harness, op_id, name, args in unary:
            gas = [int(g) for g in harness.gasOfUnaryMany(op_id, args)[0]]
            results["ops"][name] = {
                "avg": round(statistics.fmean(gas), 1),
                "max": max(gas),
                "min": min(gas),
                "calls": len(gas),
            }
        for k in (64, 256, 1024):
            xs = [_pattern(rng, "normal") for _ in range(k)]
            ys = [_pattern(rng, "normal") for _ in range(k)]
            g, _ = h.gasOfDot(xs, ys)
            results["dot"][f"K={k}"] = {"gas": int(g), "per_element": round(int(g) / k, 1)}
    results["seconds"] = round(time.time() - t0, 1)
    ok = (
        results["ops"]["add"]["avg"] <= 800
        and results["ops"]["mul"]["avg"] <= 600
        and results["dot"]["K=256"]["gas"] <= 600_000
    )
    results["goals_met"] = ok
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
