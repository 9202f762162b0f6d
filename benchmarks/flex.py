"""FlexAttention vs today's fused path: forward + backward time and peak memory of one attention layer
with ALiBi, a local window, or both, in bfloat16 on CUDA.

    .venv/bin/python benchmarks/flex.py [--lengths 128 256 512 1024] [--batch 16] [--d-model 512]
        [--heads 8] [--window 64] [--repeats 20] [--warmup 3]

One ``MultiHeadAttention`` (scaled dot, encoder site, d_model 512, 8 heads of 64, dropout off, train
mode) runs under ``torch.autocast("cuda", dtype=torch.bfloat16)``, as ``trainer.precision=bf16-mixed``
does, on B random inputs of length t with a padding mask (each sentence t/2 … t real tokens), twice:

- ``sdpa`` (``attention.backend=sdpa``, today's fused path): ``scaled_dot_product_attention`` with the
  ALiBi bias as a (b, h, t, t) bfloat16 float mask, the padding and window masks filled into it (with a
  local window and no bias: the boolean mask);
- ``flex`` (``attention.backend=flex``): ``torch.compile(flex_attention)`` with ALiBi as a score_mod
  (no bias tensor) and the masks as a block mask (the blocks outside the window are skipped).

Every timed step gets a fresh mask tensor, as every batch of a model does, so the flex time includes
building its block mask (a model's stack builds it once and shares it across its layers). Time is the
median of ``--repeats`` steps after ``--warmup`` steps (the first compiles), synchronised; memory is the
peak allocated during one step above what was allocated before it. ``max |Δ|`` is the largest
difference between the two paths' outputs on the same weights and batch (bfloat16). Needs a GPU: on a
machine without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnlab.attention.masks import combine
from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.patterns.local import LocalPattern
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.posenc.alibi import AlibiPositions
from attnlab.posenc.base import PositionalEncoding

CASES = {"alibi": (True, False), "local": (False, True), "alibi+local": (True, True)}  # (bias, window)
BACKENDS = ("sdpa", "flex")


def attention_layer(case: str, args: argparse.Namespace, device: torch.device) -> MultiHeadAttention:
    """The layer of ``case``; its ``backend`` attribute is switched between runs (same weights)."""
    torch.manual_seed(0)
    d_k = args.d_model // args.heads
    bias, _ = CASES[case]
    posenc = (AlibiPositions if bias else PositionalEncoding)(args.d_model, args.heads, d_k)
    score = ScaledDotScore(key_dim=d_k, num_heads=args.heads)
    layer = MultiHeadAttention(args.d_model, args.heads, score, posenc, "encoder", backend="sdpa")
    return layer.to(device).train()


def batch_mask(case: str, t: int, args: argparse.Namespace, g: torch.Generator, device) -> torch.Tensor:
    """(b, 1, t|1, t): padding after t/2 … t real tokens per sentence, and the window if ``case`` has one."""
    pos = torch.arange(t, device=device)  # (t,)
    lengths = torch.randint(t // 2, t + 1, (args.batch,), generator=g).to(device)  # (b,)
    keys = (pos[None] < lengths[:, None])[:, None, None, :]  # (b, 1, 1, t)
    _, window = CASES[case]
    return combine(keys, LocalPattern(args.window)(pos, pos) if window else None)


def step(layer: MultiHeadAttention, x: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """One forward and backward under bf16 autocast; returns the output (b, t, d_model)."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = layer(x, x, mask, pos, pos)  # (b, t, d_model)
    out.float().square().mean().backward()
    layer.zero_grad(set_to_none=True)
    return out


def measure(layer, x, masks, pos, warmup: int) -> tuple[float, float]:
    """(median ms, peak MiB above the allocated baseline) of steps over ``masks`` after ``warmup`` steps."""
    for mask in masks[:warmup]:
        step(layer, x, mask, pos)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    times = []
    for mask in masks[warmup:]:
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(layer, x, mask, pos)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return statistics.median(times) * 1e3, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--window", type=int, default=64, help="local window half-width w: |i - j| <= w")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmarks/flex.py needs a CUDA GPU: FlexAttention is compiled for CUDA (no backward on CPU)")
        return
    device = torch.device("cuda")
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16 autocast, B {args.batch}, "
        f"d_model {args.d_model} / {args.heads} heads, window {args.window}, forward + backward, "
        f"median of {args.repeats}\n"
    )
    print("| case | t | sdpa ms | flex ms | speed-up | sdpa MiB | flex MiB | max abs diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in CASES:
        layer = attention_layer(case, args, device)
        for t in args.lengths:
            g = torch.Generator().manual_seed(t)
            x = torch.randn(args.batch, t, args.d_model, generator=g).to(device)  # (b, t, d_model)
            pos = torch.arange(t, device=device)
            masks = [batch_mask(case, t, args, g, device) for _ in range(args.warmup + args.repeats)]
            ms, mib, outs = {}, {}, {}
            for backend in BACKENDS:
                layer.backend = backend
                ms[backend], mib[backend] = measure(layer, x, masks, pos, args.warmup)
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    outs[backend] = layer(x, x, masks[0], pos, pos).float()
            diff = (outs["flex"] - outs["sdpa"]).abs().max().item()
            print(
                f"| {case} | {t} | {ms['sdpa']:.2f} | {ms['flex']:.2f} | {ms['sdpa'] / ms['flex']:.2f}x "
                f"| {mib['sdpa']:.0f} | {mib['flex']:.0f} | {diff:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
