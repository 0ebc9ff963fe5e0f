"""Job spec: canonical versioned JSON, validation and spec_hash (PROTOCOL §5).

The canonical bytes are `json.dumps(obj, sort_keys=True, separators=(",", ":"))` in ASCII; the
spec hash is keccak-256 of them. Hyper-parameters are binary32 *bit patterns* written as
"0x" + 8 hex digits, so no decimal parser anywhere can round them differently. Version 1 has
exactly the fields below (one worker, T steps) and keeps rejecting unknown fields; version 2 adds
the task decomposition (`rounds` R x `shards` S units of `local_steps` k_local steps each, with
T = R * k_local; decompose.py runs it); version 3 (`ModelSpec`) trains a general model given as
{graph, state} with an optimizer object (agents/model). A version-1 or -2 spec's bytes and hash
never change.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agents.training import float32 as F
from agents.training.keccak import keccak256

SPEC_VERSION = 1  # the single-worker job (kept: importers compare against it)
SPEC_VERSION_DECOMPOSED = 2
SPEC_VERSION_MODEL = 3  # a general model: {graph, state} (agents/model)
# Hyper-parameters of each optimizer, in the step graph's input order ("clip_norm" is optional
# and comes last); PROTOCOL §5.3 states each one's range.
OPTIMIZER_HYPER = {
    "sgd": ("lr", "momentum"),
    "nesterov": ("lr", "momentum"),  # SGD with Nesterov momentum
    "adam": ("lr", "beta1", "beta2", "eps", "weight_decay"),  # L2 decay added to the gradient
    "adamw": ("lr", "beta1", "beta2", "eps", "weight_decay"),  # decoupled decay
}
DECOMPOSITION_FIELDS = ("rounds", "shards", "local_steps")
# a decomposed version-3 job also names its outer optimizer and binds its aggregation graph
MODEL_DECOMPOSITION_FIELDS = (*DECOMPOSITION_FIELDS, "outer", "aggregate")
# the outer optimizer's hyper-parameters (PROTOCOL §5.2): none for plain averaging
OUTER_HYPER = {"average": (), "nesterov": ("lr", "momentum")}
OUTER_LR_MAX = 2.0  # the outer lr's range is (0, 2]: DiLoCo's 0.7 and averaging's 1 inside
# a decomposed version-3 job runs on the RoundManager, which posts at most 64 units a round
MAX_MODEL_SHARDS = 64
MAX_SHARDS = 1 << 24  # no dataset has more examples (synthetic n <= 2^24); S <= N is checked too
MAX_WIDTH = 1 << 16
MAX_LAYERS = 16
MAX_PARAMS = 1 << 28
MAX_BATCH = 1 << 16
# JobManager keeps a job's steps in 32 bits (TooManySteps above; PROTOCOL §6.3)
MAX_STEPS = (1 << 32) - 1
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
    checkpoint_every: int  # k, divides T (version 2: the interval inside a unit, divides k_local)
    # version 2 only (version 1: one round, one shard, k_local = T)
    version: int = SPEC_VERSION
    rounds: int = 1  # R
    shards: int = 1  # S
    local_steps: int | None = None  # k_local; None in version 1

    @property
    def k_local(self) -> int:
        """Steps per unit: k_local in version 2, T in version 1 (the job is one unit)."""
        return self.steps if self.local_steps is None else self.local_steps

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
        obj = {
            "version": self.version,
            "model": {"arch": "mlp", "widths": list(self.widths)},
            "dataset": {"name": self.dataset_name, "root": self.dataset_root},
            "lr": f"0x{self.lr_bits:08x}",
            "momentum": f"0x{self.momentum_bits:08x}",
            "batch": self.batch,
            "seed": self.seed,
            "steps": self.steps,
            "checkpoint_every": self.checkpoint_every,
        }
        if self.version == SPEC_VERSION_DECOMPOSED:
            obj |= {"rounds": self.rounds, "shards": self.shards, "local_steps": self.k_local}
        return obj

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.to_obj())

    def spec_hash(self) -> bytes:
        return keccak256(self.canonical_bytes())


@dataclass(frozen=True)
class ModelSpec:
    """A version-3 job: the model is the keccak-256 of its bundle (graph blob) and the root of
    its initial state; the optimizer's hyper-parameters are binary32 bits."""

    graph: str  # "0x" + 64 hex: keccak-256 of the model bundle's canonical bytes
    state: str  # "0x" + 64 hex: the state root of S_0
    dataset_name: str
    dataset_root: str
    optimizer: str  # a key of OPTIMIZER_HYPER
    hyper_bits: tuple[tuple[str, int], ...]  # (name, binary32 bits) in graph input order
    batch: int
    seed: int
    steps: int
    checkpoint_every: int
    version: int = SPEC_VERSION_MODEL
    # decomposition, as version 2's: R rounds x S shards of k_local steps (absent: one unit)
    rounds: int = 1
    shards: int = 1
    local_steps: int | None = None
    # a decomposed job's outer optimizer ("average" | "nesterov", its hyper-parameters as
    # binary32 bits) and the hash of its aggregation graph (agents/model/aggregate.py)
    outer: str = "average"
    outer_bits: tuple[tuple[str, int], ...] = ()
    aggregate: str | None = None

    @property
    def k_local(self) -> int:
        return self.steps if self.local_steps is None else self.local_steps

    @property
    def decomposed(self) -> bool:
        return self.local_steps is not None

    def hyper(self) -> dict[str, np.float32]:
        return {k: F.f32(b) for k, b in self.hyper_bits}

    def to_obj(self) -> dict:
        return {
            "version": self.version,
            "model": {"graph": self.graph, "state": self.state},
            "dataset": {"name": self.dataset_name, "root": self.dataset_root},
            "optimizer": {"kind": self.optimizer} | {k: f"0x{b:08x}" for k, b in self.hyper_bits},
            "batch": self.batch,
            "seed": self.seed,
            "steps": self.steps,
            "checkpoint_every": self.checkpoint_every,
        } | (
            {}
            if self.local_steps is None
            else {
                "rounds": self.rounds,
                "shards": self.shards,
                "local_steps": self.local_steps,
                "outer": {"kind": self.outer} | {k: f"0x{b:08x}" for k, b in self.outer_bits},
                "aggregate": self.aggregate,
            }  # fmt: skip
        )

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.to_obj())

    def spec_hash(self) -> bytes:
        return keccak256(self.canonical_bytes())


