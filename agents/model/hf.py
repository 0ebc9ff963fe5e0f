"""Hugging Face `transformers` causal language models (the optional extra: pip install -e '.[hf]').

A model is built from a config alone — `job build --hf-config config.json`, or a factory that
returns a `PreTrainedModel` — never downloaded: the config is read from a local file with the
hub offline, the weights come from `torch.manual_seed(seed)` like any module's. The front end
lowers it like any module (its output object's `.logits`; the causal mask and the rotary tables,
computed from positions only, fold into constants of the graph). The bundle keeps the model's
config (`meta.hf_config`), so `job weights` and `job fetch` can write a folder that
`from_pretrained` loads: `config.json` and `model.safetensors` under the model's own parameter
names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

EXTRA = "pip install -e '.[hf]'"
CONFIG_META = "hf_config"  # the bundle's meta key holding the model's config


class HfError(ValueError):
    """A Hugging Face model that cannot be built or written: one line for the user."""


def _transformers():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs and weights never come from a hub
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers
    except ImportError:
        raise HfError(f"Hugging Face models need the transformers extra: {EXTRA}") from None
    return transformers


def model_from_config(path: str) -> torch.nn.Module:
    """A causal LM of the architecture a local config.json names, freshly initialised (the
    caller seeds torch), with the key/value cache off."""
    tf = _transformers()
    if not Path(path).is_file():
        raise HfError(f"--hf-config: no file {path}")
    try:
        config = tf.AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise HfError(f"--hf-config {path}: {str(e).splitlines()[0]}"[:300]) from None
    config.use_cache = False
    try:
        return tf.AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError) as e:
        raise HfError(f"--hf-config {path}: {str(e).splitlines()[0]}"[:300]) from None


def is_hf(module: torch.nn.Module) -> bool:
    config = getattr(module, "config", None)
    return config is not None and hasattr(config, "to_json_string")


def prepare(module: torch.nn.Module) -> None:
    """Training as the protocol traces it: no key/value cache."""
    if is_hf(module):
        module.config.use_cache = False


#: Config fields that say where and with what a config was loaded, not what the model is: the
#: path it was read from, the installed transformers version. The bundle (and so its hash)
#: leaves them out: the same config gives the same graph hash from any folder, on any install.
NOT_THE_MODEL = ("_name_or_path", "transformers_version", "_commit_hash")


def config_of(module: torch.nn.Module) -> dict | None:
    """The model's full config as a JSON object, without the NOT_THE_MODEL fields (None for a
    plain module)."""
    if not is_hf(module):
        return None
    config = json.loads(module.config.to_json_string(use_diff=False))
    return {k: v for k, v in config.items() if k not in NOT_THE_MODEL}


def write_pretrained(folder: str, tensors: dict[str, torch.Tensor], config: dict) -> None:
    """`config.json` and `model.safetensors` in `folder`: what `from_pretrained(folder)` loads."""
    from safetensors.torch import save_file

    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    except OSError as e:
        raise HfError(f"cannot write {folder}: {e.strerror or e}") from None
