"""Statistics over seeds and between systems for ``attnlab-compare``.

    mean ± t_{0.975, n-1} · s / √n      (95 % confidence interval of the mean, Student t, s with ddof 1)

Significance is the paired bootstrap resampling test (Koehn, 2004, "Statistical Significance Tests for
Machine Translation Evaluation") as sacreBLEU implements it (``sacrebleu.significance.PairedTest``,
``test_type="bs"``): sentences are resampled with replacement, the same indices for both systems, and
the p-value is the share of resamples whose centred score difference exceeds the observed one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LOWER_IS_BETTER = ("loss", "ppl", "aer", "wall_s", "peak_mem_mb")
SPLIT_OF_STAGE = {"val": "valid", "test": "test", "test_long": "test_long"}


@dataclass(frozen=True)
class Summary:
    """A metric over the seeds of one variant; ``ci`` and ``std`` are ``None`` with fewer than 2 values."""

    n: int
    mean: float | None
    std: float | None
    ci: float | None


def summarise(values: Sequence[float | None]) -> Summary:
    """Mean, sample standard deviation and Student-t 95 % CI half-width of the finite ``values``.

    Example: 30, 32, 34 → mean 32, s = 2, ci = t_{0.975, 2} · 2 / √3 = 4.303 · 1.1547 = 4.968. The
    quantile is ``scipy.special.stdtrit(n - 1, 0.975)``, the function behind ``scipy.stats.t.ppf``
    (importing scipy.stats would take a second longer).
    """
    from scipy.special import stdtrit

    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(finite)
    if n == 0:
        return Summary(0, None, None, None)
    mean = float(np.mean(finite))
    if n == 1:
        return Summary(1, mean, None, None)
    std = float(np.std(finite, ddof=1))
    return Summary(n, mean, std, float(stdtrit(n - 1, 0.975) * std / math.sqrt(n)))


def lower_is_better(metric: str) -> bool:
    """True for metrics named like loss, ppl, aer, wall_s or peak_mem_mb."""
    return any(word in metric for word in LOWER_IS_BETTER)


def rank(means: Sequence[float | None], metric: str) -> list[int | None]:
    """Competition ranks (1, 2, 2, 4) of ``means``, best first; ``None`` for a missing mean."""
    sign = 1.0 if lower_is_better(metric) else -1.0
    ranks: list[int | None] = []
    for m in means:
        if m is None:
            ranks.append(None)
        else:
            ranks.append(1 + sum(1 for o in means if o is not None and sign * o < sign * m))
    return ranks


def split_of(metric: str) -> str | None:
    """The evaluation split whose hypotheses a metric was computed on: ``test_long/bleu`` → ``test_long``."""
    stage, sep, _ = metric.partition("/")
    return SPLIT_OF_STAGE.get(stage) if sep else None


def corpus_scorer(metric: str, signature: str | None = None):
    """A sacreBLEU metric object for ``*/bleu`` or ``*/chrf`` (``None`` for any other metric).

    BLEU takes its tokeniser, casing, smoothing and effective order from the runs' signature
    (``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``), so the test scores what training scored.
    """
    from sacrebleu.metrics import BLEU, CHRF

    name = metric.rpartition("/")[2]
    if name == "chrf":
        return CHRF()
    if name != "bleu":
        return None
    fields = dict(part.split(":", 1) for part in (signature or "").split("|") if ":" in part)
    kwargs = {}
    if "tok" in fields:
        kwargs["tokenize"] = fields["tok"]
    if fields.get("case") == "lc":
        kwargs["lowercase"] = True
    if fields.get("smooth") in ("exp", "floor", "add-k", "none"):
        kwargs["smooth_method"] = fields["smooth"]
    if fields.get("eff") == "yes":
        kwargs["effective_order"] = True
    try:
        return BLEU(**kwargs)
    except Exception:  # noqa: BLE001 - an unknown tokeniser in an old signature: sacreBLEU's defaults
        return BLEU()


def paired_bootstrap(
    baseline: Sequence[str],
    systems: Sequence[Sequence[str]],
    references: Sequence[str],
    scorer,
    n_samples: int = 1000,
) -> list[float]:
    """p-values of each system against the baseline on one corpus (paired bootstrap resampling).

    All systems share one ``PairedTest`` call (the baseline's statistics are computed once). The
    resampling seed is sacreBLEU's (``SACREBLEU_SEED``, default 12345), so results are reproducible.
    A system that scores exactly the baseline's score (identical hypotheses, or both BLEU 0) gets
    p = 1: there is no difference to test, but sacreBLEU counts resampled differences strictly greater
    than the observed one, so when every resample also ties it would report 1 / (n_samples + 1).

    Args:
        baseline: the baseline's hypotheses, one per reference.
        systems: the hypotheses of each other system, aligned with ``references``.
        references: one reference per sentence.
        scorer: a sacreBLEU metric (``corpus_scorer``).
        n_samples: bootstrap resamples.

    Returns:
        One p-value per system, in order.
    """
    from sacrebleu.significance import PairedTest

    if not systems:
        return []
    named = [("baseline", list(baseline))] + [(f"system{i}", list(s)) for i, s in enumerate(systems)]
    test = PairedTest(named, {"score": scorer}, [list(references)], test_type="bs", n_samples=n_samples)
    _, scores = test()
    (results,) = (v for k, v in scores.items() if k != "System")
    base_score = results[0].score
    return [1.0 if r.score == base_score else float(r.p_value) for r in results[1:]]


def length_buckets(lengths: Sequence[int], n_buckets: int = 5) -> list[tuple[int, int]]:
    """Inclusive ranges of source length (in words) with about equal numbers of sentences.

    The upper ends are the 1/n, 2/n, … quantiles of ``lengths`` (rounded down to a length that
    occurs); coinciding ends merge, so there may be fewer than ``n_buckets`` ranges.
    """
    if not lengths:
        return []
    values = np.asarray(sorted(lengths))
    ends = sorted({int(np.quantile(values, q, method="lower")) for q in np.linspace(0, 1, n_buckets + 1)[1:]})
    ends[-1] = int(values[-1])
    buckets, lo = [], int(values[0])
    for end in ends:
        if end >= lo:
            buckets.append((lo, end))
            lo = end + 1
    return buckets


def score_by_bucket(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    buckets: Sequence[tuple[int, int]],
    scorer,
) -> list[float | None]:
    """Corpus score of the sentences whose source length (whitespace words) falls in each bucket."""
    scores: list[float | None] = []
    lengths = [len(s.split()) for s in sources]
    for lo, hi in buckets:
        rows = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        if not rows:
            scores.append(None)
            continue
        hyps = [hypotheses[i] for i in rows]
        refs = [references[i] for i in rows]
        scores.append(float(scorer.corpus_score(hyps, [refs]).score))
    return scores
