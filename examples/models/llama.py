"""A LLaMA-style character model: RMSNorm, SwiGLU, rotary position embeddings (RoPE), grouped-query
attention (4 query heads sharing 2 key/value heads), bias-free linears and tied embeddings.

Trained with AdamW, linear warmup then cosine decay, no weight decay on the norms, on
`shakespeare-char`:

    python -m agents job build --model examples/models/llama.py:make_model \
        --dataset shakespeare-char/train --optimizer adamw --lr 0.003 --betas 0.9,0.95 \
        --weight-decay 0.1 --no-decay-bias-norm --clip-norm 1.0 --warmup 60 --decay cosine \
        --min-lr 0.0003 --batch 16 --steps 600 --checkpoint-every 100 --seed 1 --out llama.json

`make_model` rotates query/key halves (`rotate_half`, as Hugging Face's LLaMA) with the cos/sin
tables computed from the positions in `forward`; `make_model_interleaved` rotates adjacent pairs
(Meta's original layout) with the tables precomputed as buffers. Both lower to the protocol's
operators (the tables become constants of the graph).
"""

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 84  # the characters of shakespeare-char


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D) rotated by the (T, D) tables, each frequency over the halves of D."""
    return x * cos + rotate_half(x) * sin


def rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D) rotated pairwise: (x[2i], x[2i+1]) by the (T, D/2) tables' angle i."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return out.flatten(-2)


class RMSNorm(nn.Module):
    """The hand-written form LLaMA's reference code uses: x * rsqrt(mean(x^2) + eps) * w."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, interleaved: bool):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.wq = nn.Linear(d, heads * self.hd, bias=False)
        self.wk = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, d, bias=False)
        self.interleaved = interleaved

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        rope = rope_interleaved if self.interleaved else rope_half
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        # grouped-query attention: every key/value head serves heads / kv_heads query heads
        rep = self.heads // self.kv_heads
        k = k[:, :, None].expand(B, self.kv_heads, rep, T, self.hd).reshape(B, self.heads, T, -1)
        v = v[:, :, None].expand(B, self.kv_heads, rep, T, self.hd).reshape(B, self.heads, T, -1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden, interleaved, torch_norm):
        super().__init__()
        norm = (lambda: nn.RMSNorm(d, eps=1e-5)) if torch_norm else (lambda: RMSNorm(d))
        self.attention_norm = norm()
        self.attention = Attention(d, heads, kv_heads, interleaved)
        self.ffn_norm = norm()
        self.feed_forward = FeedForward(d, hidden)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab=VOCAB, d=64, heads=4, kv_heads=2, layers=2, hidden=176,
                 block_size=32, interleaved=False, theta=10000.0):  # fmt: skip
        super().__init__()
        self.block_size = block_size
        self.interleaved = interleaved
        self.tok_embeddings = nn.Embedding(vocab, d)
        # one block in two uses nn.RMSNorm, the other LLaMA's hand-written form
        self.layers = nn.ModuleList(
            Block(d, heads, kv_heads, hidden, interleaved, torch_norm=i % 2 == 0)
            for i in range(layers)
        )
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.output = nn.Linear(d, vocab, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied: one parameter, used twice
        hd = d // heads
        inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        if interleaved:
            angles = torch.outer(torch.arange(block_size, dtype=torch.float32), inv_freq)
            self.register_buffer("freqs_cos", torch.cos(angles), persistent=False)
            self.register_buffer("freqs_sin", torch.sin(angles), persistent=False)
        for p in self.parameters():  # GPT-2 / LLaMA style small init
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def tables(self, T: int):
        if self.interleaved:
            return self.freqs_cos[:T], self.freqs_sin[:T]
        angles = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((angles, angles), dim=-1)  # rotate-half pairs i and i + D/2
        return emb.cos(), emb.sin()

    def forward(self, idx):
        _, T = idx.shape
        cos, sin = self.tables(T)
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def make_model() -> nn.Module:
    return Llama()


def make_model_interleaved() -> nn.Module:
    return Llama(interleaved=True)


def make_tiny() -> nn.Module:
    """The smallest model with every layer type (the dispute and agent tests' job)."""
    return Llama(d=16, heads=4, kv_heads=2, layers=2, hidden=24, block_size=8)
