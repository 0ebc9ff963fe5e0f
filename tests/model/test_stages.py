"""Pipeline stages of one step (PROTOCOL §5.4, issue #43's foundation).

- a 4-layer GPT's step run by 2 and by 4 stage holders, each given only its own state and
  exchanging only the plan's boundary tensors, ends in the state root and loss of the
  one-process run of the same (micro-batched) step graph, bit for bit, over two steps;
- each holder holds only its share of the state (a partition, balanced within one module);
- lowering tags each node with the split unit whose forward made it or whose forward it
  differentiates, without changing the step graph; placed by it, a 2-stage split crosses once
  each way per micro-batch (the activation forward, its gradient back) and a 4-stage split
  once each way per boundary, plus Adam's two step scalars from stage 0;
- a Hugging Face GPT-2 and LLaMA (4 layers, tiny configs, nothing downloaded) split inside their
  trunks at their layer lists (`transformer.h.k`, `model.layers.k`, a layer never opened) into 2
  and 4 stages balanced by parameter bytes, cross likewise and end bit for bit in the
  one-process step; `job build --hf-config ... --stage-split transformer.h.1` cuts there, and
  a nested name that is no unit is one line, exit 2;
- the plan travels in the bundle (absent when not pipelined) and a tampered plan is refused;
- boundary tensors are committed by root and checked by their consumer; replaying each stage
  from committed inputs blames exactly the producer of a wrong tensor or the consumer that used
  another (the attribution rule's off-chain half; a wrong tensor changes the root);
- `job build --stages 2 --micro-batches 2 --stage-split blocks.1` writes a spec whose bundle
  carries the plan split there;
- bad input to `job build --stages` is one line, exit 2, nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agents.__main__ import main
from agents.model import stage_plan as sp
from agents.model import stages as stg
from agents.model.bundle import STEP_INPUT, bundle_from_bytes
from agents.model.job import state_root
from agents.model.lower import LoweringError, Optimizer, Recipe, build_bundle
from agents.training.registry import GraphError
from agents.training.run import run_graph
from examples.models.char_gpt import GPT

ROOT = Path(__file__).resolve().parents[2]
VOCAB, T, BATCH, M, D = 16, 8, 4, 2, 128
OPT = Optimizer("adamw", 1e-2, weight_decay=0.1)


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    module = GPT(vocab=VOCAB, d=D, heads=4, layers=4, block_size=T)
    low = build_bundle(module, OPT, BATCH, "lm", (T,), VOCAB, recipe=Recipe(M), stages=2)
    return module, low


def _plan(module, bundle, P):
    split = sp.stage_modules(module, P)
    pstage, bstage = sp.module_stage_maps(module, split)
    owner = sp.state_stages(bundle.state, pstage, bstage)
    node_module = sp.StagePlan.from_obj(bundle.stages).node_module  # indices in all the units
    return sp.plan(bundle.step, bundle.state, owner, [[u for u, _ in s] for s in split], M,
                   node_module)  # fmt: skip


def _public(bundle, t):
    g = torch.Generator().manual_seed(100 + t)
    x = torch.randint(0, VOCAB, (BATCH, T), generator=g)
    y = torch.randint(0, VOCAB, (BATCH, T), generator=g)
    hyper = [torch.tensor(v, dtype=torch.float32) for v in OPT.hyper().values()]
    return {f"hp.{k}": h for k, h in zip(bundle.hyper, hyper, strict=True)} | {"x": x, "y": y}


def _reference(bundle, st, public):
    ins = [st[v.name] for v in bundle.state] + [public[v.name] for v in
                                                bundle.step.inputs[len(bundle.state):]]  # fmt: skip
    out, _ = run_graph(bundle.step, ins)
    return {v.name: out[v.name] for v in bundle.state}, out["loss"]


@pytest.mark.parametrize("P", [2, 4])
def test_stages_equal_the_one_process_step_bit_for_bit(gpt, P):
    module, low = gpt
    b = low.bundle
    p = _plan(module, b, P)
    assert p.P == P and len({s for s, _ in p.schedule}) == P
    segs = [stg.segment(b.step, p, k) for k in range(len(p.schedule))]
    ref = piped = dict(low.state)
    for t in range(2):
        pub = _public(b, t)
        ref, ref_loss = _reference(b, ref, pub)
        run = stg.run_stages(b.step, p, piped, pub, segments=segs)
        piped, loss, holders = run.state, run.loss, run.holders
        assert state_root(piped) == state_root(ref), (P, t)
        assert loss.view(torch.int32).item() == ref_loss.view(torch.int32).item()
    # every tensor a holder was sent is a boundary tensor the plan names with it as a consumer
    sent = {stg.value_name(v): c for v, _, c in p.boundaries}
    for h in holders:
        assert h.received and all(h.stage in sent[n] for n in h.received)


@pytest.mark.parametrize("P", [2, 4])
def test_a_split_crosses_once_each_way_per_boundary_and_micro_batch(gpt, P):
    module, low = gpt
    b = low.bundle
    p = _plan(module, b, P)
    n_in = len(b.step.inputs)
    names = [u for s in p.modules for u in s]
    big = [(v, pr, c) for v, pr, c in p.boundaries if b.step.value(v)[0] != ()]
    small = [(v, pr, c) for v, pr, c in p.boundaries if b.step.value(v)[0] == ()]
    forward = [(k, (k + 1,)) for k in range(P - 1)]
    back = [(k + 1, (k,)) for k in range(P - 1)]
    assert sorted((pr, c) for _, pr, c in big) == sorted((forward + back) * M)
    for v, pr, c in big:
        assert b.step.value(v) == ((BATCH // M, T, D), "f32")
        # forward: the producing stage's last module's output; back: the gradient of the
        # producing stage's first module's input, summed there
        made_by = p.modules[pr][-1] if c[0] > pr else p.modules[pr][0]
        assert names[p.node_module[v - n_in]] == made_by, (v, pr, c)
    # the rest: Adam's bias-corrected step size and sqrt(1 - b2^t), made on stage 0 from the
    # beta^t state it holds
    assert len(small) == 2 and all(pr == 0 for _, pr, _ in small)
    assert {c for _, _, c in small} == {tuple(range(1, P))}


def test_each_node_carries_the_module_that_made_it_and_the_graph_is_unchanged(gpt):
    module, low = gpt
    b = low.bundle
    p = sp.StagePlan.from_obj(b.stages)
    units = dict(sp.split_units(module))
    names = [u for s in p.modules for u in s]
    n_in = len(b.step.inputs)
    tagged: dict[str, int] = {}
    for i, n in enumerate(b.step.nodes):
        if p.node_module[i] < 0:
            continue
        unit = names[p.node_module[i]]
        tagged[unit] = tagged.get(unit, 0) + 1
        for v in n.inputs:  # a unit's nodes read its own parameters only (the optimizer: none)
            if v < n_in and b.step.inputs[v].name.startswith("p."):
                assert b.step.inputs[v].name[2:] in units[unit], (i, unit)
    assert sorted(tagged) == sorted(names)
    # each block's nodes: its forward and backward in each of the M micro-batches, alike
    blocks = [tagged[f"blocks.{k}"] for k in range(4)]
    assert len(set(blocks)) == 1 and blocks[0] % M == 0
    torch.manual_seed(0)
    same = GPT(vocab=VOCAB, d=D, heads=4, layers=4, block_size=T)
    plain = build_bundle(same, OPT, BATCH, "lm", (T,), VOCAB, recipe=Recipe(M)).bundle
    assert plain.step == b.step and not plain.stages  # the tags change no node


HF_CONFIGS = {  # tiny, built from configs (nothing downloaded); untied heads (a tie couples stages)
    "gpt2": lambda tf: tf.GPT2Config(vocab_size=VOCAB, n_positions=T, n_embd=32, n_layer=4,
                                     n_head=2, tie_word_embeddings=False),
    "llama": lambda tf: tf.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                       num_hidden_layers=4, num_attention_heads=4,
                                       num_key_value_heads=2, max_position_embeddings=T,
                                       tie_word_embeddings=False),
}  # fmt: skip
HF_LAYERS = {"gpt2": "transformer.h", "llama": "model.layers"}


@pytest.fixture(scope="module", params=sorted(HF_CONFIGS))
def hf(request):
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    module = tf.AutoModelForCausalLM.from_config(HF_CONFIGS[request.param](tf)).float()
    low = build_bundle(module, OPT, BATCH, "lm", (T,), VOCAB, recipe=Recipe(M), stages=2)
    return request.param, module, low


def test_a_hugging_face_models_layer_list_is_opened_into_split_units(hf):
    name, module, low = hf
    layers = HF_LAYERS[name]
    units = [u for u, _ in sp.split_units(module)]
    trunk = {"gpt2": (["transformer.wte", "transformer.wpe"], ["transformer.ln_f"]),
             "llama": (["model.embed_tokens"], ["model.norm"])}[name]  # fmt: skip
    assert units == [*trunk[0], *(f"{layers}.{k}" for k in range(4)), *trunk[1], "lm_head"]
    # a layer stays whole: its parameters are its unit's
    assert dict(sp.split_units(module))[f"{layers}.1"] == [
        n for n, _ in module.named_parameters() if n.startswith(f"{layers}.1.")]  # fmt: skip
    p = sp.StagePlan.from_obj(low.bundle.stages)
    assert [u for s in p.modules for u in s] == units
    assert p.modules[1][0] == f"{layers}.2"  # balanced by parameter bytes: two layers a stage


def test_split_units_open_a_nested_layer_list_but_never_a_layer():
    from torch import nn

    class Block(nn.Module):  # a list inside a layer: the layer stays one unit
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))

    class Trunk(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(2))
            self.inner = nn.Module()
            self.inner.layers = nn.ModuleList([Block(), Block()])

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk, self.plain, self.head = Trunk(), Block(), nn.Linear(2, 2)

    units = sp.split_units(Net())
    assert [u for u, _ in units] == ["trunk.scale", "trunk.inner.layers.0", "trunk.inner.layers.1",
                                     "plain.mlp.0", "plain.mlp.1", "head"]  # fmt: skip
    assert dict(units)["trunk.inner.layers.1"] == [
        f"trunk.inner.layers.1.mlp.{k}.{w}" for k in (0, 1) for w in ("weight", "bias")
    ]


@pytest.mark.parametrize("P", [2, 4])
def test_a_hugging_face_model_splits_once_each_way_per_boundary_and_runs_bit_for_bit(hf, P):
    """The tags follow modules nested in the model's trunk that return Hugging Face output
    objects (GPT-2's dropout drawing from the step input; LLaMA's rotary tables, public)."""
    name, module, low = hf
    b = low.bundle
    p = _plan(module, b, P)
    assert all(len(s) >= 1 for s in p.modules) and p.P == P
    crossings = sorted((pr, c) for v, pr, c in p.boundaries if b.step.value(v)[0] != ())
    forward = [(k, (k + 1,)) for k in range(P - 1)]
    back = [(k + 1, (k,)) for k in range(P - 1)]
    assert crossings == sorted((forward + back) * M), name
    small = [(pr, c) for v, pr, c in p.boundaries if b.step.value(v)[0] == ()]
    assert small == [(0, tuple(range(1, P)))] * 2  # Adam's two step scalars from stage 0
    pub = _public(b, 0)
    if b.step.inputs[-1].name == STEP_INPUT:  # GPT-2's dropout draws from the step input
        pub |= {STEP_INPUT: torch.tensor([11, 3, 0], dtype=torch.int32)}
    ref, ref_loss = _reference(b, dict(low.state), pub)
    run = stg.run_stages(b.step, p, dict(low.state), pub)
    assert state_root(run.state) == state_root(ref), (name, P)
    assert run.loss.view(torch.int32).item() == ref_loss.view(torch.int32).item()
    # each holder holds only its own layers' state
    for h in run.holders:
        mine = {u for u in p.modules[h.stage]}
        for n in h.state:
            if n.startswith(("p.", "m.", "v.")):
                assert any(n[2:].startswith(u + ".") or n[2:] == u for u in mine), (n, h.stage)


@pytest.mark.parametrize("P", [2, 4])
def test_each_stage_holds_only_its_share_of_the_state(gpt, P):
    module, low = gpt
    p = _plan(module, low.bundle, P)
    st = dict(low.state)
    holders = stg.run_stages(low.bundle.step, p, st, _public(low.bundle, 0)).holders
    names = [n for h in holders for n in h.state]
    assert sorted(names) == sorted(st) and len(names) == len(set(names))  # a partition
    total = sum(4 * t.numel() for t in st.values())
    params = dict(module.named_parameters())
    # the balance is by whole modules: a stage exceeds 1/P by less than its largest module
    # (parameters and AdamW's two moments: three times its parameter bytes)
    unit = max(3 * 4 * sum(params[n].numel() for n in ps) for _, ps in sp.split_units(module))
    for h in holders:
        assert h.state_bytes() <= total / P + unit, (h.stage, h.state_bytes(), total)
    assert p.state[0][0].startswith("p.wte") and "p.lm_head.weight" in p.state[-1]


class _Producer(stg.StageHolder):
    """Stage 0 publishes a wrong first forward boundary tensor, committing to the wrong one."""

    target = ""

    def run(self, seg, public, cfg):
        out = super().run(seg, public, cfg)
        if self.target in out:
            out[self.target] = out[self.target] + 1e-3
            self.values[self.target] = out[self.target]
        return out


class _Consumer(stg.StageHolder):
    """Stage 1 uses another tensor than the one committed to it (it skips the check)."""

    target = ""

    def receive(self, name, t, root, producer):
        if name == self.target:
            t = t + 1e-3
        self.values[name] = t
        self.received.append(name)


def _liar(cls, stage, target):
    def make(s, st):
        h = (cls if s == stage else stg.StageHolder)(s, st)
        h.target = target
        return h

    return make


def _blamed(b, p, st, pub, run):
    """The stages whose replay from their S_t and the committed inputs does not reproduce what
    they published: the attribution rule's off-chain half."""
    return [s for s in range(p.P) if stg.replay_stage(
        b.step, p, s, {n: st[n] for n in p.state[s]}, pub, run.published, run.roots)]  # fmt: skip


