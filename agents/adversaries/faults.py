"""Cheating parties' accounts of a claim, for tests, benches and --cheat: an honest account
(agents/dispute/trace.py `Computation`, agents/dispute/model_trace.py `ModelComputation`) with a
`Fault` injected where named; everything the party commits after it follows from it, exactly as
a solver with that bug or that lie would commit.

Fault kinds (PROTOCOL §7.6):
  element       XOR `mask` into element `element` of node `node`'s output at step `step`
                (labels: add 1 modulo the class count; a version-3 i32 value: add 1);
                downstream nodes and later steps follow from the wrong value.
  batch         at step `step`, batch position `element` holds example idx+1 (mod N) instead of
                idx (features and label); everything after follows.
  checkpoint    checkpoint number `step` is replaced by a root with no data behind it.
  intermediate  every state root from global step `step` on is a root with no data behind it.
  assembly      from S_{step+1} on, state roots are committed with two tensors' entries swapped,
                so S_{step+1}'s root does not follow from step `step`'s (correct) trace.
  count         the checkpoint list commits one extra root (a wrong count).
Version-3 accounts inject element faults only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agents.dispute.aggregation import AggregationComputation
from agents.dispute.budget import StateBudget
from agents.dispute.harness import Job
from agents.dispute.model_trace import ModelComputation
from agents.dispute.trace import Computation
from agents.roles.runtime import Claim, JobRuntime, ModelRuntime
from agents.training import merkle
from agents.training.keccak import keccak256
from agents.training.registry import run_node
from agents.training.run import run_graph
from agents.training.state import State

FAULT_KINDS = ("element", "batch", "checkpoint", "intermediate", "assembly", "count")


@dataclass(frozen=True)
class Fault:
    kind: str
    step: int = 0
    node: int = 0
    element: int = 0
    mask: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")


def _garbage(tag: str, t: int) -> bytes:
    return keccak256(f"vtp.dispute.garbage.{tag}.{t}".encode())


def _flip(out: torch.Tensor, element: int, mask: int, classes: int | None) -> torch.Tensor:
    """`out` with `mask` XORed into a float32 element, or an integer one moved on by 1 (modulo
    `classes`: a label; None: a version-3 i32 value)."""
    out = out.contiguous().clone()
    flat = out.view(-1)
    if out.dtype == torch.float32:
        bits = flat.view(torch.int32)
        word = (int(bits[element].item()) & 0xFFFFFFFF) ^ (mask & 0xFFFFFFFF)
        bits[element] = word - (1 << 32) if word >= 1 << 31 else word
    elif classes is None:
        flat[element] = int(flat[element].item()) + 1
    else:
        flat[element] = (int(flat[element].item()) + 1) % classes
    return out


class FaultyComputation(Computation):
    """A version-1 party's account with `fault` in it (the `Computation` arguments otherwise)."""

    def __init__(self, *args, fault: Fault, **kw) -> None:
        super().__init__(*args, **kw)
        self.fault = fault

    def _run(self, st: State, t: int) -> tuple[State, list[torch.Tensor]]:
        if self.fault.step != t:
            return super()._run(st, t)
        eng = self.engine
        env: dict[str, torch.Tensor] = dict(st)
        env["X"], env["Y"], env["idx"] = eng.x, eng.y, eng.batch(t)
        trace = []
        for node in self.graph.nodes:
            out = self._inject(node.index, eng._op(node.index, [env[r] for r in node.inputs]), env)
            env[node.name] = out
            trace.append(out)
        nxt = {name: env[n].contiguous() for name, n in self.graph.next_state.items()}
        return nxt, trace

    def _inject(self, index: int, out: torch.Tensor, env) -> torch.Tensor:
        f = self.fault
        if f.kind == "element" and f.node == index:
            return _flip(out, f.element, f.mask, self.classes)
        if f.kind == "batch" and index in (0, 1):  # nodes x = gather_rows, y = gather_labels
            j = f.element
            src = (int(env["idx"].reshape(-1)[j]) + 1) % self.engine.data.n
            out = out.contiguous().clone()
            if index == 0:
                out[j] = env["X"][src]
            else:
                out[0, j] = env["Y"].reshape(-1)[src]
            return out
        return out

    def entries(self, t: int) -> list[bytes]:
        out = super().entries(t)
        f = self.fault
        if f.kind == "assembly" and t > f.step:
            out[0], out[1] = out[1], out[0]
        return out

    def claimed_root(self, t: int) -> bytes:
        f = self.fault
        if f.kind == "intermediate" and t >= f.step:
            return _garbage("intermediate", t)
        if f.kind == "checkpoint" and t == self.t0 + f.step * self.interval:
            return _garbage("checkpoint", t)
        return super().claimed_root(t)

    def checkpoint_commit(self) -> bytes:
        if self.fault.kind != "count":
            return super().checkpoint_commit()
        roots = self.checkpoint_roots()
        return merkle.checkpoint_root(roots + [roots[-1]])


