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

from agents.model.lower import LoweringError, Optimizer, build_bundle, make_step
from agents.model.run import RunConfig, run_graph

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
}  # fmt: skip


def _batch(item, classes, task, B=3, seed=5):
    g = torch.Generator().manual_seed(seed)
    if task == "lm":
        return (torch.randint(0, classes, (B, *item), generator=g),
                torch.randint(0, classes, (B, *item), generator=g))  # fmt: skip
    return torch.randn((B, *item), generator=g), torch.randint(0, classes, (B,), generator=g)


def _compare(make, item, classes, opt, B=3):
    torch.manual_seed(0)
    module = make()
    task = "lm" if hasattr(module, "block_size") else "classify"
    low = build_bundle(module, opt, B, task, item, classes)
    st = [t for _, t in low.state]
    hp = [torch.tensor(v, dtype=torch.float32) for v in opt.hyper().values()]
    x, y = _batch(item, classes, task, B)
    out, _ = run_graph(low.bundle.step, st + hp + [x, y], RunConfig("torch"))
    names = [n for n, _ in low.state]
    n = len(list(module.parameters()))
    ps, os_, loss = make_step(module, [k for k, _ in module.named_parameters()], opt)(
        st[:n], st[n:], hp, x, y
    )
    ref = dict(zip(names, list(ps) + list(os_), strict=True))
    assert abs(out["loss"].item() - loss.item()) <= 2e-6 * abs(loss.item())
    return {k: (out[k], ref[k], dict(low.state)[k]) for k in names}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loss_and_gradients_match_pytorch(case):
    make, item, classes = CASES[case]
    for name, (got, want, p0) in _compare(make, item, classes, GRAD).items():
        if not name.startswith("p."):
            continue
        g_got, g_want = p0 - got, p0 - want  # exact: p - (p - g) with lr = 1 loses no bit of g
        scale = g_want.abs().max().item()
        assert (g_got - g_want).abs().max().item() <= 2e-5 * scale + 1e-6, (case, name)


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


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.Sigmoid()), "aten.sigmoid"),
        (lambda: nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(4, 3)), "Dropout"),
        (lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 3)).double(), "float32"),
        (
            lambda: nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.BatchNorm1d(3)),
            "cannot trace the training step",
        ),
    ],
)
def test_unsupported_modules_are_refused_by_name(make, needle):
    with pytest.raises(LoweringError, match=needle) as e:
        build_bundle(make(), GRAD, 2, "classify", (4,), 3)
    assert "\n" not in str(e.value)
    if needle == "aten.sigmoid":
        assert "outside the supported set: Sigmoid)" in str(e.value)
    if needle.startswith("cannot trace"):
        assert "outside the supported set: BatchNorm1d)" in str(e.value)


def _example(file: str, factory: str):
    from agents.cli.job import load_factory

    root = Path(__file__).resolve().parents[2]
    return lambda: load_factory(f"{root}/examples/models/{file}:{factory}")()


EXAMPLES = {
    "digits_cnn": (_example("digits_cnn.py", "make_model"), (1, 8, 8), 10),
    "digits_mlp": (_example("digits_mlp.py", "make_model"), (1, 8, 8), 10),
    "char_gpt": (_example("char_gpt.py", "make_model"), (32,), 84),
    "char_gpt_masked": (_example("char_gpt.py", "make_model_masked"), (32,), 84),
}


@pytest.mark.parametrize("case", sorted(EXAMPLES))
def test_example_models_forward_and_gradients_match_pytorch(case):
    make, item, classes = EXAMPLES[case]
    torch.manual_seed(0)
    module = make()
    lm = item == (32,)
    low = build_bundle(module, GRAD, 2, "lm" if lm else "classify", item, classes)
    x, _ = _batch(item, classes, "lm" if lm else "classify", B=2)
    params = [t for n, t in low.state if n.startswith("p.")]
    got, _ = run_graph(low.bundle.forward, params + [x], RunConfig("torch"))
    with torch.no_grad():
        want = module(x)
    assert (got["logits"] - want).abs().max().item() <= 2e-5 * want.abs().max().item() + 1e-6
    for name, (g_new, w_new, p0) in _compare(make, item, classes, GRAD, B=2).items():
        g_got, g_want = p0 - g_new, p0 - w_new
        scale = g_want.abs().max().item()
        assert (g_got - g_want).abs().max().item() <= 2e-5 * scale + 1e-6, (case, name)
