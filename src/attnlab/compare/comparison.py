"""Runs grouped into variants, statistics over seeds, ranking and significance against a baseline.

Conventions:
- A variant is the set of runs with equal values of the ``--by`` keys; its label is always
  ``key=value`` pairs joined by ``", "`` in ``--by`` order (``attention/score=additive, posenc=alibi``),
  ``all runs`` when grouping by nothing. Default ``--by``: the override keys whose values differ
  between runs, except ``seed`` and ``hydra.*``.
- Statistics use completed runs only: mean ± t_{0.975, n-1} · s / √n (``stats.summarise``); with
  one seed the CI is ``n/a``. Variants are ranked by the mean of ``--metric``, highest first,
  lowest first for loss, ppl, aer, wall_s and peak_mem_mb.
- p vs baseline: sacreBLEU's paired bootstrap test on the saved hypotheses, runs paired by seed
  (``attnlab.compare.significance``).
- Baseline: ``--baseline LABEL`` (the label or its values alone, e.g. ``additive, alibi``), else the
  variant of the first completed run found (job ``0`` of a multirun, unless it failed).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from attnlab.compare.runs import Run, as_text, available_keys, default_by
from attnlab.compare.significance import paired_significance
from attnlab.compare.stats import Summary, rank, summarise

DEFAULT_COLUMNS = (
    "test/bleu",
    "test/chrf",
    "test_long/bleu",
    "test/aer",
    "train/tokens_per_s",
    "peak_mem_mb",
    "params",
    "wall_s",
)


@dataclass
class Variant:
    """The runs that share values of the ``--by`` keys, with their statistics.

    Attributes:
        label: ``key=value, key=value`` in ``--by`` order.
        values: ``{key: value}`` of the ``--by`` keys, as text.
        runs: every run of the variant, completed and failed, in the order found.
        metric: the primary metric that ``mean``, ``ci``, ``std`` and ``rank`` refer to.
        stats: ``{metric: Summary}`` over the completed runs, for the primary metric and the columns.
        rank: 1 = best by the primary metric; ``None`` without a value.
        p_value: paired bootstrap p against the baseline; ``None`` for the baseline or without a test.
        p_seeds: the seeds that were paired for the test.
        note: why there is no p-value (or ``"baseline"``).
        order: where the variant's first completed run is among all runs found (picks the baseline).
    """

    label: str
    values: dict[str, str]
    runs: list[Run]
    metric: str
    stats: dict[str, Summary] = field(default_factory=dict)
    rank: int | None = None
    p_value: float | None = None
    p_seeds: list = field(default_factory=list)
    note: str = ""
    order: int = 0

    @property
    def completed(self) -> list[Run]:
        return [r for r in self.runs if r.completed]

    @property
    def n(self) -> int:
        return len(self.completed)

    @property
    def mean(self) -> float | None:
        return self.stats[self.metric].mean

    @property
    def ci(self) -> float | None:
        return self.stats[self.metric].ci

    @property
    def std(self) -> float | None:
        return self.stats[self.metric].std

    def value(self, key: str) -> str | None:
        """The variant's value of ``key``: a ``--by`` value, or one that all its runs share."""
        if key in self.values:
            return self.values[key]
        found = {r.value(key) for r in self.runs}
        return found.pop() if len(found) == 1 else None


@dataclass
class Comparison:
    """The result of ``compare``: variants in rank order and how they were compared."""

    runs: list[Run]
    by: list[str]
    metric: str
    columns: list[str]
    variants: list[Variant]
    baseline: str | None
    baseline_reason: str
    bootstrap: int
    significance: str
    by_default: bool = False

    @property
    def failed(self) -> list[Run]:
        return [r for r in self.runs if not r.completed]

    def variant(self, label: str) -> Variant:
        """The variant labelled ``label``.

        Raises:
            KeyError: if there is none.
        """
        for v in self.variants:
            if v.label == label:
                return v
        raise KeyError(f"no variant {label!r}; the labels are: {'; '.join(v.label for v in self.variants)}")

    def label_of(self, run: Run) -> str:
        return next(v.label for v in self.variants if any(r is run for r in v.runs))

    def notes(self) -> list[str]:
        """Why variants have no p-value (other than the baseline)."""
        return [f"{v.label}: {v.note}" for v in self.variants if v.note and v.note != "baseline"]


