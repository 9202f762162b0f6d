"""p vs baseline: sacreBLEU's paired bootstrap test (``attnlab.compare.stats.paired_bootstrap``) on the
saved hypotheses of the metric's split (``test/bleu`` → ``hyp/test.txt``).

Runs of a variant and of the baseline are paired by seed (the seeds both have); the paired seeds'
hypotheses, and references, are concatenated in seed order into one corpus and tested once. Compared
runs must have identical references (the same test set). Variants that share the same paired seeds are
tested against the baseline in one ``PairedTest`` call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from attnlab.compare.runs import Run
from attnlab.compare.stats import corpus_scorer, paired_bootstrap, split_of

if TYPE_CHECKING:
    from attnlab.compare.comparison import Variant

ALPHA = 0.05


def paired_significance(variants: list[Variant], base: Variant, metric: str, bootstrap: int) -> str:
    """Sets ``p_value``, ``p_seeds`` and ``note`` of every variant; returns how p was computed.

    Raises:
        ValueError: if two runs' references differ (different test sets).
    """
    split = split_of(metric)
    scorer = corpus_scorer(metric, base.completed[0].sacrebleu)
    others = [v for v in variants if v is not base and v.n]
    if bootstrap <= 0:
        for v in others:
            v.note = "significance test skipped (--bootstrap 0)"
        return "p: not computed (--bootstrap 0)"
    if scorer is None or split is None:
        for v in others:
            v.note = f"no significance test for {metric}"
        return f"p: none; the paired bootstrap test needs a BLEU or chrF metric (test/bleu, …), not {metric}"

    def by_seed(v: Variant) -> dict:
        runs = {}
        for r in v.completed:
            hyps = r.hypotheses(split)
            if hyps is not None:
                runs.setdefault(r.seed, (r, hyps))
        return runs

    base_runs = by_seed(base)
    reference: tuple[Run, list[str]] | None = None
    groups: dict[tuple, list[tuple[Variant, dict]]] = {}
    for v in [base, *others]:
        runs = base_runs if v is base else by_seed(v)
        for run, hyps in runs.values():
            if reference is None:
                reference = (run, hyps.refs)
            elif hyps.refs != reference[1]:
                raise ValueError(
                    f"hyp/{split}.ref.txt differs between {reference[0].path} and {run.path} "
                    "(different test sets): compare runs on the same data, or pass --bootstrap 0 "
                    "to skip the significance test"
                )
        if v is base:
            continue
        if not runs:
            v.note = f"no hyp/{split}.txt in its runs"
            continue
        seeds = sorted(set(runs) & set(base_runs), key=lambda s: (s is None, s if s is not None else 0))
        if not seeds:
            v.note = (
                "no seed in common with the baseline" if base_runs else f"baseline has no hyp/{split}.txt"
            )
            continue
        groups.setdefault(tuple(seeds), []).append((v, runs))
    for seeds, members in groups.items():
        refs = [line for s in seeds for line in base_runs[s][1].refs]
        base_hyps = [line for s in seeds for line in base_runs[s][1].hyps]
        systems = [[line for s in seeds for line in runs[s][1].hyps] for _, runs in members]
        for (v, _), p in zip(members, paired_bootstrap(base_hyps, systems, refs, scorer, bootstrap)):
            v.p_value, v.p_seeds = p, list(seeds)
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return (
        f"p vs baseline: paired bootstrap resampling (sacreBLEU PairedTest, {bootstrap} resamples, "
        f"seed {seed}) of {scorer.__class__.__name__} on hyp/{split}.txt; runs are paired by seed (the "
        f"seeds both variants have) and the paired seeds' hypotheses are concatenated into one corpus; "
        f"* p < {ALPHA}"
    )
