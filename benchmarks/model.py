"""Training-step speed of attnlab's Transformer against ``torch.nn.Transformer`` and HuggingFace Marian.

    .venv/bin/python benchmarks/model.py [--device cpu|cuda] [--dtype float32|bf16] [--batch 32]
        [--length 32] [--rounds 5] [--steps-per-round 5] [--warmup 2] [--threads N]
        [--models attnlab torch marian-sdpa marian-eager] [--peak-tflops 989] [--d-model 256]

One training step is timed: forward, cross-entropy with label smoothing 0.1 over the target tokens (the
same loss for every model), backward, AdamW step with attnlab's schedule (``optimizer_and_schedule``,
default ``OptimSettings``) and zeroing the gradients, on one fixed batch of B random sentences of
``--length`` tokens on each side (no padding, but every model gets and applies its padding masks). All
models have the same dims: ``model=small`` but post-LN as in Vaswani et al. (2017): d_model 256, 4 heads,
FFN 1024 (ReLU), 3 + 3 layers, vocabulary 8000, one embedding shared by source and target and tied to
the output projection, embeddings scaled by √d_model plus sinusoids, dropout 0.1 on the embeddings, the
sublayer outputs and the FFN's hidden layer, no attention dropout, no final LayerNorm:

- ``attnlab``: ``build_transformer`` with scaled dot, full pattern, sinusoids, ``norm_first=False``
  (``common.post_ln_model``);
- ``torch``: ``torch.nn.Transformer(batch_first=True, norm_first=False)``, its attention dropout set to
  0 and its final encoder and decoder LayerNorms removed, inside the embedding, sinusoids and tied
  projection it lacks (``TorchTransformer``);
- ``marian-sdpa`` / ``marian-eager``: ``transformers.MarianMTModel`` from a ``MarianConfig`` with these
  dims (``scale_embedding=True``, ``activation_function="relu"``, ``activation_dropout=0.1``),
  ``attn_implementation`` "sdpa" or "eager"; skipped when ``transformers`` is not installed.

Timing: every model first runs ``--warmup`` steps; then each of ``--rounds`` rounds runs
``--steps-per-round`` steps of every model in turn (the first model rotates), so drift on a noisy
machine hits all alike. A model's figure is the median over rounds of target tokens (B × length) per
second of wall-clock; the ratio is against attnlab in the same process. ``--dtype bf16`` runs forward
and loss under ``torch.autocast`` (weights and AdamW state stay float32).

Model FLOPs per step, as PaLM (Chowdhery et al., 2022, app. B) and nanoGPT count them:

    6 · (N + m·V) · T  +  12 · m · t · T · (L_enc + 2 · L_dec)

N = non-embedding parameters (trainable ones less the shared V × m table), m·V = the tied output
projection (a matmul on every target token), T = B·t target tokens (the encoder sees as many source
tokens, source and target being equally long), m = d_model, t = length; the second term is the
attention scores and weighted sums (encoder self, decoder self and cross; full, not halved for
causality). Shown as model TFLOP/s, and on CUDA as utilisation (MFU) of ``--peak-tflops``, the GPU's
dense bf16 peak (989 for an H100 SXM; float32 runs are measured against the same number).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from common import PAD, VOCAB, post_ln_model
from torch import nn

from attnlab.training.optim import OptimSettings, optimizer_and_schedule

HEADS, LAYERS = 4, 3  # model=small
MODELS = ("attnlab", "torch", "marian-sdpa", "marian-eager")
NAMES = {
    "attnlab": "attnlab",
    "torch": "torch.nn.Transformer",
    "marian-sdpa": "HF Marian (sdpa)",
    "marian-eager": "HF Marian (eager)",
}
INSTALL = '.venv/bin/python -m pip install -e ".[bench]"'


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` with what it lacks to translate, as attnlab has it: a shared embedding
    scaled by √m plus sinusoids and dropout, and a tied output projection.

    Shape letters: b batch, s source length, t target length, m d_model, V vocabulary.
    """

    def __init__(self, d_model: int, ffn_dim: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model, HEADS, LAYERS, LAYERS, ffn_dim, dropout, batch_first=True, norm_first=False
        )
        self.transformer.encoder.norm = None  # post-LN stacks end in the last layer's own norm
        self.transformer.decoder.norm = None
        for module in self.transformer.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = 0.0  # attention dropout off, as attnlab's model.attention_dropout=0
        self.generator = nn.Linear(d_model, VOCAB, bias=False)
        self.generator.weight = self.embed.weight
        inv_freq = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (m/2,)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (b, t) -> dropout(√m · embedding + sinusoids) (b, t, m)."""
        pos = torch.arange(ids.size(1), device=ids.device, dtype=self.inv_freq.dtype)  # (t,)
        angles = pos[:, None] * self.inv_freq[None, :]  # (t, m/2)
        pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (t, m)
        return self.dropout(self.embed(ids) * math.sqrt(self.embed.embedding_dim) + pe)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src (b, s), tgt (b, t) -> logits (b, t, V)."""
        t = tgt.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt.device).triu(1)  # (t, t), True = hidden
        src_pad, tgt_pad = src.eq(PAD), tgt.eq(PAD)  # (b, s), (b, t)
        h = self.transformer(
            self._embed(src),
            self._embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
        )  # (b, t, m)
        return self.generator(h)  # (b, t, V)