def test_a_wrong_boundary_tensor_is_its_producers_lie_and_changes_the_root(gpt):
    _, low = gpt
    b = low.bundle
    p = sp.StagePlan.from_obj(b.stages)
    st, pub = dict(low.state), _public(b, 0)
    honest = stg.run_stages(b.step, p, st, pub)
    assert _blamed(b, p, st, pub, honest) == []
    first_fwd = next(stg.value_name(v) for v, prod_, _ in p.boundaries if prod_ == 0)
    lied = stg.run_stages(b.step, p, st, pub, holder=_liar(_Producer, 0, first_fwd))
    assert state_root(lied.state) != state_root(honest.state)  # the equality is not vacuous
    assert lied.roots[first_fwd] != honest.roots[first_fwd]  # the lie is what was committed
    assert _blamed(b, p, st, pub, lied) == [0]


def test_a_consumer_that_used_another_tensor_is_the_consumers_lie(gpt):
    _, low = gpt
    b = low.bundle
    p = sp.StagePlan.from_obj(b.stages)
    st, pub = dict(low.state), _public(b, 0)
    first_fwd = next(stg.value_name(v) for v, prod_, _ in p.boundaries if prod_ == 0)
    lied = stg.run_stages(b.step, p, st, pub, holder=_liar(_Consumer, 1, first_fwd))
    assert _blamed(b, p, st, pub, lied) == [1]
    # an honest consumer refuses a tensor that is not the committed one
    h = stg.StageHolder(1, {})
    t = lied.published[first_fwd]
    with pytest.raises(stg.BoundaryMismatch, match=f"{first_fwd} from stage 0 does not match"):
        h.receive(first_fwd, t + 1e-3, lied.roots[first_fwd], 0)


