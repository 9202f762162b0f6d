"""``attnlab-compare``: many run dirs → one table of variants (mean ± 95 % CI over seeds), significance
against a baseline, plots and a self-contained HTML report.

    attnlab-compare outputs/multirun/2026-11-21/10-00-00
    attnlab-compare RUNS... --by attention/score posenc --metric test_long/bleu --baseline posenc=alibi
    attnlab-compare outputs/multirun/... --expected experiments/vaswani_heads/expected.yaml --html heads.html

Conventions:

- A variant is the set of runs with equal values of the ``--by`` keys; its label is always
  ``key=value`` pairs joined by ``", "`` in ``--by`` order (``attention/score=additive, posenc=alibi``),
  ``all runs`` when grouping by nothing. Default ``--by``: the override keys whose values differ
  between runs, except ``seed`` and ``hydra.*``.
- Statistics use completed runs only: mean ± t_{0.975, n-1} · s / √n (``attnlab.stats.summarise``);
  with one seed the CI is ``n/a``. Variants are ranked by the mean of ``--metric``, highest first,
  lowest first for loss, ppl, aer, wall_s and peak_mem_mb.
- p vs baseline: sacreBLEU's paired bootstrap test on the saved hypotheses of the metric's split
  (``test/bleu`` → ``hyp/test.txt``). Runs of a variant and of the baseline are paired by seed (the
  seeds both have); the paired seeds' hypotheses, and references, are concatenated in seed order into
  one corpus and tested once. Compared runs must have identical references (the same test set).
- Baseline: ``--baseline LABEL`` (the label or its values alone, e.g. ``additive, alibi``), else the
  variant of the first completed run found (job ``0`` of a multirun, unless it failed).
"""

from __future__ import annotations

import argparse
import csv
import difflib
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from attnlab.runs import Run, as_text, available_keys, default_by, load_runs
from attnlab.stats import (
    Summary,
    corpus_scorer,
    lower_is_better,
    paired_bootstrap,
    rank,
    split_of,
    summarise,
)

