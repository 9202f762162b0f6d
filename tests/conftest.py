"""Shared test set-up: offline hub and wandb, a tiny run configuration, CLI runners (a subprocess, or the
same entry point in this process), one trained run shared by the tests that only read a run directory,
and the combinations of attention options the model tests walk."""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", WANDB_MODE="offline", WANDB_SILENT="true")
if "ATTNLAB_CACHE" not in os.environ:  # generated corpora and tokenizers: shared by this session only
    os.environ["ATTNLAB_CACHE"] = tempfile.mkdtemp(prefix="attnlab-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ATTNLAB_CACHE"], ignore_errors=True)

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
    "data.max_tokens=null",  # sentence batches, as the tests were written for
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
    return run_module("attnlab.cli.train", tmp_path, f"hydra.run.dir={tmp_path / 'run'}", *overrides)


def results_of(tmp_path: Path) -> dict:
    """The ``results.json`` of the run that ``run_cli`` made under ``tmp_path``."""
    from attnlab.rundir import RunDir

    return RunDir(tmp_path / "run").read_results()


@dataclass
class Outcome:
    """What a console entry point run in this process left: exit status, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def in_process(monkeypatch):
    """``in_process(entry, prog, *args)`` runs a console entry point (``attnlab.cli.train.cli``) here,
    as its command would with ``args``: the same one-line errors and exit status, seconds faster than a
    subprocess (no interpreter, torch or Lightning start-up). Hydra's global state, the logging set-up
    and the environment are put back after."""
    from hydra.core.global_hydra import GlobalHydra

    def run(entry, prog: str, *args: str) -> Outcome:
        monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
        monkeypatch.setattr(sys, "argv", [prog, *args])
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        out, err, code = io.StringIO(), io.StringIO(), 0
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                entry()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        finally:
            GlobalHydra.instance().clear()
            root.handlers[:], root.level = handlers, level
            os.environ.pop("HYDRA_FULL_ERROR", None)
        return Outcome(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def train_in_process(in_process, tmp_path):
    """``train_in_process(*overrides)``: ``attnlab-train`` in this process, run dir ``tmp_path/run``."""
    from attnlab.cli.train import cli

    return lambda *overrides: in_process(
        cli, "attnlab-train", f"hydra.run.dir={tmp_path / 'run'}", *overrides
    )


# A one-layer model for the tests that train every combination of options for a few steps.
SMALL_MODEL = [
    "model.d_model=16",
    "model.num_heads=2",
    "model.ffn_dim=32",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "optim.warmup_steps=2",
]

# The run the read-only tests share: the CLI, a real offline wandb run, head pruning, attention maps.
TRAINED_OVERRIDES = [*TINY, "seed=3", "logger=wandb", "diagnostics.head_pruning=true"]


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """The folder whose ``run/`` one ``attnlab-train`` run (``TRAINED_OVERRIDES``) filled; read it only."""
    tmp = tmp_path_factory.mktemp("trained_run")
    proc = run_cli(tmp, *TRAINED_OVERRIDES)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp


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
    from attnlab.config import group_options

    return group_options(group)


def compose(overrides, **kwargs):
    """``train.yaml`` composed with ``overrides`` through Hydra's compose API (``compose``'s keywords)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from attnlab.config import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return hydra_compose("train", overrides=list(overrides), **kwargs)


@functools.cache
def _composed_choices(groups: tuple[str, ...]):
    return compose(groups)