def test_the_plan_travels_in_the_bundle_and_a_tampered_plan_is_refused(gpt):
    import dataclasses

    _, low = gpt
    b = low.bundle
    assert bundle_from_bytes(b.to_bytes()).stages == b.stages
    assert "stages" not in dataclasses.replace(b, stages={}).to_obj()  # absent when not piped
    o = dict(b.stages)
    ns = list(o["node_stage"])
    k = next(i for i, s in enumerate(ns) if s == 0)
    ns[k] = 1
    bad = dataclasses.replace(b, stages=o | {"node_stage": ns})
    with pytest.raises(GraphError, match="stage plan is not the one"):
        bundle_from_bytes(bad.to_bytes())
    # a node moved to a unit of another stage: its stage no longer follows from its unit
    nm = list(o["node_module"])
    k = next(i for i, u in enumerate(nm) if u == 0 and ns[i] == 0)
    nm[k] = len(o["modules"][0])  # the first unit of stage 1
    bad = dataclasses.replace(b, stages=o | {"node_module": nm})
    with pytest.raises(GraphError, match="stage plan is not the one"):
        bundle_from_bytes(bad.to_bytes())
    # a parameter's reader moved to another stage's unit: refused as a plan, in one line
    n_in = len(b.step.inputs)
    wte = next(i for i, n in enumerate(b.step.nodes) if nm[i] == 0 and any(
        v < n_in and b.step.inputs[v].name == "p.wte.weight" for v in n.inputs))  # fmt: skip
    nm[wte] = len(o["modules"][0])
    bad = dataclasses.replace(b, stages=o | {"node_module": nm})
    with pytest.raises(GraphError, match="stage plan: state tensor p.wte.weight of stage 0 is"):
        bundle_from_bytes(bad.to_bytes())
    bad = dataclasses.replace(b, stages=o | {"node_module": nm[:-1]})
    with pytest.raises(GraphError, match="node_module must give each of the"):
        bundle_from_bytes(bad.to_bytes())