def _hyper_range(name: str, bits: int) -> None:
    v = F.f32(bits)
    ok = {
        "lr": v > 0,
        "momentum": 0 <= v < 1,
        "beta1": 0 <= v < 1,
        "beta2": 0 <= v < 1,
        "eps": v > 0,
        "weight_decay": v >= 0,
        "clip_norm": v > 0,
    }[name]
    if not ok:
        rule = {"lr": "> 0", "eps": "> 0", "clip_norm": "> 0", "weight_decay": ">= 0"}
        raise JobSpecError(f"optimizer.{name}", f"must be {rule.get(name, 'in [0, 1)')}, got {v}")


def _decomposition(o: dict, steps: int) -> tuple[int, int, int]:
    """(R, S, k_local) of a decomposed spec (versions 2 and 3), with R * k_local = T."""
    rounds = _int(o["rounds"], "rounds", 1, MAX_STEPS)
    shards = _int(o["shards"], "shards", 1, MAX_SHARDS)
    local = _int(o["local_steps"], "local_steps", 1, MAX_STEPS)
    if rounds * local != steps:
        raise JobSpecError(
            "steps", f"must equal rounds x local_steps = {rounds * local}, got {steps}"
        )
    return rounds, shards, local


def _outer(v) -> tuple[str, tuple[tuple[str, int], ...]]:
    """A decomposed version-3 job's outer optimizer: its kind and hyper-parameter bits."""
    kind = v.get("kind") if isinstance(v, dict) else None
    if kind not in OUTER_HYPER:
        raise JobSpecError("outer.kind", f"must be one of {sorted(OUTER_HYPER)}")
    _obj(v, "outer", {"kind", *OUTER_HYPER[kind]})
    bits = tuple((k, _bits(v[k], f"outer.{k}")) for k in OUTER_HYPER[kind])
    for k, b in bits:
        x = F.f32(b)
        if k == "lr" and not 0 < x <= OUTER_LR_MAX:
            raise JobSpecError("outer.lr", f"must be in (0, {OUTER_LR_MAX:g}], got {x}")
        if k == "momentum" and not 0 <= x < 1:
            raise JobSpecError("outer.momentum", f"must be in [0, 1), got {x}")
    return kind, bits


