"""Model state: tensor names and order, deterministic initialisation, state root (PROTOCOL §5).

For widths d0..dL the parameters are, in this order, `w0, b0, w1, b1, ..., w{L-1}, b{L-1}`
with `w_l` of shape (d_{l+1}, d_l) (rows are output units, so matmul_nt(a, w_l) reads both by
rows) and `b_l` of shape (1, d_{l+1}); the momentum buffers follow in the same order, named
`m.w0, m.b0, ...`. Weights are `k * 2^-23 * 2^-s_l` with k the top 24 bits of an init-stream
word minus 2^23 and s_l = floor(ceil(log2(d_l)) / 2) (so the bound is ~1/sqrt(fan_in), a power
of two, and every value is exact); biases and momentum buffers start at +0.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.training import merkle
from agents.training.schedule import stream_words, unit_floats

State = dict[str, torch.Tensor]  # insertion order is the protocol order


def param_names(widths: tuple[int, ...]) -> list[str]:
    out = []
    for i in range(len(widths) - 1):
        out += [f"w{i}", f"b{i}"]
    return out


def param_shape(widths: tuple[int, ...], name: str) -> tuple[int, int]:
    i = int(name[1:])
    return (widths[i + 1], widths[i]) if name[0] == "w" else (1, widths[i + 1])


def state_names(widths: tuple[int, ...]) -> list[str]:
    p = param_names(widths)
    return p + [f"m.{n}" for n in p]


def init_scale_shift(fan_in: int) -> int:
    return ((fan_in - 1).bit_length()) // 2  # floor(ceil(log2(fan_in)) / 2)


def init_state(widths: tuple[int, ...], seed: int, device: str = "cpu") -> State:
    """S_0: weights from the keccak init stream (tag vtp.init.v1, seed = job seed, one stream
    per layer: stream seed = keccak(abi.encode(seed, l)) as uint256), zeros elsewhere."""
    st: State = {}
    for name in param_names(widths):
        shape = param_shape(widths, name)
        if name[0] == "w":
            layer = int(name[1:])
            sub = int.from_bytes(
                merkle.keccak256(int(seed).to_bytes(32, "big") + layer.to_bytes(32, "big")), "big"
            )
            u = unit_floats(stream_words(b"vtp.init.v1", sub, shape[0] * shape[1]))
            scale = np.float32(2.0 ** -init_scale_shift(widths[layer]))
            st[name] = torch.from_numpy((u * scale).astype(np.float32).reshape(shape))
        else:
            st[name] = torch.zeros(shape, dtype=torch.float32)
    for name in param_names(widths):
        st[f"m.{name}"] = torch.zeros(param_shape(widths, name), dtype=torch.float32)
    return {k: v.to(device) for k, v in st.items()}


def state_root(st: State) -> bytes:
    return merkle.state_root(list(st.items()))


def torch_state_dict(st: State, widths: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The model's parameters as the `state_dict` of the plain PyTorch MLP the protocol trains:
    `nn.Sequential(nn.Linear(d0, d1), nn.ReLU(), ..., nn.Linear(d{L-1}, dL))`, layer l at index
    2l (`w_l` is already (out, in), `nn.Linear.weight`'s layout; `b_l` (1, out) becomes (out,)).
    The momentum buffers are the optimizer's, not the model's: they are left out."""
    out: dict[str, torch.Tensor] = {}
    for layer in range(len(widths) - 1):
        out[f"{2 * layer}.weight"] = st[f"w{layer}"].detach().cpu().contiguous()
        out[f"{2 * layer}.bias"] = st[f"b{layer}"].detach().cpu().reshape(-1).contiguous()
    return out