def test_a_weight_shared_across_stages_is_refused():
    torch.manual_seed(0)
    module = GPT(vocab=VOCAB, d=16, heads=2, layers=2, block_size=4)
    module.lm_head.weight = module.wte.weight  # a tied embedding, as nanoGPT's
    with pytest.raises(LoweringError, match="lm_head.weight is wte.weight, a tied embedding"):
        build_bundle(module, OPT, 2, "lm", (4,), VOCAB, stages=2)


def test_job_build_writes_the_plan_split_where_asked(tmp_path, capsys):
    import json

    from agents.core.blobs import open_blob_store

    out = tmp_path / "job.json"
    argv = ["job", "build", *GPT_ARGS, "--stages", "2", "--micro-batches", "2", "--stage-split",
            "blocks.1", "--out", str(out), "--json"]  # fmt: skip
    assert main(argv) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["stages"] == 2 and said["stage_modules"] == "wte,wpe,blocks.0;blocks.1,ln_f,lm_head"
    spec = json.loads(out.read_text())
    blob = open_blob_store(str(tmp_path / "job.blobs")).get(spec["model"]["graph"])
    b = bundle_from_bytes(blob)
    assert b.stages["modules"] == [["wte", "wpe", "blocks.0"], ["blocks.1", "ln_f", "lm_head"]]
    assert b.stages["micro_batches"] == 2


