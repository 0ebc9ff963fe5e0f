"""The model bundle that ships a version-3 job's graphs (PROTOCOL §2.7; the graph itself:
agents/training/ir.py).

The bundle (the "model blob" a version-3 spec binds by its keccak-256) holds the training step
graph, the forward graph used for evaluation, the names that map protocol state tensors back to
the module's `state_dict`, the module's buffers, and how batches are shaped. Its bytes are the
canonical JSON of `to_obj()` (sorted keys, no spaces, ASCII), so anyone re-encoding a decoded
bundle gets the same hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from agents.model.stage_plan import StagePlan, check_plan
from agents.training.ir import Graph, Value, graph_from_obj
from agents.training.keccak import keccak256
from agents.training.registry import GraphError, Shape
from agents.training.spec import canonical_json

BUNDLE_FORMAT = "vtp.model.v1"
STEP_INPUT = "step"  # the optional (3,) i32 step input: the seed's key words, the step t
BUFFER_PREFIX = "b."  # state tensors that are module buffers the step updates
MAX_BUNDLE_BYTES = 256 << 20


@dataclass(frozen=True)
class Bundle:
    """What a version-3 job trains: the lowered module, as data."""

    step: Graph  # inputs: state tensors, hyper-parameters, x, y; outputs: next state + "loss"
    forward: Graph  # inputs: parameters, x; output "logits"
    state: tuple[Value, ...]  # protocol state tensors, in state-root order
    params: dict[str, str]  # protocol state name -> module state_dict name
    buffers: dict[str, dict]  # module buffer name -> {"shape", "dtype", "words"}
    hyper: tuple[str, ...]  # hyper-parameter names, in step-graph input order
    task: str  # "classify" (logits (B, C)) or "lm" (logits (B, T, V))
    item_shape: Shape  # one example as the model reads it (classify), or (T,) tokens (lm)
    meta: dict = field(default_factory=dict)  # model file, factory, optimizer: informational
    # weight tying: every other module name of a shared parameter -> the name `params` gives it
    tied: dict = field(default_factory=dict)
    # pipeline stages (agents/model/stages.py StagePlan.to_obj; PROTOCOL §5.4): absent when the
    # step runs in one place, so a non-pipelined bundle's bytes and hash are unchanged
    stages: dict = field(default_factory=dict)

    def to_obj(self) -> dict:
        optional = {"tied": dict(self.tied)} if self.tied else {}  # absent when nothing is tied
        if self.stages:  # absent when the step is not pipelined
            optional["stages"] = self.stages
        return optional | {
            "format": BUNDLE_FORMAT,
            "step": self.step.to_obj(),
            "forward": self.forward.to_obj(),
            "state": [[v.name, list(v.shape), v.dtype] for v in self.state],
            "params": dict(self.params),
            "buffers": self.buffers,
            "hyper": list(self.hyper),
            "task": self.task,
            "item_shape": list(self.item_shape),
            "meta": self.meta,
        }

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_obj())

    def hash(self) -> bytes:
        return keccak256(self.to_bytes())


def check_interface(b: Bundle) -> None:
    """The step graph reads S_t, the hyper-parameters, x and y and writes S_{t+1} and the loss;
    the forward graph reads the parameters and x and writes the logits (PROTOCOL §2.7)."""
    state = [(v.name, v.shape, v.dtype) for v in b.state]
    if any(dt != "f32" for _, _, dt in state) or len({n for n, _, _ in state}) != len(state):
        raise GraphError("model bundle state must be distinct f32 tensors")
    step_in = [(v.name, v.shape, v.dtype) for v in b.step.inputs]
    n = len(state) + len(b.hyper)
    if step_in[-1] == (STEP_INPUT, (3,), "i32"):  # the optional step input comes last
        step_in = step_in[:-1]
    if (
        step_in[: len(state)] != state
        or [v[0] for v in step_in[len(state) : n]] != [f"hp.{h}" for h in b.hyper]
        or [v[0] for v in step_in[n:]] != ["x", "y"]
    ):
        raise GraphError("step graph inputs must be the state, hp.<hyper>, x, y and optionally "
                         "step, in order")  # fmt: skip
    if any(v[1] != () or v[2] != "f32" for v in step_in[len(state) : n]):
        raise GraphError("hyper-parameter inputs must be f32 scalars")
    outs = {k: b.step.value(vid) for k, vid in b.step.outputs}
    for name, shape, dt in state:
        if outs.get(name) != (shape, dt):
            raise GraphError(f"step graph must output {name} of shape {shape}")
    if outs.get("loss") != ((), "f32"):
        raise GraphError("step graph must output an f32 scalar loss")
    params = [s_ for s_ in state if s_[0] in b.params]
    kept = [s_ for s_ in state if s_[0].startswith(BUFFER_PREFIX)]
    f_in = [(v.name, v.shape, v.dtype) for v in b.forward.inputs]
    if f_in[:-1] != params + kept or f_in[-1][0] != "x" or f_in[-1][1:] != step_in[-2][1:]:
        raise GraphError("forward graph inputs must be the parameters, the state's buffers "
                         "and x")  # fmt: skip
    names = set(b.params.values())
    for alias, name in b.tied.items():
        if name not in names or alias in names:
            raise GraphError(f"tied name {alias!r} must alias a parameter's module name")
    if [k for k, _ in b.forward.outputs] != ["logits"]:
        raise GraphError("forward graph must output the logits")
    x_shape = step_in[-2][1]
    if b.task == "lm" and tuple(x_shape[1:]) != tuple(b.item_shape):
        raise GraphError(f"a language model's x must be (B, {b.item_shape}), got {x_shape}")


def bundle_from_bytes(blob: bytes) -> Bundle:
    if len(blob) > MAX_BUNDLE_BYTES:
        raise GraphError(f"model bundle of {len(blob)} bytes exceeds {MAX_BUNDLE_BYTES}")
    try:
        o = json.loads(blob)
        if o.get("format") != BUNDLE_FORMAT:
            raise GraphError(f"model bundle format must be {BUNDLE_FORMAT!r}")
        b = Bundle(
            graph_from_obj(o["step"]),
            graph_from_obj(o["forward"]),
            tuple(Value(str(n), tuple(int(x) for x in s), str(d)) for n, s, d in o["state"]),
            {str(k): str(v) for k, v in o["params"].items()},
            dict(o["buffers"]),
            tuple(str(h) for h in o["hyper"]),
            str(o["task"]),
            tuple(int(x) for x in o["item_shape"]),
            dict(o.get("meta", {})),
            {str(k): str(v) for k, v in o.get("tied", {}).items()},
            dict(o.get("stages", {})),
        )
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError,
            AttributeError) as e:  # fmt: skip
        if isinstance(e, GraphError):
            raise
        raise GraphError(f"malformed model bundle: {e!r}"[:300]) from None
    if b.task not in ("classify", "lm"):
        raise GraphError(f"model bundle task must be classify or lm, got {b.task!r}")
    check_interface(b)
    if b.stages:
        check_plan(b.step, b.state, StagePlan.from_obj(b.stages))
    if b.to_bytes() != blob:
        raise GraphError("model bundle bytes are not canonical JSON")
    return b
