"""The comparison as text: markdown (what ``attnlab-compare`` prints), CSV files, and the results block
of an experiment's README with the runs' provenance.

Numbers: thousands separated from 1000, 2 decimals from 1, else 3; a mean with its CI as
``32.00 ± 4.97``, ``± n/a`` with one seed; ``—`` where there is nothing.
"""

from __future__ import annotations

import csv
from pathlib import Path

from attnlab.compare.comparison import Comparison, Variant
from attnlab.compare.paper import Expected, paper_rows
from attnlab.compare.runs import Run, as_text
from attnlab.compare.significance import ALPHA
from attnlab.compare.stats import Summary, lower_is_better

PROG = "attnlab-compare"
NONE = "—"


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


def summary_lines(comparison: Comparison) -> list[str]:
    """What was compared, grouped how, against which baseline, and how p was computed."""
    done = sum(r.completed for r in comparison.runs)
    direction = "lower" if lower_is_better(comparison.metric) else "higher"
    variants = f"{len(comparison.variants)} variant{'' if len(comparison.variants) == 1 else 's'}"
    runs = len(comparison.runs)
    lines = [
        f"{runs} runs ({done} completed, {runs - done} failed) in {variants}, "
        f"grouped by {', '.join(comparison.by) or 'nothing'}"
        + (" (the overrides that differ between runs; choose with --by)" if comparison.by_default else ""),
        f"metric: {comparison.metric} ({direction} is better); mean ± 95 % CI over seeds "
        "(Student t, n - 1 degrees of freedom; n/a with one seed)",
    ]
    if comparison.baseline is not None:
        lines.append(f"baseline: {comparison.baseline} ({comparison.baseline_reason})")
    lines.append(comparison.significance)
    return lines


def main_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the main table, as plain text."""
    arrow = "↓" if lower_is_better(comparison.metric) else "↑"
    header = ["rank", "variant", "n", f"{comparison.metric} {arrow}", *comparison.columns, "p vs baseline"]
    rows = []
    for v in comparison.variants:
        if v.n == 0:
            rows.append(["—", v.label, "0", "no completed run", *[NONE] * len(comparison.columns), NONE])
            continue
        cells = [cell(v.stats[m], v.n) for m in [comparison.metric, *comparison.columns]]
        rows.append([str(v.rank) if v.rank else NONE, v.label, str(v.n), *cells, p_cell(v)])
    return header, rows


def failed_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    header = ["run", "variant", "seed", "error", "overrides"]
    rows = [
        [
            r.name,
            comparison.label_of(r),
            NONE if r.seed is None else str(r.seed),
            r.error or "",
            " ".join(r.overrides),
        ]
        for r in comparison.failed
    ]
    return header, rows


def to_markdown(comparison: Comparison, expected: Expected | None = None) -> str:
    """The report as markdown: summary lines, the table, the paper table, the failed runs."""
    parts = [f"# {PROG}: {comparison.metric}", "", *[f"- {line}" for line in summary_lines(comparison)], ""]
    parts.append(markdown_table(*main_table(comparison)))
    parts += [f"\n- p n/a for {note}" for note in comparison.notes()]
    if expected is not None:
        title, header, rows = paper_table(comparison, expected)
        parts += ["", f"## paper vs ours: {title}", "", markdown_table(header, rows)]
    if comparison.failed:
        parts += ["", f"## failed runs ({len(comparison.failed)}, excluded from the statistics)", ""]
        parts.append(markdown_table(*failed_table(comparison)))
    return "\n".join(parts) + "\n"


def write_csv(comparison: Comparison, path: Path) -> Path:
    """``compare.csv``: one row per variant with mean, ci95, std and n of every metric and p."""
    metrics = [comparison.metric, *comparison.columns]
    header = ["rank", "variant", *comparison.by, "n"]
    header += [f"{m} {s}" for m in metrics for s in ("mean", "ci95", "std", "n")]
    header += ["p_value", "paired_seeds", "note"]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for v in comparison.variants:
            row = [v.rank or "", v.label, *[v.values[k] for k in comparison.by], v.n]
            for m in metrics:
                s = v.stats[m]
                row += [_num(s.mean), _num(s.ci), _num(s.std), s.n]
            row += [_num(v.p_value), " ".join(str(s) for s in v.p_seeds), v.note]
            writer.writerow(row)
    return path


def write_runs_csv(comparison: Comparison, path: Path) -> Path:
    """``runs.csv``: one row per run (completed and failed) with every metric it has."""
    metrics = sorted({m for r in comparison.runs for m in r.metrics})
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["run", "path", "status", "variant", "seed", *comparison.by, *metrics, "error", "overrides"]
        )
        for r in comparison.runs:
            writer.writerow(
                [r.name, str(r.path), r.status, comparison.label_of(r), "" if r.seed is None else r.seed]
                + [as_text(r.value(k)) for k in comparison.by]
                + [_num(r.metric(m)) for m in metrics]
                + [r.error or "", " ".join(r.overrides)]
            )
    return path


def paper_table(comparison: Comparison, expected: Expected) -> tuple[str, list[str], list[list[str]]]:
    """(title, header, rows): each paper row beside our matching variants (``—`` where none matches)."""
    header = ["setting", "paper", "source", "ours", "our metric", "ours (mean ± 95% CI)"]
    rows = []
    for found in paper_rows(comparison, expected):
        row, v = found.row, found.variant
        rows.append(
            [
                str(row["setting"]),
                f"{row.get('metric', '')} {row['value']}".strip(),
                str(row.get("source", "")),
                v.label if v else NONE,
                found.metric if v else NONE,
                cell(found.ours, v.n) if found.ours is not None else NONE,
            ]
        )
    return expected.paper, header, rows


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
