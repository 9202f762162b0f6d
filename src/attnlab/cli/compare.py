"""``attnlab-compare``: many run dirs → one table of variants (mean ± 95 % CI over seeds), significance
against a baseline, plots and a self-contained HTML report.

    attnlab-compare outputs/multirun/2026-11-21/10-00-00
    attnlab-compare RUNS... --by attention/score posenc --metric test_long/bleu --baseline posenc=alibi
    attnlab-compare outputs/multirun/... --expected experiments/vaswani_heads/expected.yaml --html heads.html

What is compared and how: ``attnlab.compare.comparison``; outputs: ``attnlab.compare.text``,
``attnlab.compare.plots``, ``attnlab.compare.html``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from attnlab.compare.comparison import compare
from attnlab.compare.paper import find_expected, load_expected
from attnlab.compare.runs import load_runs
from attnlab.compare.text import PROG, to_markdown, update_readme, write_csv, write_runs_csv


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
    from attnlab.compare.html import write_report
    from attnlab.compare.plots import draw_plots  # matplotlib: only once the input is known to be good

    out.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(comparison, expected)
    plots = draw_plots(comparison, out / "plots")
    (out / "compare.md").write_text(markdown)
    written = [out / "compare.md", write_csv(comparison, out / "compare.csv")]
    written.append(write_runs_csv(comparison, out / "runs.csv"))
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