PROG = "attnlab-compare"
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
ALPHA = 0.05
NONE = "—"


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

    def summary_lines(self) -> list[str]:
        """What was compared, grouped how, against which baseline, and how p was computed."""
        done = sum(r.completed for r in self.runs)
        direction = "lower" if lower_is_better(self.metric) else "higher"
        variants = f"{len(self.variants)} variant{'' if len(self.variants) == 1 else 's'}"
        lines = [
            f"{len(self.runs)} runs ({done} completed, {len(self.runs) - done} failed) in {variants}, "
            f"grouped by {', '.join(self.by) or 'nothing'}"
            + (" (the overrides that differ between runs; choose with --by)" if self.by_default else ""),
            f"metric: {self.metric} ({direction} is better); mean ± 95 % CI over seeds "
            "(Student t, n - 1 degrees of freedom; n/a with one seed)",
        ]
        if self.baseline is not None:
            lines.append(f"baseline: {self.baseline} ({self.baseline_reason})")
        lines.append(self.significance)
        return lines

    def table(self) -> tuple[list[str], list[list[str]]]:
        """(header, rows) of the main table, as plain text."""
        arrow = "↓" if lower_is_better(self.metric) else "↑"
        header = ["rank", "variant", "n", f"{self.metric} {arrow}", *self.columns, "p vs baseline"]
        rows = []
        for v in self.variants:
            if v.n == 0:
                rows.append(["—", v.label, "0", "no completed run", *[NONE] * len(self.columns), NONE])
                continue
            cells = [cell(v.stats[m], v.n) for m in [self.metric, *self.columns]]
            rows.append([str(v.rank) if v.rank else NONE, v.label, str(v.n), *cells, p_cell(v)])
        return header, rows

    def notes(self) -> list[str]:
        """Why variants have no p-value (other than the baseline)."""
        return [f"{v.label}: {v.note}" for v in self.variants if v.note and v.note != "baseline"]

    def failed_table(self) -> tuple[list[str], list[list[str]]]:
        header = ["run", "variant", "seed", "error", "overrides"]
        rows = [
            [
                r.name,
                self.label_of(r),
                NONE if r.seed is None else str(r.seed),
                r.error or "",
                " ".join(r.overrides),
            ]
            for r in self.failed
        ]
        return header, rows

    def to_markdown(self, expected: Expected | None = None) -> str:
        """The report as markdown: summary lines, the table, the paper table, the failed runs."""
        parts = [f"# {PROG}: {self.metric}", "", *[f"- {line}" for line in self.summary_lines()], ""]
        parts.append(markdown_table(*self.table()))
        parts += [f"\n- p n/a for {note}" for note in self.notes()]
        if expected is not None:
            title, header, rows = paper_table(self, expected)
            parts += ["", f"## paper vs ours: {title}", "", markdown_table(header, rows)]
        if self.failed:
            parts += ["", f"## failed runs ({len(self.failed)}, excluded from the statistics)", ""]
            parts.append(markdown_table(*self.failed_table()))
        return "\n".join(parts) + "\n"

    def write_csv(self, path: Path) -> Path:
        """``compare.csv``: one row per variant with mean, ci95, std and n of every metric and p."""
        metrics = [self.metric, *self.columns]
        header = ["rank", "variant", *self.by, "n"]
        header += [f"{m} {s}" for m in metrics for s in ("mean", "ci95", "std", "n")]
        header += ["p_value", "paired_seeds", "note"]
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for v in self.variants:
                row = [v.rank or "", v.label, *[v.values[k] for k in self.by], v.n]
                for m in metrics:
                    s = v.stats[m]
                    row += [_num(s.mean), _num(s.ci), _num(s.std), s.n]
                row += [_num(v.p_value), " ".join(str(s) for s in v.p_seeds), v.note]
                writer.writerow(row)
        return path

    def write_runs_csv(self, path: Path) -> Path:
        """``runs.csv``: one row per run (completed and failed) with every metric it has."""
        metrics = sorted({m for r in self.runs for m in r.metrics})
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                ["run", "path", "status", "variant", "seed", *self.by, *metrics, "error", "overrides"]
            )
            for r in self.runs:
                writer.writerow(
                    [r.name, str(r.path), r.status, self.label_of(r), "" if r.seed is None else r.seed]
                    + [as_text(r.value(k)) for k in self.by]
                    + [_num(r.metric(m)) for m in metrics]
                    + [r.error or "", " ".join(r.overrides)]
                )
        return path


def _num(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def fmt(value: float | None, like: float | None = None) -> str:
    """A number for a table: thousands separated above 1000, 2 decimals above 1, else 3."""
    if value is None:
        return NONE
    scale = abs(like if like is not None else value)
    if scale >= 1000:
        return f"{value:,.0f}"
    return f"{value:.2f}" if scale >= 1 else f"{value:.3f}"


def cell(s: Summary, n_runs: int) -> str:
    """``32.00 ± 4.97``; ``± n/a`` with one value; ``(n=2)`` when some runs lack the metric."""
    if s.mean is None:
        return NONE
    text = f"{fmt(s.mean)} ± {fmt(s.ci, like=s.mean) if s.ci is not None else 'n/a'}"
    return text + (f" (n={s.n})" if s.n != n_runs else "")


def p_cell(v: Variant) -> str:
    if v.note == "baseline":
        return "baseline"
    if v.p_value is None:
        return "n/a"
    return f"{v.p_value:.3f}" + (" *" if v.p_value < ALPHA else "")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    numeric = [
        i for i, h in enumerate(header) if h not in ("variant", "run", "error", "overrides", "setting")
    ]
    rule = ["---:" if i in numeric else "---" for i in range(len(header))]
    return "\n".join([line(header), "|" + "|".join(rule) + "|", *[line(r) for r in rows]])


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
        significance = _significance(variants, base, metric, bootstrap)
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


def _significance(variants: list[Variant], base: Variant, metric: str, bootstrap: int) -> str:
    """Sets ``p_value``, ``p_seeds`` and ``note`` of every variant; returns how p was computed."""
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


# paper numbers ------------------------------------------------------------------------------------------


@dataclass
class Expected:
    """``expected.yaml``: the paper's numbers and which variant of ours each matches."""

    path: Path
    paper: str
    rows: list[dict]


def load_expected(path: str | Path) -> Expected:
    """Reads and checks ``expected.yaml`` (keys: ``paper``, ``rows``: setting, metric, value, source, ours).

    Raises:
        ValueError: if the file is missing, not YAML, or a row lacks ``setting`` or ``value``.
    """
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--expected {path}: no such file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path}: expected a mapping with 'paper' and a list 'rows'")
    for i, row in enumerate(data["rows"]):
        if not isinstance(row, dict) or "setting" not in row or "value" not in row:
            raise ValueError(
                f"{path}: rows[{i}] needs 'setting' and 'value' (and 'metric', 'source', 'ours')"
            )
        if row.get("ours") is not None and not isinstance(row["ours"], dict):
            raise ValueError(
                f"{path}: rows[{i}].ours must be a mapping of keys to values, e.g. {{posenc: alibi}}"
            )
    return Expected(path, str(data.get("paper") or path.parent.name), data["rows"])