class MarianLogits(nn.Module):
    """``MarianMTModel`` called as the others are: (src (b, s), tgt (b, t)) ids -> logits (b, t, V)."""

    def __init__(self, marian: nn.Module):
        super().__init__()
        self.marian = marian

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.marian(
            input_ids=src,
            attention_mask=src.ne(PAD),
            decoder_input_ids=tgt,
            decoder_attention_mask=tgt.ne(PAD),
            use_cache=False,
        ).logits


def marian(d_model: int, ffn_dim: int, dropout: float, attn_implementation: str) -> nn.Module:
    """HF Marian with attnlab's dims and layout (post-LN, ReLU, √m-scaled shared embedding, tied)."""
    from transformers import MarianConfig, MarianMTModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    config = MarianConfig(
        vocab_size=VOCAB,
        d_model=d_model,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim,
        activation_function="relu",
        dropout=dropout,
        attention_dropout=0.0,
        activation_dropout=dropout,
        scale_embedding=True,
        max_position_embeddings=512,
        pad_token_id=PAD,
        decoder_start_token_id=1,
        eos_token_id=2,
        forced_eos_token_id=None,
        attn_implementation=attn_implementation,
    )
    model = MarianMTModel(config)
    if model.config._attn_implementation != attn_implementation:
        raise RuntimeError(
            f"asked Marian for attn_implementation={attn_implementation!r}, "
            f"got {model.config._attn_implementation!r}"
        )
    return MarianLogits(model)


def transformers_available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def build(name: str, device: torch.device, d_model: int = 256, dropout: float = 0.1) -> nn.Module:
    """The model ``name`` (one of ``MODELS``) in train mode: (src (b, s), tgt (b, t)) -> logits (b, t, V)."""
    torch.manual_seed(0)
    ffn_dim = 4 * d_model
    if name == "attnlab":
        model = post_ln_model(device, d_model, ffn_dim, dropout)
    elif name == "torch":
        model = TorchTransformer(d_model, ffn_dim, dropout)
    elif name.startswith("marian-"):
        model = marian(d_model, ffn_dim, dropout, name.removeprefix("marian-"))
    else:
        raise ValueError(f"unknown model {name!r}; choose from {list(MODELS)}")
    return model.to(device).train()


def parameter_counts(model: nn.Module, d_model: int) -> tuple[int, int]:
    """(trainable parameters, non-embedding ones): shared tensors once, frozen ones (attnlab's head
    gates, Marian's sinusoid table) not at all; non-embedding = less the one shared V × m table."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)  # parameters() dedups ties
    return total, total - VOCAB * d_model


def model_flops(non_embedding: int, d_model: int, batch: int, length: int) -> float:
    """6 · (N + m·V) · T + 12 · m · t · T · (L_enc + 2 · L_dec), T = B·t (see the module docstring)."""
    tokens = batch * length
    return 6 * (non_embedding + d_model * VOCAB) * tokens + 12 * d_model * length * tokens * 3 * LAYERS


@dataclass
class Row:
    name: str
    parameters: int
    non_embedding: int
    tokens_per_s: float  # median over rounds
    low: float  # slowest round
    high: float  # fastest round
    flops_per_step: float


def step_fn(
    model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, device: torch.device, bf16: bool
) -> Callable[[], None]:
    """One training step of ``model`` on (src (b, s), tgt (b, 1 + t)) with its own AdamW."""
    settings = OptimSettings()
    opt, schedule = optimizer_and_schedule([p for p in model.parameters() if p.requires_grad], settings)
    tgt_in, gold = tgt[:, :-1], tgt[:, 1:]  # (b, t), (b, t)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in)  # (b, t, V)
            loss = F.cross_entropy(
                logits.flatten(0, 1),
                gold.flatten(),
                ignore_index=PAD,
                label_smoothing=settings.label_smoothing,
            )
        loss.backward()
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)

    return step


def time_rounds(
    steps: dict[str, Callable[[], None]], rounds: int, per_round: int, warmup: int, device: torch.device
) -> dict[str, list[float]]:
    """Seconds of ``per_round`` steps, per model and round; rounds visit every model, rotating the first."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for step in steps.values():
        for _ in range(warmup):
            step()
    names, seconds = list(steps), {name: [] for name in steps}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            sync()
            start = time.perf_counter()
            for _ in range(per_round):
                steps[name]()
            sync()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("float32", "bf16"), default="float32")
    parser.add_argument("--batch", type=int, default=32, help="sentences per step")
    parser.add_argument("--length", type=int, default=32, help="tokens per source and per target sentence")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps-per-round", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2, help="steps per model before timing")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="peak dense bf16 TFLOP/s (CUDA)")
    parser.add_argument("--d-model", type=int, default=256, help="FFN is 4 × d_model")
    return parser.parse_args(argv)