def _run_with_flip(g, ins: list, cfg, f: Fault) -> tuple[dict, list]:
    """Run graph `g` with the lie: node `f.node`'s output has `f.mask` XORed into element
    `f.element`, and every later node is recomputed from it (so the rest of the trace is honest
    arithmetic over the lie). Returns the outputs by name and the node trace."""
    _, trace = run_graph(g, ins, cfg, keep_trace=True)
    trace[f.node] = _flip(trace[f.node], f.element, f.mask, None)
    vals = ins + trace
    n_in = len(ins)
    for i in range(f.node + 1, len(g.nodes)):
        node = g.nodes[i]
        if node.op != "const":
            vals[n_in + i] = run_node(node, [vals[v] for v in node.inputs], False, "cpu")
    return {name: vals[vid] for name, vid in g.outputs}, vals[n_in:]


class FaultyModelComputation(ModelComputation):
    """A version-3 party's account with an element `fault` in it: at step `fault.step` the
    output of node `fault.node` has `mask` XORed into element `fault.element` (an i32 value
    gets +1), every later node of the step is recomputed from it and every later step
    follows (the `ModelComputation` arguments otherwise)."""

    def __init__(self, *args, fault: Fault, **kw) -> None:
        if fault.kind != "element":
            raise ValueError(f"version-3 computations inject element faults, not {fault.kind!r}")
        super().__init__(*args, **kw)
        self.fault = fault

    def _run(self, st: State, t: int) -> tuple[State, list[torch.Tensor]]:
        f = self.fault
        if f.step != t:
            return super()._run(st, t)
        ins = self.job.step_inputs(st, t, self.shard)
        outs, trace = _run_with_flip(self.jg.graph, ins, self.job.cfg, f)
        return {v.name: outs[v.name] for v in self.job.bundle.state}, trace


def faulty_party(job: Job, steps: int, interval: int, fault: Fault) -> FaultyComputation:
    """A cheating party's account of a claim on a harness job (agents/dispute/harness.py)."""
    return FaultyComputation(job.engine, steps, interval, fault=fault)


def faulty_account(
    runtime: JobRuntime, steps: int, interval: int, fault: Fault, budget: StateBudget
) -> Claim:
    """A cheating solver's account of a whole job's claim, as `runtime.computation` would build
    the honest one (its states under `budget`)."""
    if isinstance(runtime, ModelRuntime):
        return FaultyModelComputation(
            runtime.job, runtime.jg, runtime.start, steps, interval, fault=fault, budget=budget
        )
    return FaultyComputation(runtime.engine, steps, interval, fault=fault, budget=budget)


class FaultyAggregation(AggregationComputation):
    """An aggregator's account of a round with an element `fault` in it: the output of node
    `fault.node` of the aggregation graph has `mask` XORed into element `fault.element`, every
    later node is recomputed from it, and the committed H_{r+1} follows (`fault.step` unused:
    an aggregation is one step)."""

    def __init__(self, *args, fault: Fault, **kw) -> None:
        if fault.kind != "element":
            raise ValueError(f"an aggregation's account injects element faults, not {fault.kind!r}")
        super().__init__(*args, **kw)
        self.fault = fault

    def _run(self):
        ins = self.agg.inputs(self.h, self.units)
        outs, trace = _run_with_flip(self.agg.graph, ins, self.cfg, self.fault)
        return {n: outs[n] for n in self.agg.round_names}, trace


def aggregation_cheats(
    honest: AggregationComputation, count: int, seed: int, outputs_only: bool = False
) -> list[tuple[int, Fault, FaultyAggregation]]:
    """`count` cheating accounts of one round's aggregation, each flipping one high bit of one
    element of one node (a producer of H_{r+1} when `outputs_only`: one element of the
    outer-updated state wrong), nodes drawn at random: [(node, fault, account)]. A flip that does
    not change H_{r+1} is no lie about the claim and is drawn again."""
    import random

    rng = random.Random(seed)
    jg = honest.jg
    nodes = (sorted(set(jg.config.state_producers)) if outputs_only else
             [i for i, n in enumerate(jg.graph.nodes) if n.op != "const"])  # fmt: skip
    out: list = []
    for _ in range(count * 6):
        if len(out) == count:
            break
        i = rng.choice(nodes)
        fault = Fault("element", 0, i, rng.randrange(jg.nodes[i].numel), 1 << rng.randrange(16, 31))
        cheat = FaultyAggregation(honest.agg, jg, honest.h, honest.units, honest.cfg, fault=fault)
        if cheat.final_root() != honest.final_root():
            out.append((i, fault, cheat))
    return out
