"""Reading a model back from a Lightning checkpoint of ``attnlab-train`` (``<run dir>/checkpoints``)."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig

from attnlab.data.tokenizers.base import Tokenizer
from attnlab.model.transformer import Seq2Seq
from attnlab.training.build import build_model

PREFIX = "model."  # TranslationTask keeps the model as ``self.model``


def model_state(checkpoint: dict, model: Seq2Seq) -> dict[str, torch.Tensor]:
    """The model's weights from a checkpoint's ``state_dict``.

    Checkpoints written before cross-attention got its own no-op encoding also hold the decoder's
    positional-encoding weights once more under every ``cross_attn.posenc``: the same tensors as the
    decoder's, which the model no longer has there. They are dropped.
    """
    wanted = set(model.state_dict())
    state = {k.removeprefix(PREFIX): v for k, v in checkpoint["state_dict"].items() if k.startswith(PREFIX)}
    return {k: v for k, v in state.items() if k in wanted or ".cross_attn.posenc." not in k}


def load_model_weights(cfg: DictConfig, tokenizer: Tokenizer, ckpt: str | Path) -> Seq2Seq:
    """The model ``cfg`` describes with the weights of checkpoint ``ckpt``, in eval mode."""
    model = build_model(cfg, tokenizer.vocab_size, tokenizer.pad_id)
    checkpoint = torch.load(ckpt, map_location="cpu", weights_only=False)
    model.load_state_dict(model_state(checkpoint, model))
    return model.eval()