def benchmark(args: argparse.Namespace) -> list[Row]:
    """Builds the models, times their training steps, returns one row per model built."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    names = list(dict.fromkeys(args.models))
    if any(n.startswith("marian-") for n in names) and not transformers_available():
        print(f"HF Marian skipped: transformers is not installed ({INSTALL})\n")
        names = [n for n in names if not n.startswith("marian-")]
    if not names:
        raise SystemExit("no model left to time: add attnlab or torch to --models")
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, VOCAB, (args.batch, args.length), generator=g).to(device)  # (b, s)
    tgt = torch.randint(3, VOCAB, (args.batch, 1 + args.length), generator=g)  # (b, 1 + t)
    tgt[:, 0] = 1  # <bos>
    tgt = tgt.to(device)
    models = {name: build(name, device, args.d_model) for name in names}
    bf16 = args.dtype == "bf16"
    steps = {name: step_fn(m, src, tgt, device, bf16) for name, m in models.items()}
    seconds = time_rounds(steps, args.rounds, args.steps_per_round, args.warmup, device)
    tokens = args.steps_per_round * args.batch * args.length
    rows = []
    for name, model in models.items():
        total, non_embedding = parameter_counts(model, args.d_model)
        rows.append(
            Row(
                name,
                total,
                non_embedding,
                tokens / statistics.median(seconds[name]),
                tokens / max(seconds[name]),
                tokens / min(seconds[name]),
                model_flops(non_embedding, args.d_model, args.batch, args.length),
            )
        )
    return rows


def print_table(args: argparse.Namespace, rows: list[Row], load_before: tuple[float, ...]) -> None:
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    load = "/".join(f"{x:.2f}" for x in load_before), "/".join(f"{x:.2f}" for x in os.getloadavg())
    where = torch.cuda.get_device_name(device) if cuda else f"cpu, {torch.get_num_threads()} threads"
    d = args.d_model
    print(
        f"device {where}, {args.dtype}, torch {torch.__version__}; B {args.batch} × {args.length} source "
        f"and {args.length} target tokens; d_model {d} / {HEADS} heads / FFN {4 * d} / {LAYERS}+{LAYERS} "
        f"layers / V {VOCAB}, post-LN, dropout 0.1; {args.rounds} rounds × {args.steps_per_round} steps "
        f"after {args.warmup} warm-up steps; load average (1/5/15 min) {load[0]} before, {load[1]} after"
    )
    print(
        "model FLOPs per step = 6 · (N + m·V) · T + 12 · m · t · T · (L_enc + 2 · L_dec), "
        f"T = B·t = {args.batch * args.length}"
        + (f"; MFU against {args.peak_tflops:g} TFLOP/s peak" if cuda else "")
        + "\n"
    )
    base = next((r for r in rows if r.name == "attnlab"), rows[0])
    mfu = " MFU |" if cuda else ""
    print(
        f"| model | parameters | non-embedding N | target tokens/s (median) | slowest–fastest round "
        f"| × {NAMES[base.name]} | model TFLOP/s |{mfu}"
    )
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if cuda else ""))
    for r in rows:
        tflops = r.flops_per_step * r.tokens_per_s / (args.batch * args.length) / 1e12
        cells = [
            NAMES[r.name],
            f"{r.parameters:,}",
            f"{r.non_embedding:,}",
            f"{r.tokens_per_s:,.0f}",
            f"{r.low:,.0f}–{r.high:,.0f}",
            f"{r.tokens_per_s / base.tokens_per_s:.2f}×",
            f"{tflops:.3g}",
        ]
        if cuda:
            cells.append(f"{100 * tflops / args.peak_tflops:.1f}%")
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\nmodel FLOPs per step: {rows[0].flops_per_step / 1e9:.3g} GFLOP ({NAMES[rows[0].name]})")


def main() -> None:
    args = parse_args()
    load_before = os.getloadavg()
    rows = benchmark(args)
    print_table(args, rows, load_before)


if __name__ == "__main__":
    main()
