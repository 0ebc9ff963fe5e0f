"""Hugging Face transformers models (the `.[hf]` extra), built from small configs only — nothing
is downloaded: GPT-2 (dropout on), LLaMA (grouped-query attention, tied embeddings) and Qwen2
(biased q/k/v projections) lower through `job build --hf-config` (the causal mask and the rotary
tables fold into constants); their roots are byte-identical on 1 and 2 threads, native and
portable; their first 50 losses are plain PyTorch's (the same initial weights, batches, AdamW
and dropout masks); `job weights` writes a folder that `from_pretrained` loads, every tensor
under the model's own name; a factory returning a Hugging Face model works as --model."""

from __future__ import annotations

import json

import pytest
import torch

from agents.__main__ import main
from agents.cli.job import load_job
from agents.model.job import encode_state
from agents.model.lower import Optimizer, Recipe
from agents.model.plain import PlainTrainer, load_state, protocol_state
from agents.training.run import RunConfig

tf = pytest.importorskip("transformers")

STEPS = 50
CONFIGS = {
    "gpt2": lambda: tf.GPT2Config(vocab_size=84, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                                  attn_pdrop=0.0, resid_pdrop=0.1, embd_pdrop=0.1),
    "llama": lambda: tf.LlamaConfig(vocab_size=84, hidden_size=32, intermediate_size=64,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, max_position_embeddings=16,
                                    tie_word_embeddings=True),
    "qwen2": lambda: tf.Qwen2Config(vocab_size=84, hidden_size=32, intermediate_size=64,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, max_position_embeddings=16),
}  # fmt: skip
OPT = Optimizer("adamw", 0.003, betas=(0.9, 0.95), weight_decay=0.1, clip_norm=1.0,
                no_decay_1d=True)  # fmt: skip
FLAGS = ["--optimizer", "adamw", "--lr", "0.003", "--betas", "0.9,0.95", "--weight-decay", "0.1",
         "--clip-norm", "1.0", "--no-decay-bias-norm"]  # fmt: skip


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def hf_job(request, tmp_path_factory):
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    CONFIGS[name]().to_json_file(str(tmp / "config.json"))
    spec = tmp / "job.json"
    argv = ["job", "build", "--hf-config", str(tmp / "config.json"), "--dataset",
            "shakespeare-char/train", *FLAGS, "--batch", "8", "--steps", str(STEPS),
            "--checkpoint-every", "10", "--seed", "1", "--out", str(spec)]  # fmt: skip
    assert main(argv) == 0
    return name, tmp, spec


def test_roots_are_the_same_on_1_and_2_threads_native_and_portable(hf_job, capsys):
    name, _, spec = hf_job
    capsys.readouterr()
    roots = set()
    for cfg in (RunConfig("native", 1), RunConfig("native", 2), RunConfig("torch", 1),
                RunConfig("torch", 2)):  # fmt: skip
        job, st = load_job(str(spec), None, cfg)
        roots.add(tuple(r for _t, r, _s, _l in job.train(st, steps=2, every=1)))
    torch.set_num_threads(1)
    assert len(roots) == 1, name


def test_the_first_50_losses_are_plain_pytorchs(hf_job, capsys):
    name, tmp, spec = hf_job
    capsys.readouterr()
    job, st = load_job(str(spec), None)
    assert job.bundle.item_shape == (16,)  # the config's positions: the context
    cfg = tf.AutoConfig.from_pretrained(str(tmp / "config.json"))
    module = load_state(tf.AutoModelForCausalLM.from_config(cfg), job.bundle, st)
    plain = PlainTrainer(module, OPT, Recipe(), seed=job.spec.seed)
    worst = worst_step = 0.0
    for t in range(STEPS):
        x, y = job.batch(t)
        _, from_plain = job.step(protocol_state(job.bundle, plain), t)
        st, loss = job.step(st, t)
        want = plain.step(x, y, t)
        worst = max(worst, abs(loss - want) / abs(want))
        worst_step = max(worst_step, abs(from_plain - want) / abs(want))
    assert worst <= 1e-4 and worst_step <= 5e-6, (name, worst, worst_step)