def _parse_model_spec(obj: dict) -> ModelSpec:
    keys = {"version", "model", "dataset", "optimizer", "batch", "seed", "steps"}
    keys |= {"checkpoint_every"}
    decomposed = bool(obj.keys() & set(MODEL_DECOMPOSITION_FIELDS))
    o = _obj(obj, "", keys | (set(MODEL_DECOMPOSITION_FIELDS) if decomposed else set()))
    model = _obj(o["model"], "model", {"graph", "state"})
    for k in ("graph", "state"):
        if not isinstance(model[k], str) or not _HEX256.match(model[k]):
            raise JobSpecError(f"model.{k}", 'must be "0x" + 64 lowercase hex digits')
    ds = _obj(o["dataset"], "dataset", {"name", "root"})
    if not isinstance(ds["name"], str) or not 0 < len(ds["name"]) <= 200:
        raise JobSpecError("dataset.name", "must be a non-empty string of at most 200 chars")
    if not isinstance(ds["root"], str) or not _HEX256.match(ds["root"]):
        raise JobSpecError("dataset.root", 'must be "0x" + 64 lowercase hex digits')
    opt = o["optimizer"]
    kind = opt.get("kind") if isinstance(opt, dict) else None
    if kind not in OPTIMIZER_HYPER:
        raise JobSpecError("optimizer.kind", f"must be one of {sorted(OPTIMIZER_HYPER)}")
    names = OPTIMIZER_HYPER[kind] + (("clip_norm",) if "clip_norm" in opt else ())
    _obj(opt, "optimizer", {"kind", *names})
    hyper = []
    for name in names:
        bits = _bits(opt[name], f"optimizer.{name}")
        _hyper_range(name, bits)
        hyper.append((name, bits))
    batch = _int(o["batch"], "batch", 1, MAX_BATCH)
    seed = _int(o["seed"], "seed", 0, 2**256 - 1)
    steps = _int(o["steps"], "steps", 1, MAX_STEPS)
    rounds, shards, local = _decomposition(o, steps) if decomposed else (1, 1, None)
    outer, outer_bits, aggregate = "average", (), None
    if decomposed:
        if shards > MAX_MODEL_SHARDS:
            raise JobSpecError("shards", f"must be in [1, {MAX_MODEL_SHARDS}], got {shards}")
        outer, outer_bits = _outer(o["outer"])
        aggregate = o["aggregate"]
        if not isinstance(aggregate, str) or not _HEX256.match(aggregate):
            raise JobSpecError("aggregate", 'must be "0x" + 64 lowercase hex digits')
    span = steps if local is None else local
    every = _int(o["checkpoint_every"], "checkpoint_every", 1, span)
    if span % every:
        what = "steps" if local is None else "local_steps"
        raise JobSpecError("checkpoint_every", f"must divide {what} ({span}), got {every}")
    return ModelSpec(model["graph"], model["state"], ds["name"], ds["root"], kind, tuple(hyper),
                     batch, seed, steps, every, rounds=rounds, shards=shards,
                     local_steps=local, outer=outer, outer_bits=outer_bits,
                     aggregate=aggregate)  # fmt: skip


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


def parse_spec(obj) -> JobSpec | ModelSpec:
    """Validate a decoded JSON object; raises JobSpecError naming the first bad field."""
    keys = {"version", "model", "dataset", "lr", "momentum", "batch", "seed", "steps"}
    keys |= {"checkpoint_every"}
    version = SPEC_VERSION
    if isinstance(obj, dict) and "version" in obj:
        version = _int(obj["version"], "version", SPEC_VERSION, SPEC_VERSION_MODEL)
        if version == SPEC_VERSION_MODEL:
            return _parse_model_spec(obj)
        if version == SPEC_VERSION_DECOMPOSED:
            if not obj.keys() & set(DECOMPOSITION_FIELDS):
                # a version-1 object with only its number bumped: the number is the mistake
                raise JobSpecError(
                    "version", f"version 2 needs the fields {', '.join(DECOMPOSITION_FIELDS)}"
                )
            keys |= set(DECOMPOSITION_FIELDS)
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
    if version == SPEC_VERSION:
        every = _int(o["checkpoint_every"], "checkpoint_every", 1, steps)
        if steps % every:
            raise JobSpecError("checkpoint_every", f"must divide steps ({steps}), got {every}")
        spec = JobSpec(widths, ds["name"], ds["root"], lr, mom, batch, seed, steps, every)
    else:
        rounds, shards, local = _decomposition(o, steps)
        every = _int(o["checkpoint_every"], "checkpoint_every", 1, local)
        if local % every:
            raise JobSpecError(
                "checkpoint_every", f"must divide local_steps ({local}), got {every}"
            )
        spec = JobSpec(
            widths, ds["name"], ds["root"], lr, mom, batch, seed, steps, every,
            version, rounds, shards, local,
        )  # fmt: skip
    if spec.n_params > MAX_PARAMS:
        raise JobSpecError("model.widths", f"{spec.n_params} parameters exceed {MAX_PARAMS}")
    return spec


def loads(text: str | bytes) -> JobSpec | ModelSpec:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise JobSpecError("", f"not valid JSON: {str(e)[:200]}") from None
    return parse_spec(obj)


def load(path: str | Path) -> JobSpec | ModelSpec:
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise JobSpecError("", f"cannot read {path}: {e.strerror}") from None
    return loads(text)
