"""A version-3 (general model) job through the agents, end to end (issue #25): the char GPT of
examples/models/char_gpt.py (batch 2, AdamW, 4 steps, checkpoints every 2) is posted by the
submitter; a cheating solver flips one element of one node of step 1's graph — a node of a layer
norm's backward pass, or of an attention softmax — and recomputes everything after it. The honest
verifier replays, challenges, and the game narrows the claim to that step, that node and that
element, which the chain recomputes (GraphProver, PROTOCOL §7.11): the cheater is slashed, an
honest solver retrains the unit and the job completes.

Which nodes came from which PyTorch operation is recorded while the spec is built
(model_nodes.py), so the fault lands where its name says whatever the node numbering."""

from __future__ import annotations

import json

import pytest
import rolekit as rk
from model_nodes import build_with_provenance, first_run

from agents.core.blobs import open_blob_store
from agents.model.bundle import bundle_from_bytes

pytestmark = pytest.mark.timeout(900)
MODEL = rk.REPO / "examples" / "models" / "char_gpt.py"
STEP = 1  # the faulty step: segment 0 (checkpoints at 0, 2, 4)
MASK = 0x00400000  # the top mantissa bit: a finite value, wrong


def _gpt_spec(tmp_path, monkeypatch):
    """The spec (its blobs beside it, where the submitter reads them), its step graph and the
    step-graph nodes of each recorded PyTorch operation."""
    spec = tmp_path / "gpt.json"
    argv = ["--model", f"{MODEL}:make_model", "--dataset", "shakespeare-char/train",
            "--optimizer", "adamw", "--lr", "0.003", "--batch", "2", "--steps", "4",
            "--checkpoint-every", "2", "--seed", "5", "--out", str(spec)]  # fmt: skip
    nodes = build_with_provenance(monkeypatch, argv)
    graph_hash = json.loads(spec.read_text())["model"]["graph"]
    bundle = open_blob_store(str(spec.with_suffix(".blobs"))).get(graph_hash)
    return spec, bundle_from_bytes(bundle).step, nodes


def _caught_at(run, node: int, element: int) -> None:
    """The game went to step STEP, node `node`, element `element`; the challenger won there;
    the cheater alone was slashed and the honest solver's redo finalized the unit."""
    (resolved,) = run.manager.events.DisputeResolved().get_logs(from_block=0)
    assert resolved["args"]["challengerWon"] is True
    (step,) = run.game.events.StepPicked().get_logs(from_block=0)
    assert step["args"]["step"] == STEP
    picked = run.game.events.NodePicked().get_logs(from_block=0)
    assert [e["args"]["node"] for e in picked] == [node]
    proved = [e["args"]["element"] for e in run.game.events.ElementProved().get_logs(from_block=0)]
    opened = run.game.events.ReductionOpened().get_logs(from_block=0)
    assert proved + [e["args"]["element"] for e in opened] == [element]
    (over,) = run.game.events.GameResolved().get_logs(from_block=0)
    assert over["args"]["byTimeout"] is False
    slashed = run.registry.events.NodeSlashed().get_logs(from_block=0)
    assert [e["args"]["node"] for e in slashed] == [run.cheater.address]
    (final,) = run.manager.events.UnitFinalized().get_logs(from_block=0)
    assert final["args"]["solver"] == run.honest.address


def test_a_flipped_layer_norm_backward_element_of_a_gpt_is_caught_and_redone(tmp_path, monkeypatch):
    spec, graph, nodes = _gpt_spec(tmp_path, monkeypatch)
    # the first layer norm's backward (the last block's ln_2, first in the backward pass): its
    # input gradient, rstd/N · (N·dx̂ − Σdx̂ − x̂·Σ(dx̂·x̂)), is its last full-size product
    ln = first_run(nodes["layer_norm_backward"])
    full = graph.nodes[ln[0]].shape
    node = max(i for i in ln if graph.nodes[i].op == "mul" and graph.nodes[i].shape == full)
    element = 37
    cheat = f"element:step={STEP},node={node},element={element},mask={MASK:#x}"
    config = {"verifyWindow": 300}
    with rk.cheat_caught_and_redone(tmp_path, spec, cheat, config, clock_budget=600) as run:
        _caught_at(run, node, element)