GPT_ARGS = ["--model", f"{ROOT}/examples/models/char_gpt.py:make_model", "--dataset",
            "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.003", "--batch", "8",
            "--steps", "2", "--checkpoint-every", "1"]  # fmt: skip


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--stages", "2", "--stage-split", "blocks.9"], "'blocks.9' is not a splittable module"),
        (["--stages", "2", "--stage-split", "wpe,lm_head"], "names 2 modules; 2 stages need 1"),
        (["--stages", "99"], "--stages 99 exceeds the model's 6 splittable modules"),
        (["--stages", "2", "--micro-batches", "3"], "--micro-batches must divide --batch (8)"),
        (["--stages", "2", "--clip-norm", "1.0"], "clipping couples every stage"),
        (["--micro-batches", "2"], "--micro-batches needs --stages P with P >= 2"),
        (["--solver-memory-mib", "1"], "can only be trained as a pipeline (--stages 2 or more)"),
        (["--stages", "2", "--solver-memory-mib", "0"], "--solver-memory-mib must be >= 1"),
    ],
)
def test_bad_stage_flags_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, flags, needle):
    out = tmp_path / "job.json"
    assert main(["job", "build", *GPT_ARGS, *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_job_build_splits_a_hugging_face_model_at_a_nested_layer(tmp_path, capsys):
    import json

    tf = pytest.importorskip("transformers")
    cfg = tf.GPT2Config(vocab_size=84, n_positions=T, n_embd=32, n_layer=4, n_head=2,
                        tie_word_embeddings=False)  # fmt: skip
    cfg.to_json_file(str(tmp_path / "config.json"))
    args = ["job", "build", "--hf-config", str(tmp_path / "config.json"), *GPT_ARGS[2:],
            "--stages", "2", "--micro-batches", "2"]  # fmt: skip
    out = tmp_path / "job.json"
    assert main([*args, "--stage-split", "transformer.h.9", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "'transformer.h.9' is not a splittable module" in err and err.count("\n") == 1, err
    assert not out.exists()
    assert main([*args, "--stage-split", "transformer.h.1", "--out", str(out), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["stage_modules"] == ("transformer.wte,transformer.wpe,transformer.h.0;"
                                     "transformer.h.1,transformer.h.2,transformer.h.3,"
                                     "transformer.ln_f,lm_head")  # fmt: skip
