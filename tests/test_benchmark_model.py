"""benchmarks/model.py: the training-step benchmark runs and compares models of equal size."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
bench = importlib.import_module("model")  # benchmarks/model.py


def test_a_tiny_run_gives_every_model_a_finite_positive_speed():
    argv = "--batch 2 --length 8 --rounds 1 --steps-per-round 1 --warmup 1 --d-model 16"
    rows = bench.benchmark(bench.parse_args([*argv.split(), "--models", "attnlab", "torch"]))
    assert [r.name for r in rows] == ["attnlab", "torch"]
    for r in rows:
        assert math.isfinite(r.tokens_per_s) and r.tokens_per_s > 0
        assert r.flops_per_step == bench.model_flops(r.non_embedding, 16, 2, 8)


def test_attnlab_and_nn_transformer_have_equal_parameter_counts_at_the_default_dims():
    cpu = torch.device("cpu")
    attnlab = bench.parameter_counts(bench.build("attnlab", cpu), 256)
    torch_nn = bench.parameter_counts(bench.build("torch", cpu), 256)
    assert torch_nn == attnlab  # the same model, parameter for parameter
