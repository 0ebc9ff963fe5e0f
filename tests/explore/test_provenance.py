"""Which module a step-graph node came from (agents/explore/provenance.py), on the char GPT the
demo disputes: each attention softmax is in its own block's attention module, read from the
committed graph's data flow alone (the bundle records no provenance)."""

from __future__ import annotations

from agents.cli.job import load_job
from agents.explore.provenance import MODEL, _common_module, node_module
from scripts import demo_gpt


def _softmax_outputs(step) -> list[int]:
    """Every attention softmax's output (demo_gpt.attention_probabilities_node finds the first)."""
    base = len(step.inputs)
    out = []
    for i, node in enumerate(step.nodes):
        if node.op == "div" and len(node.shape) == 4 and node.shape[-1] == node.shape[-2]:
            src = node.inputs[0] - base
            if src >= 0 and step.nodes[src].op == "exp":
                out.append(i)
    return out


def test_each_attention_softmax_is_in_its_block_s_attention(tmp_path):
    spec = tmp_path / "gpt.json"
    demo_gpt.build_spec(demo_gpt.GptConfig(batch=2, steps=2, checkpoint_every=1), spec)
    job, _ = load_job(str(spec), None)
    b = job.bundle
    nodes = _softmax_outputs(b.step)
    assert nodes[0] == demo_gpt.attention_probabilities_node(b.step)
    # forward softmaxes, one per block (the backward pass reuses their outputs)
    assert [node_module(b, n) for n in nodes] == ["blocks.0.attn", "blocks.1.attn"]
    assert node_module(b, len(b.step.nodes)).startswith("unknown: the model has")


def test_the_common_module_is_the_deepest_holding_every_parameter():
    assert _common_module({"blocks.0.attn.c_attn.bias", "blocks.0.attn.c_proj.bias"}) == (
        "blocks.0.attn"
    )
    assert _common_module({"blocks.0.mlp.0.weight"}) == "blocks.0.mlp.0"
    assert _common_module({"wte.weight", "lm_head.weight"}) == ""
    assert _common_module(set()) == ""
    assert MODEL.startswith("(")