@pytest.mark.slow  # the same path as the layer norm's run, through another operator
def test_a_flipped_attention_softmax_element_of_a_gpt_is_caught_and_redone(tmp_path, monkeypatch):
    spec, graph, nodes = _gpt_spec(tmp_path, monkeypatch)
    # the first attention's probabilities (B, heads, T, T): the last node of its softmax
    node = first_run(nodes["softmax"])[-1]
    assert len(graph.nodes[node].shape) == 4
    element = 32 * 5 + 3  # head 0, query 5, key 3: under the causal mask, a nonzero weight
    cheat = f"element:step={STEP},node={node},element={element},mask={MASK:#x}"
    config = {"verifyWindow": 300}
    with rk.cheat_caught_and_redone(tmp_path, spec, cheat, config, clock_budget=600) as run:
        _caught_at(run, node, element)


LLAMA = rk.REPO / "examples" / "models" / "llama.py"


def _rotary_node(graph) -> int:
    """The first query rotation of the step graph: RoPE's x·cos + rotate_half(x)·sin, the `add`
    of two products one of which reads rotate_half's `cat` (-x[half:], x[:half])."""
    n_in = len(graph.inputs)

    def node(vid):
        return graph.nodes[vid - n_in] if vid >= n_in else None

    for i, n in enumerate(graph.nodes):
        first = node(n.inputs[0]) if n.op == "cat" else None
        if first is None or first.op != "neg":
            continue
        muls = {
            n_in + j for j, m in enumerate(graph.nodes) if m.op == "mul" and n_in + i in m.inputs
        }
        return next(j for j, m in enumerate(graph.nodes) if m.op == "add" and muls & set(m.inputs))
    raise AssertionError("no rotary embedding in the graph")


def test_a_flipped_rotary_element_of_a_llama_is_caught_and_the_fetched_weights_load(
    tmp_path, capsys
):
    """The LLaMA-style example (its smallest form: RMSNorm, SwiGLU, RoPE, GQA, tied embeddings;
    AdamW with a warmup and cosine schedule): a cheat in the first query rotation is caught at
    its element, the cheater slashed, the job completed, and `job fetch` writes weights that load
    strict into the plain module."""
    from safetensors.torch import load_file

    from agents.__main__ import main
    from agents.cli.job import load_factory

    spec = tmp_path / "llama.json"
    argv = ["job", "build", "--model", f"{LLAMA}:make_tiny", "--dataset",
            "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003",
            "--no-decay-bias-norm", "--warmup", "1", "--decay", "cosine", "--batch", "2",
            "--steps", "4", "--checkpoint-every", "2", "--seed", "5",
            "--out", str(spec)]  # fmt: skip
    assert main(argv) == 0
    graph_hash = json.loads(spec.read_text())["model"]["graph"]
    graph = bundle_from_bytes(open_blob_store(str(spec.with_suffix(".blobs"))).get(graph_hash)).step
    node = _rotary_node(graph)
    assert len(graph.nodes[node].shape) == 4  # (B, heads, T, head dim)
    element = 37
    cheat = f"element:step={STEP},node={node},element={element},mask={MASK:#x}"
    with rk.cheat_caught_and_redone(tmp_path, spec, cheat, {"verifyWindow": 300},
                                    clock_budget=600) as run:  # fmt: skip
        _caught_at(run, node, element)
        deployment = tmp_path / "deployment.json"
        deployment.write_text(json.dumps({"format": "vtp.deployment.v1", "rpc_url": run.url,
                                          "block": 0, "contracts": run.addrs}))  # fmt: skip
        out = tmp_path / "llama.safetensors"
        capsys.readouterr()
        assert main(["job", "fetch", "1", "--deployment", str(deployment), "--out", str(out),
                     "--allow-local-locators"]) == 0, capsys.readouterr().err  # fmt: skip
    module = load_factory(f"{LLAMA}:make_tiny")()
    module.load_state_dict(load_file(str(out)), strict=True)
    assert module.output.weight is module.tok_embeddings.weight