def label_of(values: dict[str, str]) -> str:
    """``attention/score=additive, posenc=alibi``; ``all runs`` without keys."""
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "all runs"


def compare(
    runs: list[Run],
    by: list[str] | None = None,
    metric: str = "test/bleu",
    baseline: str | None = None,
    columns: list[str] | None = None,
    bootstrap: int = 1000,
) -> Comparison:
    """Groups ``runs`` into variants, aggregates seeds, ranks them and tests them against a baseline.

    Args:
        runs: from ``load_runs``; failed runs are listed but left out of every statistic.
        by: keys that define a variant (choices, override keys or dotted config paths);
            ``None`` = the override keys whose values differ between runs (``default_by``).
        metric: the primary metric, ranked and tested.
        baseline: label of the variant to test against; ``None`` = the first run's variant.
        columns: further metrics to aggregate; ``None`` = those of ``DEFAULT_COLUMNS`` present.
        bootstrap: bootstrap resamples of the significance test; 0 skips the test.

    Returns:
        A ``Comparison`` whose ``variants`` are in rank order.

    Raises:
        ValueError: for an unknown key, metric or baseline, or runs whose references differ.
    """
    by_default = by is None
    by = default_by(runs) if by is None else list(by)
    for key in by:
        if all(r.value(key) is None for r in runs):
            keys = available_keys(runs)
            raise ValueError(
                f"--by {key}: no run has this key{_did_you_mean(key, keys)}; choose from {', '.join(keys)} "
                "or a dotted path of .hydra/config.yaml (e.g. model.num_heads)"
            )
    completed = [r for r in runs if r.completed]
    present = sorted({m for r in completed for m in r.metrics})
    if completed:
        for name, what in [(metric, "--metric"), *[(c, "--columns") for c in columns or []]]:
            if name not in present:
                raise ValueError(
                    f"{what} {name}: no completed run has it{_did_you_mean(name, present)}; "
                    f"available: {', '.join(present)}"
                )
    if columns is None:
        columns = [c for c in DEFAULT_COLUMNS if c in present and c != metric]
    columns = [c for c in columns if c != metric]

    groups: dict[str, Variant] = {}
    for run in runs:
        values = {k: as_text(run.value(k)) for k in by}
        label = label_of(values)
        groups.setdefault(label, Variant(label, values, [], metric)).runs.append(run)
    variants = list(groups.values())
    position = {id(r): i for i, r in enumerate(runs)}
    for v in variants:
        v.order = min((position[id(r)] for r in v.completed), default=len(runs))
        v.stats = {m: summarise([r.metric(m) for r in v.completed]) for m in [metric, *columns]}
    for v, r in zip(variants, rank([v.mean for v in variants], metric)):
        v.rank = r

    base, reason = _baseline(variants, baseline)
    significance = "p: none (no completed run)"
    if base is not None:
        base.note = "baseline"
        significance = paired_significance(variants, base, metric, bootstrap)
    order = sorted(range(len(variants)), key=lambda i: (variants[i].rank is None, variants[i].rank or 0, i))
    return Comparison(
        runs=list(runs),
        by=by,
        metric=metric,
        columns=columns,
        variants=[variants[i] for i in order],
        baseline=base.label if base else None,
        baseline_reason=reason,
        bootstrap=bootstrap,
        significance=significance,
        by_default=by_default,
    )


def _did_you_mean(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _baseline(variants: list[Variant], wanted: str | None) -> tuple[Variant | None, str]:
    if wanted is not None:

        def squash(text: str) -> str:
            return "".join(text.split())

        for v in variants:
            if squash(wanted) in (squash(v.label), squash(", ".join(v.values.values()))):
                if v.n == 0:
                    raise ValueError(f"--baseline {wanted}: this variant has no completed run")
                return v, "--baseline"
        labels = [v.label for v in variants]
        hint = _did_you_mean(wanted, labels)
        raise ValueError(f"--baseline {wanted}: no such variant{hint}; the labels are: {'; '.join(labels)}")
    for v in sorted(variants, key=lambda v: v.order):
        if v.n:
            first = v.completed[0].name
            return v, f"the variant of the first completed run found, {first}; choose with --baseline"
    return None, ""
