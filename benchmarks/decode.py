"""Decoding speed with and without the key/value cache: greedy and beam search, side by side.

    .venv/bin/python benchmarks/decode.py [--batch 32] [--length 64] [--beam 4] [--threads N] [--device cpu]

One randomly initialised model with ``model=small`` dims (d_model 256, 4 heads, 3 + 3 layers, FFN 1024;
vocabulary 8000, about Multi30k's SentencePiece size), one batch of B random sources of 12–24 tokens.
Every sentence decodes exactly ``--length`` tokens: the limit is ``max_len_offset = length`` (ratio 0)
and <eos> is an id outside the vocabulary, which the model never produces, so decoding never stops
early (beam search then finishes nothing before the limit; that is fine for timing). Each row decodes
the same inputs with ``use_cache`` true and false in the same process; time is wall-clock, best of
``--repeats`` (after warm-up calls), in milliseconds per source sentence. Ratio = uncached / cached.

Uncached decoding re-runs the decoder over the whole prefix at every step (O(t²) token-layers for t
steps); cached decoding feeds one token per step and projects the source's cross-attention keys and
values once.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from common import IDS, VOCAB, random_sources, small_model

from attnlab.training.decode import DecodeSettings, beam_search, greedy_decode


def best_time(
    fn: Callable[[bool], torch.Tensor], use_cache: bool, repeats: int, device: torch.device
) -> float:
    """Seconds of the fastest of ``repeats`` calls ``fn(use_cache)``."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(use_cache)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64, help="output tokens per sentence")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = small_model(device)
    src = random_sources(args.batch, device)

    def settings(use_cache: bool) -> DecodeSettings:
        return DecodeSettings(
            beam_size=args.beam, max_len_ratio=0.0, max_len_offset=args.length, use_cache=use_cache
        )

    def greedy(use_cache: bool) -> torch.Tensor:
        return greedy_decode(model, src, IDS, settings(use_cache))

    def beam(use_cache: bool) -> torch.Tensor:
        return beam_search(model, src, IDS, settings(use_cache))

    assert greedy(True).size(1) == args.length  # runs to the limit (and warms up)
    assert torch.equal(greedy(True), greedy(False))
    beam(True)  # warm-up

    print(
        f"device {device}, threads {torch.get_num_threads()}, B {args.batch}, output length "
        f"{args.length}, model d_model 256 / 4 heads / 3+3 layers / FFN 1024 / V {VOCAB}\n"
    )
    print("| decoding | uncached ms/sentence | cached ms/sentence | uncached / cached |")
    print("|---|---:|---:|---:|")
    for name, fn in (("greedy", greedy), (f"beam {args.beam}", beam)):
        off = best_time(fn, False, args.repeats, device) * 1000 / args.batch
        on = best_time(fn, True, args.repeats, device) * 1000 / args.batch
        print(f"| {name} | {off:.2f} | {on:.2f} | {off / on:.1f}× |", flush=True)


if __name__ == "__main__":
    main()
