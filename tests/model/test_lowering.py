"""Faithful to PyTorch: per supported layer, the lowered step's loss and gradients agree with
plain PyTorch float32 (`make_step` run eagerly) within the tolerances below.

Tolerances (stated in PROTOCOL §2.5): the loss within 2e-6 relative; each gradient element
within 2e-5 * max|g| + 1e-6 of PyTorch's. The protocol's reductions add in index order and its
exp/log/tanh/erf are its own polynomials, so the last bits differ; nothing more may.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from agents.model.job import has_step_input, step_input
from agents.model.lower import LoweringError, Optimizer, Recipe, build_bundle, make_step
from agents.model.plain import stream_dropout
from agents.training.run import RunConfig, run_graph

GRAD = Optimizer("sgd", 1.0, momentum=0.0)  # p' = p - g: the update is the gradient


class Attention(nn.Module):
    """nanoGPT's causal self-attention, either form."""

    def __init__(self, d=8, h=2, T=5, flash=True):
        super().__init__()
        self.block_size = T
        self.emb = nn.Embedding(11, d)
        self.pos = nn.Embedding(T, d)
        self.qkv, self.proj, self.h, self.flash = nn.Linear(d, 3 * d), nn.Linear(d, d), h, flash
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 11, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, idx):
        B, T = idx.shape
        x = self.emb(idx) + self.pos(torch.arange(T))
        C = x.shape[-1]
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        if self.flash:
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return self.head(x)


def _image(*layers):
    return lambda: nn.Sequential(*layers)


