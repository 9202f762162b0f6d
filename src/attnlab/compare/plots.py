"""Figures of ``attnlab-compare``, one PNG each in ``<out>/plots/`` (matplotlib, "Agg" backend).

- ``metric.png``: the primary metric per variant, mean with 95 % CI error bars, one dot per seed.
- ``val_curves.png``: val/bleu (or the primary metric when it is a ``val/`` one) against training step,
  mean over the seeds of each variant, shaded between the lowest and highest seed.
- ``length_buckets.png``: corpus BLEU by source length in words. Sentences of the metric's split (and
  of ``test_long`` when that split is ``test``) fall into about five buckets of equal size, the 20 %,
  40 %, … quantiles of source length (``attnlab.compare.stats.length_buckets``); each variant's hypotheses of
  all its completed seeds are pooled before scoring a bucket.
- ``cost.png``: the primary metric against ``train/tokens_per_s`` and against ``peak_mem_mb``.

A figure whose data no run has is not drawn. Each variant keeps its colour across figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from attnlab.compare.stats import corpus_scorer, length_buckets, score_by_bucket, split_of  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from attnlab.compare.comparison import Comparison, Variant

PLOTS = ("metric", "val_curves", "length_buckets", "cost")
FONT = 8
DPI = 100


def save_figure(fig: Figure, path: Path) -> Path:
    """Writes ``fig`` as a PNG at ``path`` (creating parent folders), closes it, and returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png")
    plt.close(fig)
    return path


def colours(comparison: Comparison) -> dict[str, tuple]:
    """One colour per variant label, in rank order."""
    cmap = plt.get_cmap("tab10" if len(comparison.variants) <= 10 else "tab20")
    return {v.label: cmap(i % cmap.N) for i, v in enumerate(comparison.variants)}


def draw_plots(comparison: Comparison, folder: Path) -> dict[str, Path]:
    """Draws every figure the runs have data for into ``folder``; returns ``{name: path}``.

    Figures of an earlier comparison in the same folder are removed first, so the folder holds
    exactly the figures of this one.
    """
    folder = Path(folder)
    for name in PLOTS:
        (folder / f"{name}.png").unlink(missing_ok=True)
    drawn = {}
    for name, draw in (
        ("metric", metric_figure),
        ("val_curves", curves_figure),
        ("length_buckets", buckets_figure),
        ("cost", cost_figure),
    ):
        fig = draw(comparison)
        if fig is not None:
            drawn[name] = save_figure(fig, folder / f"{name}.png")
    return drawn


def _legend(fig: Figure, handles: list, labels: list[str]) -> None:
    fig.legend(handles, labels, loc="outside lower center", fontsize=FONT, ncols=1 if len(labels) > 6 else 2)