def find_expected(runs: list[Run]) -> Path | None:
    """``experiments/NAME/expected.yaml`` when every run has ``choices.experiment = NAME``.

    Looked up relative to the current directory, then to the repository root.
    """
    import attnlab

    names = {r.choices.get("experiment") for r in runs if r.choices}
    if len(names) != 1 or None in names:
        return None
    (name,) = names
    for root in (Path.cwd(), Path(attnlab.__file__).resolve().parents[2]):
        path = root / "experiments" / name / "expected.yaml"
        if path.is_file():
            return path
    return None


# our metric beside a paper's, unless a row names one (``ours_metric``): perplexity is ours on validation
PAPER_METRICS = {"ppl": "val/ppl"}


def paper_table(comparison: Comparison, expected: Expected) -> tuple[str, list[str], list[list[str]]]:
    """(title, header, rows): each paper row beside our matching variants (``—`` where none matches).

    A row's ``ours`` is a mapping of keys to values that the matching variants' runs share (``{}`` = every
    variant, e.g. an experiment with one variant; absent or null = no counterpart); ``ours_metric`` is the
    metric of ours shown beside the paper's (default: ``val/ppl`` for a paper's ``ppl``, else the compared
    metric).
    """
    header = ["setting", "paper", "source", "ours", "our metric", "ours (mean ± 95% CI)"]
    rows = []
    for row in expected.rows:
        paper = f"{row.get('metric', '')} {row['value']}".strip()
        ours = row.get("ours")
        metric = str(row.get("ours_metric") or PAPER_METRICS.get(row.get("metric")) or comparison.metric)
        matches = [
            v
            for v in comparison.variants
            if ours is not None and all(v.value(str(k)) == as_text(want) for k, want in ours.items())
        ]
        for v in matches or [None]:
            ours_cell = NONE
            if v is not None and v.n:
                summary = v.stats.get(metric) or summarise([r.metric(metric) for r in v.completed])
                ours_cell = cell(summary, v.n)
            rows.append(
                [
                    str(row["setting"]),
                    paper,
                    str(row.get("source", "")),
                    v.label if v else NONE,
                    metric if v else NONE,
                    ours_cell,
                ]
            )
    return expected.paper, header, rows


# provenance and experiment READMEs ---------------------------------------------------------------------

README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def provenance_line(runs: list[Run]) -> str:
    """Where the numbers come from: dates, commits, machines and devices of the runs (from ``env``)."""
    envs = [r.env for r in runs if r.env]
    if not envs:
        return f"{len(runs)} runs; they record no provenance (results.json without `env`)."

    def distinct(key: str) -> str:
        return ", ".join(sorted({str(e.get(key)) for e in envs}))

    days = sorted({str(e.get("finished", ""))[:10] for e in envs if e.get("finished")})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else "unknown dates"
    commits = sorted({(str(e.get("commit") or "unknown")[:10], bool(e.get("dirty"))) for e in envs})
    commit = ", ".join(f"`{c}`" + (" (with uncommitted changes)" if dirty else "") for c, dirty in commits)
    return (
        f"{len(runs)} runs made {when} at commit {commit} on {distinct('platform')}, "
        f"{distinct('cpus')} CPU cores, device {distinct('device')}, torch {distinct('torch')}, "
        f"Lightning {distinct('lightning')}."
    )


