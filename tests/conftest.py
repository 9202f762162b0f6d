"""Shared test set-up: offline hub and wandb, a tiny run configuration, a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", WANDB_MODE="offline", WANDB_SILENT="true")

# Small enough for a ~20-step CPU run in seconds.
TINY = [
    "model.d_model=32",
    "model.ffn_dim=64",
    "model.num_heads=2",
    "data.corpus.train_size=400",
    "data.corpus.valid_size=40",
    "data.corpus.test_size=40",
    "data.corpus.test_long_size=20",
    "data.batch_size=32",
    "data.eval_batch_size=64",
    "trainer.max_steps=20",
    "trainer.log_every_n_steps=5",
    "quiet=true",
]


def run_module(module: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Runs ``python -m <module> args`` in ``cwd`` as a user would (no HYDRA_FULL_ERROR)."""
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def run_cli(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    """Runs ``attnlab-train`` with a run dir under ``tmp_path``; returns the finished process."""
    return run_module("attnlab.train", tmp_path, f"hydra.run.dir={tmp_path / 'run'}", *overrides)


def results_of(tmp_path: Path) -> dict:
    """The ``results.json`` of the run that ``run_cli`` made under ``tmp_path``."""
    from attnlab.results import read_results

    return read_results(tmp_path / "run")


@pytest.fixture
def tiny() -> list[str]:
    return list(TINY)


def fused_and_explicit(attn, *args):
    """Runs ``attn`` as configured, then again while recording (which forces the explicit path)."""
    from attnlab.attention.recording import record_attention

    fused = attn(*args)
    with record_attention(attn):
        explicit = attn(*args)
    return fused, explicit


def self_attention_mask_with_an_empty_row() -> torch.Tensor:
    """(2, 1, 5, 5): padding after 3 tokens in sentence 0, causal, and query 2 of sentence 0 sees nothing."""
    from attnlab.attention.masks import causal_mask, combine, padding_mask

    mask = combine(
        padding_mask(torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), 0),
        causal_mask(torch.arange(5), torch.arange(5)),
    )
    mask = mask.expand(2, 1, 5, 5).clone()
    mask[0, 0, 2] = False
    return mask


def config_options(group: str) -> list[str]:
    """The options of a config group, from its folder: ``config_options("posenc")``."""
    from attnlab.train import CONF_DIR

    return [p.stem for p in sorted((Path(CONF_DIR) / group).glob("*.yaml"))]


@pytest.fixture(scope="module")
def compose_cfg():
    """``compose_cfg(overrides)`` composes ``train.yaml`` with Hydra's compose API."""
    from hydra import compose, initialize_config_dir

    from attnlab.train import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        yield lambda overrides: compose("train", overrides=overrides)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and on a shared machine waiting for them costs 100x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


DECODE_VOCAB, DECODE_PAD = 24, 0


def tiny_decode_model(compose_cfg, *overrides: str, seed: int = 0):
    """A tiny untied model (tied random embeddings mostly copy the input token) with 2 heads, for
    decoding tests on ``DECODE_VOCAB`` token ids."""
    from attnlab.train import build_model

    cfg = compose_cfg(
        [
            "model.d_model=16",
            "model.num_heads=2",
            "model.ffn_dim=32",
            "model.encoder_layers=1",
            "model.decoder_layers=2",
            "model.dropout=0.0",
            "model.tie_embeddings=false",
            *overrides,
        ]
    )
    torch.manual_seed(seed)
    return build_model(cfg, DECODE_VOCAB, DECODE_PAD).eval()


def rotated_combos() -> list[tuple[str, str, str]]:
    """Every (score, posenc) pair with the masks taking turns, so every score × mask and posenc × mask
    pair occurs too."""
    scores, posencs = config_options("attention/score"), config_options("posenc")
    masks = config_options("attention/mask")
    return [(s, p, masks[(i + j) % len(masks)]) for i, s in enumerate(scores) for j, p in enumerate(posencs)]


DECODE_BOS, DECODE_EOS = 1, 2


def decode_sources(seed: int = 0) -> torch.Tensor:
    """(4, 10) random sources of lengths 10, 7, 4 and 1, each ending in <eos>, padded."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, DECODE_VOCAB, (4, 10), generator=g)
    for row, length in enumerate((10, 7, 4, 1)):
        src[row, length - 1] = DECODE_EOS
        src[row, length:] = DECODE_PAD
    return src


def assert_stepwise_decoding_matches_whole(model) -> None:
    """Feeding the decoder a 3-token prefix and then one token at a time through its cache gives the
    states of feeding it the whole target (padding inside the prefix is masked in both)."""
    from attnlab.model.cache import DecoderCache

    src = decode_sources()
    tgt = torch.randint(3, DECODE_VOCAB, (4, 6))
    tgt[:, 0], tgt[2, 4:] = DECODE_BOS, DECODE_PAD
    memory, src_mask = model.encoder(src)
    whole = model.decoder(tgt, memory, src_mask)  # (b, t, m)
    cache = DecoderCache(len(model.decoder.layers))
    steps = [model.decoder(tgt[:, :3], memory, src_mask, cache)]
    steps += [model.decoder(tgt[:, i : i + 1], memory, src_mask, cache) for i in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)
