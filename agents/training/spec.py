"""Job spec: canonical versioned JSON, validation and spec_hash (PROTOCOL §5).

The canonical bytes are `json.dumps(obj, sort_keys=True, separators=(",", ":"))` in ASCII; the
spec hash is keccak-256 of them. Hyper-parameters are binary32 *bit patterns* written as
"0x" + 8 hex digits, so no decimal parser anywhere can round them differently. Version 1 has
exactly the fields below; a later version adds the decomposition (R rounds x S shards x k_local)
as new fields under a new version number, and version 1 keeps rejecting unknown fields.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agents.training import float32 as F
from agents.training.keccak import keccak256

SPEC_VERSION = 1
MAX_WIDTH = 1 << 16
MAX_LAYERS = 16
MAX_PARAMS = 1 << 28
MAX_BATCH = 1 << 16
MAX_STEPS = 1 << 32
_HEX32 = re.compile(r"^0x[0-9a-f]{8}$")
_HEX256 = re.compile(r"^0x[0-9a-f]{64}$")


class JobSpecError(ValueError):
    """An invalid job spec; `field` is the dotted path of the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(
            f"job spec field '{field}': {message}" if field else f"job spec: {message}"
        )
        self.field = field


@dataclass(frozen=True)
class JobSpec:
    widths: tuple[int, ...]  # layer widths d0 (features) .. dL (classes)
    dataset_name: str
    dataset_root: str  # "0x" + 64 hex: the dataset commitment (PROTOCOL §4)
    lr_bits: int  # learning rate as binary32 bits
    momentum_bits: int
    batch: int
    seed: int  # uint256
    steps: int  # T
    checkpoint_every: int  # k, divides T

    @property
    def lr(self) -> np.float32:
        return F.f32(self.lr_bits)

    @property
    def momentum(self) -> np.float32:
        return F.f32(self.momentum_bits)

    @property
    def n_params(self) -> int:
        w = self.widths
        return sum(w[i] * w[i + 1] + w[i + 1] for i in range(len(w) - 1))

    def to_obj(self) -> dict:
        return {
            "version": SPEC_VERSION,
            "model": {"arch": "mlp", "widths": list(self.widths)},
            "dataset": {"name": self.dataset_name, "root": self.dataset_root},
            "lr": f"0x{self.lr_bits:08x}",
            "momentum": f"0x{self.momentum_bits:08x}",
            "batch": self.batch,
            "seed": self.seed,
            "steps": self.steps,
            "checkpoint_every": self.checkpoint_every,
        }

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.to_obj())

    def spec_hash(self) -> bytes:
        return keccak256(self.canonical_bytes())


def canonical_json(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _obj(v, field: str, keys: set[str]) -> dict:
    if not isinstance(v, dict):
        raise JobSpecError(field, f"must be an object, got {type(v).__name__}")
    for k in keys - v.keys():
        raise JobSpecError(f"{field}.{k}" if field else k, "missing")
    for k in sorted(v.keys() - keys):
        raise JobSpecError(f"{field}.{k}" if field else k, "unknown field")
    return v


def _int(v, field: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise JobSpecError(field, f"must be an integer, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise JobSpecError(field, f"must be in [{lo}, {hi}], got {v}")
    return v


def _bits(v, field: str) -> int:
    if not isinstance(v, str) or not _HEX32.match(v):
        raise JobSpecError(field, 'must be binary32 bits as "0x" + 8 lowercase hex digits')
    b = int(v, 16)
    if not np.isfinite(F.f32(b)):
        raise JobSpecError(field, "must be a finite float")
    return b


def parse_spec(obj) -> JobSpec:
    """Validate a decoded JSON object; raises JobSpecError naming the first bad field."""
    keys = {"version", "model", "dataset", "lr", "momentum", "batch", "seed", "steps"}
    keys |= {"checkpoint_every"}
    if isinstance(obj, dict) and "version" in obj:
        _int(obj["version"], "version", SPEC_VERSION, SPEC_VERSION)
    o = _obj(obj, "", keys)
    model = _obj(o["model"], "model", {"arch", "widths"})
    if model["arch"] != "mlp":
        raise JobSpecError("model.arch", f'only "mlp" is defined, got {model["arch"]!r}')
    ws = model["widths"]
    if not isinstance(ws, list) or not 2 <= len(ws) <= MAX_LAYERS + 1:
        raise JobSpecError("model.widths", f"must be a list of 2..{MAX_LAYERS + 1} widths")
    widths = tuple(_int(w, f"model.widths[{i}]", 1, MAX_WIDTH) for i, w in enumerate(ws))
    ds = _obj(o["dataset"], "dataset", {"name", "root"})
    if not isinstance(ds["name"], str) or not 0 < len(ds["name"]) <= 200:
        raise JobSpecError("dataset.name", "must be a non-empty string of at most 200 chars")
    if not isinstance(ds["root"], str) or not _HEX256.match(ds["root"]):
        raise JobSpecError("dataset.root", 'must be "0x" + 64 lowercase hex digits')
    lr = _bits(o["lr"], "lr")
    if not F.f32(lr) > 0:
        raise JobSpecError("lr", "must be > 0")
    mom = _bits(o["momentum"], "momentum")
    if not 0 <= F.f32(mom) < 1:
        raise JobSpecError("momentum", "must be in [0, 1)")
    batch = _int(o["batch"], "batch", 1, MAX_BATCH)
    seed = _int(o["seed"], "seed", 0, 2**256 - 1)
    steps = _int(o["steps"], "steps", 1, MAX_STEPS)
    every = _int(o["checkpoint_every"], "checkpoint_every", 1, steps)
    if steps % every:
        raise JobSpecError("checkpoint_every", f"must divide steps ({steps}), got {every}")
    spec = JobSpec(widths, ds["name"], ds["root"], lr, mom, batch, seed, steps, every)
    if spec.n_params > MAX_PARAMS:
        raise JobSpecError("model.widths", f"{spec.n_params} parameters exceed {MAX_PARAMS}")
    return spec


def loads(text: str | bytes) -> JobSpec:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise JobSpecError("", f"not valid JSON: {e}") from None
    return parse_spec(obj)


def load(path: str | Path) -> JobSpec:
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise JobSpecError("", f"cannot read {path}: {e.strerror}") from None
    return loads(text)