def update_readme(path: Path, markdown: str, runs: list[Run], command: str) -> Path:
    """Replaces the block between ``<!-- results:start -->`` and ``<!-- results:end -->`` of ``path``.

    Raises:
        ValueError: if the file lacks the two markers.
    """
    text = path.read_text() if path.is_file() else ""
    if README_START not in text or README_END not in text.split(README_START, 1)[1]:
        raise ValueError(
            f"--readme {path}: needs the lines {README_START} and {README_END} around the results"
        )
    head, rest = text.split(README_START, 1)
    tail = rest.split(README_END, 1)[1]
    # the report's headings, two levels down under the README's "## Results"
    body = (
        markdown.lstrip("\n")
        .replace("# attnlab-compare", "### attnlab-compare", 1)
        .replace("\n## ", "\n#### ")
    )
    block = f"{README_START}\n{provenance_line(runs)}\n\n```\n{command}\n```\n\n{body.rstrip()}\n{README_END}"
    path.write_text(head + block + tail)
    return path


# command line -------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Compare attnlab-train runs: mean ± 95%% CI over seeds per variant, paired bootstrap "
        "significance against a baseline, plots and a self-contained HTML report.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="run dirs, multirun roots or folders above them")
    p.add_argument(
        "--by",
        nargs="*",
        metavar="KEY",
        help="keys that define a variant (default: the override keys that differ between runs, except seed)",
    )
    p.add_argument(
        "--metric", default="test/bleu", help="primary metric, ranked and tested (default: test/bleu)"
    )
    p.add_argument("--baseline", metavar="LABEL", help="variant to test against (default: the first run's)")
    p.add_argument("--columns", nargs="+", metavar="M", help="further metrics in the table")
    p.add_argument(
        "--out", type=Path, help="output folder (default: PATH/compare for one PATH, else ./compare)"
    )
    p.add_argument("--html", type=Path, metavar="FILE", help="HTML report (default: OUT/report.html)")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the markdown report here")
    p.add_argument(
        "--expected", type=Path, metavar="FILE", help="paper numbers (expected.yaml) to show beside ours"
    )
    p.add_argument(
        "--readme",
        type=Path,
        metavar="FILE",
        help="write the tables, with the runs' dates, commit and machine, between the "
        "<!-- results:start --> and <!-- results:end --> lines of FILE (an experiment's README.md)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="bootstrap resamples of the significance test (default 1000; 0 skips it)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    """Runs the comparison and writes every output; raises ``ValueError`` for bad input."""
    args = parser().parse_args(argv)
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap {args.bootstrap}: must be 0 (skip the test) or a number of resamples")
    runs = load_runs(args.paths)
    expected_path = args.expected or find_expected(runs)
    expected = load_expected(expected_path) if expected_path else None
    comparison = compare(runs, args.by, args.metric, args.baseline, args.columns, args.bootstrap)
    if args.out is not None:
        out = args.out
    elif len(args.paths) == 1:
        root = Path(args.paths[0])
        out = (root if root.is_dir() else root.parent) / "compare"
    else:
        out = Path("compare")
    from attnlab.compare_plots import draw_plots  # matplotlib: only once the input is known to be good
    from attnlab.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    markdown = comparison.to_markdown(expected)
    plots = draw_plots(comparison, out / "plots")
    (out / "compare.md").write_text(markdown)
    written = [out / "compare.md", comparison.write_csv(out / "compare.csv")]
    written.append(comparison.write_runs_csv(out / "runs.csv"))
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown)
        written.append(args.markdown)
    command = shlex.join([PROG, *(argv if argv is not None else sys.argv[1:])])
    if args.readme is not None:
        written.append(update_readme(args.readme, markdown, runs, command))
    written.append(write_report(args.html or out / "report.html", comparison, plots, expected, command))
    print(markdown, end="")  # last, so that `| head` cannot stop the files being written
    if expected is not None:
        print(f"\npaper numbers: {expected.path}")
    print(f"\nwrote {', '.join(str(p) for p in written)} and {len(plots)} plots in {out / 'plots'}")


def cli() -> None:
    """Console entry point ``attnlab-compare``: bad input is one line on stderr and exit 2."""
    try:
        main()
    except BrokenPipeError:  # output piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (ValueError, OSError) as err:
        if os.environ.get("ATTNLAB_TRACEBACK") == "1":
            raise
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    cli()