def test_job_weights_write_a_folder_from_pretrained_loads(hf_job, tmp_path, capsys):
    name, _, spec = hf_job
    job, st = load_job(str(spec), None)
    for t in range(2):
        st, _ = job.step(st, t)
    state = tmp_path / "s.state"
    state.write_bytes(encode_state(st))
    folder = tmp_path / "pretrained"
    capsys.readouterr()
    assert main(["job", "weights", "--spec", str(spec), "--state", str(state), "--out",
                 str(folder)]) == 0  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    model = tf.AutoModelForCausalLM.from_pretrained(str(folder))
    for state_name, module_name in job.bundle.params.items():  # HF's own names, bit for bit
        assert torch.equal(model.state_dict()[module_name], st[state_name]), module_name
    from safetensors.torch import load_file

    fresh = tf.AutoModelForCausalLM.from_config(model.config)
    fresh.load_state_dict(load_file(str(folder / "model.safetensors")), strict=True)
    x, _ = job.batch(5)
    with torch.no_grad():
        want = model.eval()(x).logits
    assert (job.logits(st, x) - want).abs().max() <= 1e-5, name


def test_a_factory_returning_a_hugging_face_model_is_a_model(tmp_path, capsys):
    (tmp_path / "hf_model.py").write_text(
        "from transformers import LlamaConfig, LlamaForCausalLM\n\n\n"
        "def make():\n"
        "    return LlamaForCausalLM(LlamaConfig(vocab_size=84, hidden_size=16,\n"
        "        intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,\n"
        "        max_position_embeddings=8))\n"
    )
    spec = tmp_path / "job.json"
    assert main(["job", "build", "--model", f"{tmp_path / 'hf_model.py'}:make", "--dataset",
                 "shakespeare-char/train", "--optimizer", "adamw", "--lr", "0.01", "--batch",
                 "2", "--steps", "2", "--checkpoint-every", "1", "--out", str(spec),
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["nodes"] > 0
    job, _ = load_job(str(spec), None)
    assert job.bundle.meta["hf_config"]["model_type"] == "llama"


def test_hf_config_and_model_together_or_neither_is_one_line(tmp_path, capsys):
    base = ["job", "build", "--dataset", "shakespeare-char/train", "--optimizer", "sgd", "--lr",
            "0.1", "--batch", "2", "--steps", "2", "--checkpoint-every", "1", "--out",
            str(tmp_path / "j.json")]  # fmt: skip
    assert main(base) == 2
    assert "give --model FILE.py:FACTORY or --hf-config" in capsys.readouterr().err
    assert main([*base, "--hf-config", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "--hf-config: no file" in err and err.count("\n") == 1


def test_the_bundle_hash_is_the_models_not_where_its_config_was_read(tmp_path, capsys):
    # the same config under two folders and two file names: the same graph hash and spec
    config = tf.GPT2Config(vocab_size=84, n_positions=8, n_embd=16, n_layer=1, n_head=2)
    specs = []
    for folder, name in (("a", "config.json"), ("b/deeper", "gpt2-tiny.json")):
        (tmp_path / folder).mkdir(parents=True)
        config.to_json_file(str(tmp_path / folder / name))
        spec = tmp_path / folder / "job.json"
        argv = ["job", "build", "--hf-config", str(tmp_path / folder / name), "--dataset",
                "shakespeare-char/train", "--optimizer", "sgd", "--lr", "0.1", "--batch", "2",
                "--steps", "2", "--checkpoint-every", "1", "--seed", "1",
                "--out", str(spec)]  # fmt: skip
        assert main(argv) == 0
        specs.append(spec.read_bytes())
    capsys.readouterr()
    assert specs[0] == specs[1]
    job, _ = load_job(str(tmp_path / "a" / "job.json"), None)
    kept = job.bundle.meta["hf_config"]
    assert kept["model_type"] == "gpt2" and kept["n_embd"] == 16
    assert not {"_name_or_path", "transformers_version"} & set(kept)