def metric_figure(comparison: Comparison) -> Figure | None:
    """Mean ± CI of the primary metric per variant (best at the top) with each seed's value."""
    variants = [v for v in comparison.variants if v.n and v.mean is not None]
    if not variants:
        return None
    colour = colours(comparison)
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(variants) + 1.4), layout="constrained")
    for y, v in enumerate(variants):
        seeds = [r.metric(comparison.metric) for r in v.completed]
        seeds = [s for s in seeds if s is not None]
        ax.scatter(seeds, [y] * len(seeds), s=12, color="0.55", zorder=2)
        ax.errorbar(
            v.mean,
            y,
            xerr=v.ci if v.ci is not None else None,
            fmt="o",
            color=colour[v.label],
            capsize=4,
            zorder=3,
        )
    base = next((v for v in variants if v.label == comparison.baseline), None)
    if base is not None:
        ax.axvline(base.mean, color="0.3", linestyle="--", linewidth=0.8, label="baseline mean")
        ax.legend(fontsize=FONT, loc="best")
    ax.set_yticks(range(len(variants)), labels=[f"{v.label} (n={v.n})" for v in variants], fontsize=FONT)
    ax.invert_yaxis()
    ax.set_xlabel(comparison.metric)
    ax.set_title(f"{comparison.metric}: mean ± 95% CI over seeds (grey: each seed)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return fig


def curve_key(metric: str) -> str:
    return metric if metric.startswith("val/") else "val/bleu"


def mean_curve(variant: Variant, key: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, lowest, highest) of ``key`` over the seeds that logged each step."""
    by_step: dict[int, list[float]] = {}
    for run in variant.completed:
        for row in run.history():
            if row.get(key) is not None and row.get("step") is not None:
                by_step.setdefault(int(row["step"]), []).append(float(row[key]))
    steps = sorted(by_step)
    return (
        steps,
        [float(np.mean(by_step[s])) for s in steps],
        [min(by_step[s]) for s in steps],
        [max(by_step[s]) for s in steps],
    )


def curves_figure(comparison: Comparison) -> Figure | None:
    """Validation curves, mean over seeds per variant."""
    key = curve_key(comparison.metric)
    curves = {v.label: mean_curve(v, key) for v in comparison.variants if v.n}
    curves = {label: c for label, c in curves.items() if c[0]}
    if not curves:
        return None
    colour = colours(comparison)
    fig, ax = plt.subplots(figsize=(7.5, 4.2 + 0.18 * len(curves)), layout="constrained")
    handles = []
    for label, (steps, mean, lo, hi) in curves.items():
        (line,) = ax.plot(steps, mean, marker=".", color=colour[label])
        ax.fill_between(steps, lo, hi, color=colour[label], alpha=0.15, linewidth=0)
        handles.append(line)
    ax.set_xlabel("step")
    ax.set_ylabel(key)
    ax.set_title(f"{key} while training: mean over seeds (band: lowest to highest seed)", fontsize=9)
    ax.grid(alpha=0.3)
    _legend(fig, handles, list(curves))
    return fig


def bucket_scores(
    comparison: Comparison,
) -> tuple[list[str], list[tuple[int, int]], list[float], dict[str, list]]:
    """(splits used, buckets, sentences per run in each bucket, ``{label: BLEU per bucket}``).

    Each variant's hypotheses of all its completed seeds are pooled before a bucket is scored.
    """
    split = split_of(comparison.metric) or "test"
    splits = [split, "test_long"] if split == "test" else [split]
    pooled: dict[str, tuple[list[str], list[str], list[str]]] = {}
    used: set[str] = set()
    signature, n_runs = None, 0
    for v in comparison.variants:
        srcs, hyps, refs = [], [], []
        for run in v.completed:
            found = {s: run.hypotheses(s) for s in splits}
            found = {s: h for s, h in found.items() if h is not None and h.srcs is not None}
            for s, h in found.items():
                srcs += h.srcs
                hyps += h.hyps
                refs += h.refs
                used.add(s)
            n_runs += bool(found)
            signature = signature or (run.sacrebleu if found else None)
        if srcs:
            pooled[v.label] = (srcs, hyps, refs)
    if not pooled:
        return [], [], [], {}
    lengths = [len(s.split()) for srcs, _, _ in pooled.values() for s in srcs]
    buckets = length_buckets(lengths)
    per_run = [sum(lo <= n <= hi for n in lengths) / n_runs for lo, hi in buckets]
    scorer = corpus_scorer("test/bleu", signature)
    scores = {label: score_by_bucket(*data, buckets, scorer) for label, data in pooled.items()}
    return [s for s in splits if s in used], buckets, per_run, scores


def buckets_figure(comparison: Comparison) -> Figure | None:
    """Corpus BLEU per source-length bucket, one line per variant."""
    splits, buckets, per_run, scores = bucket_scores(comparison)
    if not buckets:
        return None
    colour = colours(comparison)
    fig, ax = plt.subplots(figsize=(7.5, 4.2 + 0.18 * len(scores)), layout="constrained")
    x = np.arange(len(buckets))
    handles = []
    for label, values in scores.items():
        y = [np.nan if s is None else s for s in values]
        (line,) = ax.plot(x, y, marker="o", color=colour[label])
        handles.append(line)
    ticks = [f"{lo}–{hi}" if lo != hi else str(lo) for lo, hi in buckets]
    ax.set_xticks(x, labels=[f"{t}\n({n:.0f})" for t, n in zip(ticks, per_run)])
    ax.set_xlabel("source length in words (sentences per run)")
    ax.set_ylabel("BLEU")
    ax.set_title(f"BLEU by source length ({' + '.join(splits)}; seeds pooled)", fontsize=9)
    ax.grid(alpha=0.3)
    _legend(fig, handles, list(scores))
    return fig


def cost_figure(comparison: Comparison) -> Figure | None:
    """Primary metric against training throughput and against peak memory, CI as error bars."""
    variants = [v for v in comparison.variants if v.n and v.mean is not None]
    panels = []
    for key, name in (("train/tokens_per_s", "train tokens / s"), ("peak_mem_mb", "peak memory (MB)")):
        xs = {v.label: _mean(v, key) for v in variants}
        if any(x is not None for x in xs.values()):
            panels.append((key, name, xs))
    if not panels:
        return None
    colour = colours(comparison)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(4.2 * len(panels) + 1, 4.2 + 0.18 * len(variants)),
        squeeze=False,
        layout="constrained",
        sharey=True,
    )
    handles = {}
    for ax, (_, name, xs) in zip(axes[0], panels):
        for v in variants:
            if xs[v.label] is None:
                continue
            handles[v.label] = ax.errorbar(
                xs[v.label],
                v.mean,
                yerr=v.ci if v.ci is not None else None,
                fmt="o",
                color=colour[v.label],
                capsize=3,
            )
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(comparison.metric)
    fig.suptitle(f"{comparison.metric} against cost (means over seeds; bars: 95% CI)", fontsize=9)
    _legend(fig, list(handles.values()), list(handles))
    return fig


def _mean(variant: Variant, key: str) -> float | None:
    values = [r.metric(key) for r in variant.completed]
    values = [x for x in values if x is not None]
    return float(np.mean(values)) if values else None
