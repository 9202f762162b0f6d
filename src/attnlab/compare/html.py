"""The HTML report of ``attnlab-compare``: one self-contained file that opens from disk, no server.

Every image (plots and attention maps) is embedded as a ``data:image/png;base64`` URI and the style
is inline, so the file can be mailed or attached to a pull request as it is; there is no script and
no external link. All text from run dirs (labels, errors, overrides) is HTML-escaped.

Attention maps: one row per map name (``cross_L0_probe0`` …), one column per variant, each drawn at
test by the variant's completed run with the lowest seed that has maps.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import TYPE_CHECKING

from attnlab.compare.paper import Expected
from attnlab.compare.runs import Run
from attnlab.compare.text import PROG, failed_table, main_table, paper_table, summary_lines
from attnlab.rundir import natural_key

if TYPE_CHECKING:
    from attnlab.compare.comparison import Comparison, Variant

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; vertical-align: top; }
th { background: #f4f4f4; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.best td { background: #eef7ee; }
code { background: #f4f4f4; padding: 1px 4px; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
.maps { overflow-x: auto; } .maps img { width: 340px; }
.sig { color: #06623b; font-weight: 600; } .muted { color: #777; }
"""

TEXT_COLUMNS = (
    "variant",
    "run",
    "error",
    "overrides",
    "setting",
    "source",
    "ours",
    "path",
    "status",
    "paper",
)


def data_uri(path: Path) -> str:
    """``data:image/png;base64,…`` of a PNG file."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def img(path: Path, alt: str) -> str:
    return f'<img src="{data_uri(path)}" alt="{html.escape(alt)}">'


def table(header: list[str], rows: list[list[str]], best: set[int] | None = None) -> str:
    """An HTML table of plain-text cells (escaped here); rows in ``best`` are highlighted."""
    numeric = [h not in TEXT_COLUMNS for h in header]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for text, num in zip(row, numeric):
            classes = ("num " if num else "") + ("sig" if text.endswith(" *") else "")
            attr = f' class="{classes.strip()}"' if classes.strip() else ""
            cells.append(f"<td{attr}>{html.escape(text)}</td>")
        body.append(f"<tr{' class=best' if best and i in best else ''}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def map_run(variant: Variant) -> Run | None:
    """The completed run with the lowest seed that has attention maps at test."""
    runs = sorted(variant.completed, key=lambda r: (r.seed is None, r.seed if r.seed is not None else 0))
    return next((r for r in runs if r.attention_maps()), None)


def attention_section(comparison: Comparison) -> str:
    columns = [(v, map_run(v)) for v in comparison.variants if v.n]
    columns = [(v, r) for v, r in columns if r is not None]
    if not columns:
        return '<p class="muted">No run has attention maps at test (attention/test/*.png).</p>'
    maps = {v.label: r.attention_maps() for v, r in columns}
    names: list[str] = []
    for found in maps.values():
        names += [n for n in found if n not in names]
    names.sort(key=natural_key)
    head = "<th>map</th>" + "".join(
        f"<th>{html.escape(v.label)}<br><span class=muted>{html.escape(r.name)}, seed {r.seed}</span></th>"
        for v, r in columns
    )
    rows = []
    for name in names:
        cells = []
        for v, _ in columns:
            path = maps[v.label].get(name)
            cells.append(f"<td>{img(path, f'{name}: {v.label}')}</td>" if path else "<td>—</td>")
        rows.append(f"<tr><th>{html.escape(name)}</th>{''.join(cells)}</tr>")
    return (
        f'<div class="maps"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


CAPTIONS = {
    "metric": "Primary metric per variant: mean with 95 % CI (Student t) over seeds; grey: single seeds.",
    "val_curves": "Validation curve, mean over seeds per variant; the band spans the lowest to highest seed.",
    "length_buckets": "Corpus BLEU by source length (about five equal-size buckets of source words), "
    "the hypotheses of all completed seeds of a variant pooled.",
    "cost": "Quality against cost: the primary metric against training throughput and peak memory.",
}


def write_report(
    path: Path,
    comparison: Comparison,
    plots: dict[str, Path],
    expected: Expected | None = None,
    command: str = "",
) -> Path:
    """Writes the report to ``path`` (creating folders) and returns ``path``.

    Args:
        path: the HTML file.
        comparison: what ``attnlab.compare.comparison.compare`` returned.
        plots: ``{name: png}`` from ``attnlab.compare.plots.draw_plots``; each is embedded.
        expected: paper numbers for the "paper vs ours" table.
        command: the command line, shown at the top.
    """
    esc = html.escape
    header, rows = main_table(comparison)
    best = {i for i, v in enumerate(comparison.variants) if v.rank == 1}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(PROG)}: {esc(comparison.metric)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(PROG)}: {esc(comparison.metric)}</h1>",
    ]
    if command:
        parts.append(f"<p><code>{esc(command)}</code></p>")
    parts.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in summary_lines(comparison)) + "</ul>")
    parts += ["<h2>Variants</h2>", table(header, rows, best)]
    notes = comparison.notes()
    if notes:
        parts.append("<ul>" + "".join(f"<li>p n/a for {esc(n)}</li>" for n in notes) + "</ul>")
    if expected is not None:
        title, p_header, p_rows = paper_table(comparison, expected)
        parts += [
            f"<h2>Paper vs ours</h2><p>{esc(title)} <span class=muted>({esc(str(expected.path))})</span></p>"
        ]
        parts.append(table(p_header, p_rows))
    parts.append("<h2>Plots</h2>")
    if not plots:
        parts.append('<p class="muted">No plots: no completed run has the data they need.</p>')
    for name, png in plots.items():
        caption = CAPTIONS.get(name, name)
        parts.append(f"<figure>{img(png, name)}<figcaption>{esc(caption)}</figcaption></figure>")
    parts += ["<h2>Attention maps at test</h2>", attention_section(comparison)]
    parts.append(f"<h2>Failed runs ({len(comparison.failed)})</h2>")
    if comparison.failed:
        parts.append("<p>Excluded from every statistic.</p>")
        parts.append(table(*failed_table(comparison)))
    else:
        parts.append('<p class="muted">None.</p>')
    parts.append("<h2>Runs</h2>")
    run_rows = [
        [
            r.name,
            comparison.label_of(r),
            "" if r.seed is None else str(r.seed),
            r.status,
            "" if r.metric(comparison.metric) is None else f"{r.metric(comparison.metric):.4g}",
        ]
        for r in comparison.runs
    ]
    parts.append(table(["run", "variant", "seed", "status", comparison.metric], run_rows))
    parts.append("</body></html>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
