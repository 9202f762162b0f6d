"""Speed and peak memory of every attention score against its naive eager formula, side by side.

    .venv/bin/python benchmarks/attention.py [--quick] [--threads N] [--score NAME ...]

For each score in conf/attention/score/ (or those named with ``--score``) and each length t (t_q = t_k =
64, 128, 256, 512; ``--quick``: 64, 128) it times forward + backward of the score module (gradients to q,
k and the score's parameters) at B 8, H 4, d 64, float32 on CPU, and the same for the score written the
obvious way (``NAIVE`` below: for additive the whole (b, h, t_q, t_k, n) broadcast tanh, reduced over n
both by the textbook multiply-and-sum and by a matmul with v; for gaussian the (b, h, t_q, t_k, d)
difference), in the same process with the same parameters. Ratios are naive / ours, so naive = 1× and
bigger is better. Additive is timed two ways (``OURS``), each against both baselines, so four rows: as it
runs here (float32 on CPU: the fused C loops of ``_additive_kernel.py``) and its eager loop
(``_additive_kernel.disabled()``: what other devices and dtypes run). The header says how long getting
the kernel took: about 0.3 s when this machine compiles it for the first time, under 1 ms once cached.

The table goes to stdout (the profiler writes start/stop lines to stderr: ``2>/dev/null``).

Time: ``torch.utils.benchmark.Timer.blocked_autorange`` (one warm-up call first), median per call.

Memory: PyTorch keeps no allocator statistics for CPU, so peak extra memory is estimated with
``torch.profiler.profile(profile_memory=True)`` over one forward + backward. The profiler gives each op
its net self memory (allocations minus frees inside it, children excluded) and ``[memory]`` events for
frees outside ops; net allocations are placed at their op's start, net frees at its end, and the peak
of the running sum in time order is reported. Inputs and parameters exist before profiling starts and
are not counted; a temporary allocated and freed inside one op cancels out and is missed. So this is an
estimate, not a measurement, but it sees every tensor that outlives the op making it, which is where the
5-D tensors of the naive formulas live.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.benchmark import Timer

from attnlab.attention.scores import _additive_kernel

CONF = Path(__file__).resolve().parents[1] / "conf" / "attention" / "score"
B, H, D = 8, 4, 64


def naive_scaled_dot(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, h, t_q, t_k)


def naive_dot(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1)  # (b, h, t_q, t_k)


def naive_general(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.einsum("bhid,hde,bhje->bhij", q, s.weight, k)  # (b, h, t_q, t_k)


def naive_cosine(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    norms = q.norm(dim=-1)[..., :, None] * k.norm(dim=-1)[..., None, :]  # (b, h, t_q, t_k)
    return (q @ k.transpose(-2, -1)) / norms * s.log_temperature.exp()[:, None, None]


def naive_gaussian(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    sq = (q[:, :, :, None, :] - k[:, :, None, :, :]).pow(2).sum(-1)  # (b, h, t_q, t_k, d) -> (b, h, t_q, t_k)
    return -sq / (2 * s.log_sigma.exp()[:, None, None] ** 2)


def naive_additive(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The textbook formula: v · tanh(W_q q + W_k k), broadcast and summed over n."""
    a, c = q @ s.w_q, k @ s.w_k  # (b, h, t_q, n), (b, h, t_k, n)
    tanh = torch.tanh(a[:, :, :, None, :] + c[:, :, None, :, :])  # (b, h, t_q, t_k, n)
    return (tanh * s.v[None, :, None, None, :]).sum(-1)  # (b, h, t_q, t_k)


