"""Paper numbers beside ours: ``experiments/<name>/expected.yaml``.

    paper: Vaswani et al. 2017, Table 3
    rows:
      - {setting: "1 head", metric: bleu, value: 24.9, source: "Table 3 (A)",
         ours: {variant/vaswani_heads: h1}}

A row's ``ours`` maps keys to the values our matching variants share (``{}`` = every variant, absent or
null = no counterpart); ``ours_metric`` names our metric shown beside the paper's (default: ``val/ppl``
beside a paper's ``ppl``, else the compared metric).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnlab.compare.comparison import Comparison, Variant
from attnlab.compare.runs import Run, as_text
from attnlab.compare.stats import Summary, summarise
from attnlab.config import CONF_DIR


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

    Looked up relative to the current directory, then to the repository root (beside ``conf/``).
    """
    names = {r.choices.get("experiment") for r in runs if r.choices}
    if len(names) != 1 or None in names:
        return None
    (name,) = names
    for root in (Path.cwd(), Path(CONF_DIR).parent):
        path = root / "experiments" / name / "expected.yaml"
        if path.is_file():
            return path
    return None


# our metric beside a paper's, unless a row names one (``ours_metric``): perplexity is ours on validation
PAPER_METRICS = {"ppl": "val/ppl"}


@dataclass(frozen=True)
class PaperRow:
    """One paper row beside one matching variant of ours (``variant`` None: no counterpart).

    Attributes:
        row: the row of ``expected.yaml`` (setting, metric, value, source, ours, ours_metric).
        variant: our matching variant, or None.
        metric: our metric shown beside the paper's.
        ours: that metric over the variant's completed runs (None without a variant or a completed run).
    """

    row: dict
    variant: Variant | None
    metric: str
    ours: Summary | None


def paper_rows(comparison: Comparison, expected: Expected) -> list[PaperRow]:
    """Each paper row beside each of our variants that match it (once, unmatched, when none does)."""
    out = []
    for row in expected.rows:
        ours = row.get("ours")
        metric = str(row.get("ours_metric") or PAPER_METRICS.get(row.get("metric")) or comparison.metric)
        matches = [
            v
            for v in comparison.variants
            if ours is not None and all(v.value(str(k)) == as_text(want) for k, want in ours.items())
        ]
        for v in matches or [None]:
            summary = None
            if v is not None and v.n:
                summary = v.stats.get(metric) or summarise([r.metric(metric) for r in v.completed])
            out.append(PaperRow(row, v, metric, summary))
    return out