def compose_fast(overrides, **kwargs):
    """``compose(overrides)``, faster for the hundreds of model tests.

    Hydra takes ~0.2 s a composition, which they would spend again and again on the same group choices.
    So the choices (``posenc=rope``, ``attention/score=additive``) are composed once per session and
    cached, and plain key overrides (``model.key_dim=4``) are set on a copy with the values Hydra's own
    override parser gives them: the same config, ~100x faster. Any keyword composes afresh.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from omegaconf import OmegaConf

    if kwargs:
        return compose(overrides, **kwargs)
    parsed = OverridesParser.create().parse_overrides(list(overrides))

    def plain(o) -> bool:
        return o.type == OverrideType.CHANGE and o.package is None and "." in o.key_or_group

    cfg = _composed_choices(tuple(o.input_line for o in parsed if not plain(o))).copy()
    for o in filter(plain, parsed):
        OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False)
    return cfg


@pytest.fixture(scope="session")
def compose_cfg():
    """``compose_cfg(overrides, **kwargs)``: ``compose_fast``."""
    return compose_fast


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and on a shared machine waiting for them costs 100x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


DECODE_VOCAB = 24


def decode_ids():
    """The special ids of the decoding tests: <pad> 0, <bos> 1, <eos> 2 (every tokenizer's)."""
    from attnlab.data.tokenizers import SPECIAL_IDS

    return SPECIAL_IDS


def tiny_decode_model(compose_cfg, *overrides: str, seed: int = 0):
    """A tiny untied model (tied random embeddings mostly copy the input token) with 2 heads, for
    decoding tests on ``DECODE_VOCAB`` token ids."""
    from attnlab.training.build import build_model

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
    return build_model(cfg, DECODE_VOCAB, decode_ids().pad_id).eval()


def pairwise_combos() -> list[tuple[str, str, str]]:
    """(score, posenc, mask) triples in which every pair of options of two groups occurs at least once
    (an all-pairs covering array): every score with every posenc, the masks taking turns so that every
    score × mask and posenc × mask pair occurs too. As small as the largest pair product (scores ×
    posencs); a new option of any group joins it with no edit."""
    scores, posencs = config_options("attention/score"), config_options("posenc")
    masks = config_options("attention/mask")
    return [(s, p, masks[(i + j) % len(masks)]) for i, s in enumerate(scores) for j, p in enumerate(posencs)]


# The triples most likely to break beyond what pairs show: the explicit path (additive, gaussian) with
# Shaw's value terms or a learned bias under a restrictive mask, and fused scores whose q, k are
# transformed (cosine, general) under rotation or a bias with a dilated mask that leaves rows empty.
RISKY_COMBOS = [
    ("additive", "shaw", "dilated"),
    ("gaussian", "t5_bias", "local"),
    ("cosine", "rope", "dilated"),
    ("general", "alibi", "local"),
    ("additive", "alibi", "local"),
]


def combos_to_test() -> list[tuple[str, str, str]]:
    """``pairwise_combos`` plus the ``RISKY_COMBOS`` it lacks (those whose options all exist)."""
    combos = pairwise_combos()
    options = {
        0: config_options("attention/score"),
        1: config_options("posenc"),
        2: config_options("attention/mask"),
    }
    risky = [c for c in RISKY_COMBOS if all(c[i] in options[i] for i in range(3)) and c not in combos]
    return combos + risky


def decode_sources(seed: int = 0) -> torch.Tensor:
    """(4, 10) random sources of lengths 10, 7, 4 and 1, each ending in <eos>, padded."""
    ids = decode_ids()
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, DECODE_VOCAB, (4, 10), generator=g)
    for row, length in enumerate((10, 7, 4, 1)):
        src[row, length - 1] = ids.eos_id
        src[row, length:] = ids.pad_id
    return src


def assert_stepwise_decoding_matches_whole(model) -> None:
    """Feeding the decoder a 3-token prefix and then one token at a time through its cache gives the
    states of feeding it the whole target (padding inside the prefix is masked in both)."""
    from attnlab.model.cache import DecoderCache

    ids = decode_ids()
    src = decode_sources()
    tgt = torch.randint(3, DECODE_VOCAB, (4, 6))
    tgt[:, 0], tgt[2, 4:] = ids.bos_id, ids.pad_id
    memory, src_mask = model.encoder(src)
    whole = model.decoder(tgt, memory, src_mask)  # (b, t, m)
    cache = DecoderCache(len(model.decoder.layers))
    steps = [model.decoder(tgt[:, :3], memory, src_mask, cache)]
    steps += [model.decoder(tgt[:, i : i + 1], memory, src_mask, cache) for i in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)


def make_transformer(vocab_size: int, pad_id: int = 0, score=None, mask=None, posenc=None, **sizes):
    """A Transformer with scaled dot, no mask pattern and sinusoids unless told otherwise; ``sizes`` are
    ``TransformerSpec`` fields, plus ``padding_mask`` (``AttentionParts``)."""
    from attnlab.attention.patterns.full import FullPattern
    from attnlab.attention.scores.scaled_dot import ScaledDotScore
    from attnlab.model.spec import AttentionParts, TransformerSpec
    from attnlab.model.transformer import build_transformer
    from attnlab.posenc.sinusoidal import SinusoidalPositions

    parts = AttentionParts(
        score or ScaledDotScore,
        mask or FullPattern(),
        posenc or SinusoidalPositions,
        padding_mask=sizes.pop("padding_mask", True),
    )
    return build_transformer(TransformerSpec(**sizes), parts, vocab_size, pad_id)