def naive_additive_matmul(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A stronger eager baseline: the same 5-D tanh, reduced over n by a matmul with v."""
    a, c = q @ s.w_q, k @ s.w_k  # (b, h, t_q, n), (b, h, t_k, n)
    tanh = torch.tanh(a[:, :, :, None, :] + c[:, :, None, :, :])  # (b, h, t_q, t_k, n)
    return tanh @ s.v[:, None, :, None]  # (b, h, t_q, t_k, 1); step() reshapes to (b, h, t_q, t_k)


def ours(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return s(q, k)  # (b, h, t_q, t_k)


def ours_eager_loop(s: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Additive without its CPU kernel (the forward decides for the backward too): the eager loop."""
    with _additive_kernel.disabled():
        return s(q, k)  # (b, h, t_q, t_k)


# Baselines per score: (label, formula); a score with several gets one row per baseline.
NAIVE: dict[str, list[tuple[str, Callable]]] = {
    "scaled_dot": [("", naive_scaled_dot)],
    "dot": [("", naive_dot)],
    "general": [("", naive_general)],
    "cosine": [("", naive_cosine)],
    "gaussian": [("", naive_gaussian)],
    "additive": [(" (vs textbook v·tanh sum)", naive_additive), (" (vs tanh @ v)", naive_additive_matmul)],
}

# Ways of running a score itself: (label, function); every one meets every baseline.
OURS: dict[str, list[tuple[str, Callable]]] = {"additive": [("", ours), (", eager loop", ours_eager_loop)]}


def step(fn: Callable, score: nn.Module, q: torch.Tensor, k: torch.Tensor, grad: torch.Tensor) -> None:
    """One forward + backward; gradients land in q.grad, k.grad and the score's parameters."""
    out = fn(score, q, k).reshape(grad.shape)  # (b, h, t, t)
    out.backward(grad)


def seconds(fn: Callable, *args) -> float:
    step(fn, *args)  # warm-up
    timer = Timer("step(fn, *args)", globals=dict(step=step, fn=fn, args=args))
    return timer.blocked_autorange(min_run_time=1.0).median


def peak_bytes(fn: Callable, *args) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(fn, *args)
    deltas = []  # (time, bytes): allocations when their op starts, frees when it ends
    for e in prof.events():
        delta = e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage
        if delta:
            deltas.append((e.time_range.start if delta > 0 else e.time_range.end, delta))
    live = peak = 0
    for _, delta in sorted(deltas):
        live += delta
        peak = max(peak, live)
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="t = 64, 128 only")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--score", action="append", help="only this score (a stem in conf/attention/score/)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lengths = [64, 128] if args.quick else [64, 128, 256, 512]
    paths = [p for p in sorted(CONF.glob("*.yaml")) if args.score is None or p.stem in args.score]
    start = time.perf_counter()
    kernel = _additive_kernel.library()
    kernel_note = (
        f"additive CPU kernel ready in {(time.perf_counter() - start) * 1e3:.0f} ms"
        if kernel is not None
        else "no additive CPU kernel: its eager loop runs"
    )
    print(f"B {B}, H {H}, d {D}, float32, CPU, {torch.get_num_threads()} threads; ratios naive / ours")
    print(f"{kernel_note}\n")
    print("| score | t | naive ms | ours ms | speed | naive MB | ours MB | memory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        name = path.stem
        if name not in NAIVE:
            print(f"| {name} | | no naive formula in benchmarks/attention.py | | | | | |")
            continue
        torch.manual_seed(0)
        score = instantiate(OmegaConf.load(path))(key_dim=D, num_heads=H)
        for t in lengths:
            q = torch.randn(B, H, t, D, requires_grad=True)
            k = torch.randn(B, H, t, D, requires_grad=True)
            grad = torch.randn(B, H, t, t)
            measured = [  # (label, seconds, MiB) per way of running the score
                (label, seconds(fn, score, q, k, grad), peak_bytes(fn, score, q, k, grad) / 2**20)
                for label, fn in OURS.get(name, [("", ours)])
            ]
            for label, naive in NAIVE[name]:
                naive_s, naive_mb = (
                    seconds(naive, score, q, k, grad),
                    peak_bytes(naive, score, q, k, grad) / 2**20,
                )
                for ours_label, ours_s, ours_mb in measured:
                    speed, memory = naive_s / ours_s, naive_mb / max(ours_mb, 1e-9)
                    print(
                        f"| {name}{ours_label}{label} | {t} | {naive_s * 1e3:.1f} | {ours_s * 1e3:.1f} "
                        f"| {speed:.1f}× | {naive_mb:.0f} | {ours_mb:.0f} | {memory:.1f}× |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
