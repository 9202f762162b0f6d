"""Decoding speed and key/value cache size of multi-head vs grouped-query vs multi-query attention.

    .venv/bin/python benchmarks/kv_heads.py [--batch 32] [--length 64] [--beam 4] [--repeats 3] [--device cpu]

Models with ``model=small`` dims but 8 query heads (d_model 256, head_dim 32, 3 + 3 layers, FFN 1024,
vocabulary 8000), differing only in ``num_kv_heads`` (8 = multi-head, 2 = grouped-query, 1 =
multi-query), decode the same B random sources of 12–24 tokens with the key/value cache, each sentence
exactly ``--length`` tokens (<eos> is never produced). Time is wall-clock, best of ``--repeats`` rounds
that visit every model in turn (so drift on a noisy machine hits them alike), in milliseconds per
sentence; the ratio is against multi-head in the same process. Cache size is the bytes the decoder's
cache holds at the end: self-attention keys and values for the output so far plus cross-attention keys
and values of the source, per layer.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import IDS, VOCAB, random_sources, small_model

from attnlab.training.decode import DecodeSettings, beam_search, greedy_decode

HEADS, KV_HEADS, LAYERS, D_MODEL = 8, (8, 2, 1), 3, 256  # model=small dims (common.small_model)


def model_with(num_kv_heads: int, device: torch.device):
    torch.manual_seed(0)
    return small_model(device, num_heads=HEADS, num_kv_heads=num_kv_heads)


def cache_mib(num_kv_heads: int, batch: int, src_len: int, out_len: int) -> float:
    """Decoder cache bytes at the end of greedy decoding, float32: per layer, self (out_len) + cross
    (src_len) keys and values of num_kv_heads heads of width d_model / heads."""
    head_dim = D_MODEL // HEADS
    return LAYERS * 2 * batch * num_kv_heads * head_dim * (out_len + src_len) * 4 / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64, help="output tokens per sentence")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    models = {kv: model_with(kv, device) for kv in KV_HEADS}
    src = random_sources(args.batch, device)
    settings = DecodeSettings(beam_size=args.beam, max_len_ratio=0.0, max_len_offset=args.length)
    runs = {
        "greedy": lambda m: greedy_decode(m, src, IDS, settings),
        f"beam {args.beam}": lambda m: beam_search(m, src, IDS, settings),
    }
    best = {(name, kv): float("inf") for name in runs for kv in KV_HEADS}
    with torch.no_grad():
        for fn in runs.values():  # warm-up
            for m in models.values():
                fn(m)
        for _ in range(args.repeats):
            for name, fn in runs.items():
                for kv, m in models.items():
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    start = time.perf_counter()
                    fn(m)
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    best[name, kv] = min(best[name, kv], time.perf_counter() - start)
    print(
        f"device {device}, threads {torch.get_num_threads()}, B {args.batch}, output length {args.length}, "
        f"d_model {D_MODEL} / {HEADS} query heads / {LAYERS}+{LAYERS} layers / V {VOCAB}\n"
    )
    print(
        "| num_kv_heads | params | decoder cache (greedy) | "
        + " | ".join(f"{n} ms/sentence" for n in runs)
        + " |"
    )
    print("|---:|---:|---:|" + "---:|" * len(runs))
    for kv, m in models.items():
        params = sum(p.numel() for p in m.parameters())
        cells = []
        for name in runs:
            ms = best[name, kv] * 1000 / args.batch
            cells.append(f"{ms:.2f} ({best[name, 8] / best[name, kv]:.2f}× MHA)")
        mib = cache_mib(kv, args.batch, 24, args.length)
        print(f"| {kv} | {params:,} | {mib:.2f} MiB | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
