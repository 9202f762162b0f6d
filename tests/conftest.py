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