class SwiGLU(nn.Module):
    def __init__(self, d=8, hidden=12):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class Residual(nn.Module):
    """A ResNet block with a strided convolution and a 1x1 strided projection shortcut."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(2, 3, 3, stride=2, padding=1, bias=False),
                               nn.BatchNorm2d(3), nn.ReLU(), nn.Conv2d(3, 3, 3, padding=1),
                               nn.BatchNorm2d(3))  # fmt: skip
        self.short = nn.Sequential(nn.Conv2d(2, 3, 1, stride=2, bias=False), nn.BatchNorm2d(3))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Dropout(0.25),
                                  nn.Linear(12, 4))  # fmt: skip

    def forward(self, x):
        return self.head(nn.functional.relu(self.a(x) + self.short(x)))


class GroupedQuery(nn.Module):
    """Grouped-query attention (4 query heads, 2 key/value heads): K/V repeated with
    repeat_interleave, or left to scaled_dot_product_attention(enable_gqa=True)."""

    def __init__(self, enable_gqa: bool):
        super().__init__()
        self.block_size, self.enable_gqa = 5, enable_gqa
        self.emb = nn.Embedding(11, 8)
        self.q, self.kv = nn.Linear(8, 8, bias=False), nn.Linear(8, 8, bias=False)
        self.out = nn.Linear(8, 11, bias=False)

    def forward(self, idx):
        B, T = idx.shape
        x = self.emb(idx)
        q = self.q(x).view(B, T, 4, 2).transpose(1, 2)
        k, v = self.kv(x).view(B, T, 2, 4).transpose(1, 2).split(2, dim=-1)
        if self.enable_gqa:
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                           enable_gqa=True)  # fmt: skip
        else:
            k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, 8))


def _llama(**kw):
    def make():
        from agents.cli.job import load_factory

        cls = load_factory(f"{Path(__file__).resolve().parents[2]}/examples/models/llama.py:Llama")
        return cls(vocab=11, d=16, heads=4, kv_heads=2, layers=2, hidden=24, block_size=5, **kw)

    return make


CASES = {
    "linear_relu": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 7), nn.ReLU(),
                                          nn.Linear(7, 4)), (3, 2, 2), 4),
    "conv_stride_padding": (_image(nn.Conv2d(2, 3, 3, stride=2, padding=1), nn.Flatten(),
                                   nn.Linear(3 * 3 * 3, 4)), (2, 6, 6), 4),
    "maxpool_overlapping": (_image(nn.Conv2d(2, 3, 3, padding=1), nn.MaxPool2d(3, stride=1),
                                   nn.Flatten(), nn.Linear(3 * 4 * 4, 4)), (2, 6, 6), 4),
    "maxpool_avgpool": (_image(nn.MaxPool2d(2), nn.ReLU(), nn.AvgPool2d(3), nn.Flatten(),
                               nn.Linear(2, 4)), (2, 6, 6), 4),
    "gelu_exact_tanh_layernorm": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(6, 8),
                                                        nn.GELU(), nn.LayerNorm(8),
                                                        nn.Linear(8, 8), nn.GELU("tanh"),
                                                        nn.Tanh(), nn.Linear(8, 3)), (6,), 3),
    "attention_sdpa": (lambda: Attention(flash=True), (5,), 11),
    "attention_masked_softmax": (lambda: Attention(flash=False), (5,), 11),
    "rmsnorm_silu_swiglu_sigmoid": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(6, 8),
                                                          nn.RMSNorm(8), SwiGLU(), nn.Sigmoid(),
                                                          nn.Linear(8, 3, bias=False)),
                                    (6,), 3),
    "batchnorm1d_dropout": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(6, 8, bias=False),
                                                  nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.3),
                                                  nn.Linear(8, 3)), (6,), 3),
    "residual_batchnorm2d_adaptive_pool_dropout": (Residual, (2, 7, 7), 4),
    "llama_rope_half_gqa_tied": (_llama(), (5,), 11),
    "llama_rope_interleaved": (_llama(interleaved=True), (5,), 11),
    "gqa_repeat_interleave": (lambda: GroupedQuery(enable_gqa=False), (5,), 11),
    "gqa_sdpa_enable_gqa": (lambda: GroupedQuery(enable_gqa=True), (5,), 11),
}  # fmt: skip


def _batch(item, classes, task, B=3, seed=5):
    g = torch.Generator().manual_seed(seed)
    if task == "lm":
        return (torch.randint(0, classes, (B, *item), generator=g),
                torch.randint(0, classes, (B, *item), generator=g))  # fmt: skip
    return torch.randn((B, *item), generator=g), torch.randint(0, classes, (B,), generator=g)


def _compare(make, item, classes, opt, B=3, recipe=Recipe(), seed=0, t=0):
    """(state name -> (lowered S_1, eager make_step's S_1, S_0)) of one step on one batch; the
    eager step draws dropout's masks from the same stream (stream_dropout)."""
    torch.manual_seed(0)
    module = make()
    task = "lm" if hasattr(module, "block_size") else "classify"
    low = build_bundle(module, opt, B, task, item, classes, recipe=recipe)
    st = [t_ for _, t_ in low.state]
    hp = [torch.tensor(v, dtype=torch.float32) for v in opt.hyper().values()]
    x, y = _batch(item, classes, task, B)
    key = [step_input(seed, t)]
    extra = key if has_step_input(low.bundle.step) else []
    out, _ = run_graph(low.bundle.step, st + hp + [x, y] + extra, RunConfig("torch"))
    names = [n for n, _ in low.state]
    n = len(list(module.parameters()))
    bufs = tuple((b[2:], dict(module.named_buffers())[b[2:]].dtype) for b in names
                 if b.startswith("b."))  # fmt: skip
    nb = len(bufs)
    with stream_dropout(seed, t):
        ps, os_, loss = make_step(module, [k for k, _ in module.named_parameters()], opt, bufs,
                                  recipe)(st[:n], st[n:], hp, x, y, *key)  # fmt: skip
    ref = dict(zip(names, list(ps) + list(os_), strict=True))
    assert abs(out["loss"].item() - loss.item()) <= 2e-6 * abs(loss.item())
    assert len(names) == n + nb + len(os_) - nb
    return {k: (out[k], ref[k], dict(low.state)[k]) for k in names}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loss_and_gradients_match_pytorch(case):
    make, item, classes = CASES[case]
    for name, (got, want, p0) in _compare(make, item, classes, GRAD).items():
        if name.startswith("b."):  # BatchNorm's running statistics after the step
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (case, name)
        if not name.startswith("p."):
            continue
        g_got, g_want = p0 - got, p0 - want  # exact: p - (p - g) with lr = 1 loses no bit of g
        scale = g_want.abs().max().item()
        assert (g_got - g_want).abs().max().item() <= 2e-5 * scale + 1e-6, (case, name)


@pytest.mark.parametrize("recipe", [
    Recipe(label_smoothing=0.1), Recipe(ignore_index=2), Recipe(accumulate=3),
    Recipe(schedule=(0.25, 0.5, 1.0)),
], ids=["label_smoothing", "ignore_index", "accumulate", "schedule"])  # fmt: skip
@pytest.mark.parametrize("kind", ["sgd", "nesterov", "adam", "adamw"])
def test_optimizers_and_recipes_match_pytorch(kind, recipe):
    """Every optimizer (decay on 2-d parameters only, as the parameter groups of nanoGPT), each
    recipe option, on a model with BatchNorm and dropout: the lowered step is the eager one."""
    opt = Optimizer(kind, 1e-2, momentum=0.9, betas=(0.9, 0.99), weight_decay=0.1,
                    no_decay_1d=True)  # fmt: skip
    make, item, classes = CASES["batchnorm1d_dropout"]
    for name, (got, want, _) in _compare(make, item, classes, opt, B=6, recipe=recipe,
                                         t=2).items():  # fmt: skip
        if name.startswith("p.") and kind.startswith("adam"):
            # Adam's first step is lr * m / sqrt(v) = lr * sign(g) per element: a gradient of
            # rounding noise (a weight feeding a BatchNorm) may take either sign. The moments
            # below hold the gradients themselves.
            assert (got - want).abs().max() <= 2.01 * opt.lr, (kind, recipe, name)
            continue
        scale = want.abs().max().item()
        assert (got - want).abs().max().item() <= 2e-5 * scale + 1e-7, (kind, recipe, name)


def test_adamw_with_clipping_matches_pytorch():
    # (not on attention: its key bias has a gradient of pure rounding noise, which AdamW's
    # m / sqrt(v) turns into a full-size step of either sign)
    opt = Optimizer("adamw", 1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, clip_norm=0.5)
    make, item, classes = CASES["gelu_exact_tanh_layernorm"]
    for name, (got, want, _) in _compare(make, item, classes, opt).items():
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6), name


def test_the_registered_mask_buffer_and_positions_are_constants_of_the_graph():
    torch.manual_seed(0)
    low = build_bundle(Attention(flash=False), GRAD, 2, "lm", (5,), 11)
    assert "mask" in low.bundle.buffers  # written back by `job weights` for strict loading
    assert {v.name for v in low.bundle.step.inputs} == {n for n, _ in low.state} | {
        "hp.lr", "hp.momentum", "x", "y"}  # fmt: skip


class ComplexRope(nn.Module):
    """Meta's original rotary embedding through complex numbers (view_as_complex)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        z = torch.view_as_complex(self.proj(x).reshape(x.shape[0], 2, 2).contiguous())
        turned = torch.view_as_real(z * torch.polar(torch.ones(2), torch.arange(2.0)))
        return self.head(turned.reshape(x.shape[0], 4))


@pytest.mark.parametrize(
    "make,op,layer",
    [
        (lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.ELU()), "aten.elu", "2 (ELU)"),
        (lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.Softplus()), "aten.log1p",
         "2 (Softplus)"),
        (ComplexRope, "aten.view_as_complex", "ComplexRope.forward"),
        (lambda: nn.Sequential(nn.Unflatten(1, (2, 2, 1)), nn.Conv2d(2, 2, 1, groups=2),
                               nn.Flatten(), nn.Linear(4, 3)), "aten.convolution", "1 (Conv2d)"),
        (lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 3)).double(), None, "float32"),
    ],
    ids=["elu", "softplus", "complex_rope", "grouped_conv", "float64"],
)  # fmt: skip
def test_refusals_are_one_line_naming_the_layer_and_the_aten_op(make, op, layer):
    with pytest.raises(LoweringError) as e:
        build_bundle(make(), GRAD, 2, "classify", (4,), 3)
    msg = str(e.value)
    assert "\n" not in msg
    assert layer in msg, msg
    if op is not None:
        assert op in msg and f"(in layer {layer})" in msg, msg


def test_dropout_and_batchnorm_train_and_evaluate_as_pytorch_does():
    """Dropout with p > 0 draws from the committed stream (a step input); the forward graph
    evaluates: no dropout, BatchNorm on its running statistics, which the step updates."""
    torch.manual_seed(0)
    module = CASES["batchnorm1d_dropout"][0]()
    low = build_bundle(module, GRAD, 4, "classify", (6,), 3)
    ops = {n.op for n in low.bundle.step.nodes}
    assert "uniform" in ops and low.bundle.step.inputs[-1].name == "step"
    assert "uniform" not in {n.op for n in low.bundle.forward.nodes}
    kept = [n for n, _ in low.state if n.startswith("b.")]
    assert kept == ["b.2.running_mean", "b.2.running_var", "b.2.num_batches_tracked"]
    assert [v.name for v in low.bundle.forward.inputs][-4:] == [*kept, "x"]
    x = torch.randn(4, 6)
    params = [t for n, t in low.state if n.startswith(("p.", "b."))]
    got, _ = run_graph(low.bundle.forward, params + [x], RunConfig("torch"))
    with torch.no_grad():
        want = module.eval()(x)
    assert torch.allclose(got["logits"], want, rtol=1e-5, atol=1e-6)


def _example(file: str, factory: str):
    from agents.cli.job import load_factory

    root = Path(__file__).resolve().parents[2]
    return lambda: load_factory(f"{root}/examples/models/{file}:{factory}")()


EXAMPLES = {
    "digits_cnn": (_example("digits_cnn.py", "make_model"), (1, 8, 8), 10),
    "digits_mlp": (_example("digits_mlp.py", "make_model"), (1, 8, 8), 10),
    "char_gpt": (_example("char_gpt.py", "make_model"), (32,), 84),
    "char_gpt_masked": (_example("char_gpt.py", "make_model_masked"), (32,), 84),
    "llama": (_example("llama.py", "make_model"), (32,), 84),
    "llama_interleaved": (_example("llama.py", "make_model_interleaved"), (32,), 84),
    "resnet": (_example("resnet.py", "make_model"), (1, 8, 8), 10),
}


@pytest.mark.parametrize("case", sorted(EXAMPLES))
def test_example_models_forward_and_gradients_match_pytorch(case):
    make, item, classes = EXAMPLES[case]
    torch.manual_seed(0)
    module = make()
    lm = item == (32,)
    low = build_bundle(module, GRAD, 2, "lm" if lm else "classify", item, classes)
    x, _ = _batch(item, classes, "lm" if lm else "classify", B=2)
    params = [t for n, t in low.state if n.startswith(("p.", "b."))]
    got, _ = run_graph(low.bundle.forward, params + [x], RunConfig("torch"))
    with torch.no_grad():
        want = module.eval()(x)
    assert (got["logits"] - want).abs().max().item() <= 2e-5 * want.abs().max().item() + 1e-6
    for name, (g_new, w_new, p0) in _compare(make, item, classes, GRAD, B=2).items():
        g_got, g_want = p0 - g_new, p0 - w_new
        scale = g_want.abs().max().item()
        assert (g_got - g_want).abs().max().item() <= 2e-5 * scale + 1e-6, (case, name)


def _hf(name: str):
    def make():
        tf = pytest.importorskip("transformers")
        cfg = {
            "gpt2": lambda: tf.GPT2Config(vocab_size=11, n_positions=5, n_embd=8, n_layer=1,
                                          n_head=2, resid_pdrop=0.1),
            "llama": lambda: tf.LlamaConfig(vocab_size=11, hidden_size=8, intermediate_size=12,
                                            num_hidden_layers=1, num_attention_heads=2,
                                            num_key_value_heads=1, max_position_embeddings=5,
                                            tie_word_embeddings=True),
        }[name]()  # fmt: skip
        cfg.use_cache = False
        return tf.AutoModelForCausalLM.from_config(cfg)

    return make


def _real_trace(fn, args):
    """The front end's trace on real values (what it traced before lowering on fake tensors)."""
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return make_fx(fn, decomposition_table=core_aten_decompositions())(*args)


FAKE_CASES = {  # (make, item, classes, task)
    "char_gpt_masked": (*EXAMPLES["char_gpt_masked"], "lm"),
    "llama": (*EXAMPLES["llama"], "lm"),
    "resnet": (*EXAMPLES["resnet"], "classify"),
    "batchnorm1d_dropout": (*CASES["batchnorm1d_dropout"], "classify"),
    "llama_rope_interleaved": (*CASES["llama_rope_interleaved"], "lm"),
    "hf_gpt2": (_hf("gpt2"), (5,), 11, "lm"),
    "hf_llama": (_hf("llama"), (5,), 11, "lm"),
}


@pytest.mark.parametrize("case", sorted(FAKE_CASES))
def test_lowering_on_fake_tensors_gives_the_real_traces_bundle(case, monkeypatch):
    """The traces run on fake tensors (shapes and dtypes only), yet constant folding (masks,
    rotary tables, dropout's keep threshold, a schedule) computes real values: the bundle and S_0
    are the ones a real-valued trace gives, byte for byte."""
    import agents.model.lower as lower

    make, item, classes, task = FAKE_CASES[case]
    opt = Optimizer("adamw", 0.01, weight_decay=0.1, clip_norm=1.0)
    recipe = Recipe(schedule=(1.0, 0.5, 0.25))
    built = []
    for trace in (lower._trace, _real_trace):
        monkeypatch.setattr(lower, "_trace", trace)
        torch.manual_seed(0)
        built.append(build_bundle(make(), opt, 2, task, item, classes, recipe=recipe))
    fake, real = built
    assert fake.bundle.to_bytes() == real.bundle.to_bytes()
    assert [n for n, _ in fake.state] == [n for n, _ in real.state]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(fake.state, real.state, strict=True))
