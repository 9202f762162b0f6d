"""attnlab-compare: seeds aggregated by hand-checkable numbers, significance, outputs, one-line errors."""

from __future__ import annotations

import base64
import csv
import math
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from attnlab.cli.compare import cli, main
from attnlab.compare import compare, load_runs, to_markdown
from attnlab.compare.paper import load_expected
from attnlab.compare.stats import length_buckets, paired_bootstrap, summarise
from attnlab.compare.text import paper_table
from attnlab.rundir import RunDir

from conftest import run_module

SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
WORDS = "the cat saw a dog near old red house with two small birds and one green tree".split()
# 40 sentences of 3 to 12 words, all different
SOURCES = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(3 + i % 10)) + f" n{i}" for i in range(40)]
REFS = [f"ref {i} " + " ".join(reversed(s.split())) for i, s in enumerate(SOURCES)]
GARBAGE = [f"zz{i} qq" for i in range(len(REFS))]
# test/bleu per (score, seed); hypotheses: dot and scaled_dot copy the references, additive is garbage
BLEU = {"dot": (30.0, 32.0, 34.0), "scaled_dot": (36.0, 38.0, 40.0), "additive": (20.0, 24.0, 28.0)}
HYPS = {"dot": REFS, "scaled_dot": REFS, "additive": GARBAGE}


def tiny_png(path: Path) -> None:
    import matplotlib.image

    path.parent.mkdir(parents=True, exist_ok=True)
    matplotlib.image.imsave(path, [[0.0, 1.0], [1.0, 0.0]])


def make_run(
    run_dir: Path,
    score: str,
    seed: int,
    bleu: float | None = None,
    hyps: list[str] | None = None,
    refs: list[str] = REFS,
    error: str | None = None,
    heads: int = 2,
    experiment: str | None = None,
) -> Path:
    """One run dir as attnlab-train leaves it (results, Hydra config, history, hypotheses, maps)."""
    overrides = [f"attention/score={score}", f"seed={seed}"]
    choices = {"attention/score": score, "posenc": "sinusoidal", "model": "tiny", "data": "synthetic"}
    if experiment is not None:
        choices["experiment"] = experiment
    metrics = {}
    if error is None:
        metrics = {
            "test/bleu": bleu,
            "test/chrf": bleu + 10,
            "val/bleu": bleu - 1,
            "val/loss": 1.0,
            "train/tokens_per_s": 1000.0 + 100 * seed,
            "peak_mem_mb": 500.0,
            "params": 12345.0,
            "wall_s": 10.0,
        }
    run = RunDir(run_dir)
    run.write_results(
        status="failed" if error else "completed",
        error=error,
        choices=choices,
        overrides=overrides,
        seed=seed,
        metrics=metrics,
        sacrebleu=None if error else SIGNATURE,
    )
    run.hydra_config.parent.mkdir(parents=True, exist_ok=True)
    config = {"seed": seed, "model": {"num_heads": heads, "d_model": 32}, "posenc": {"max_distance": 16}}
    run.hydra_config.write_text(yaml.safe_dump(config))
    run.hydra_overrides.write_text(yaml.safe_dump(overrides))
    if error is not None:
        return run_dir
    run.start_history()
    for step in (10, 20, 30):
        run.append_history(
            {"step": step, "epoch": step // 10, "val/bleu": bleu * step / 30, "val/loss": 3 - step / 30}
        )
    for split in ("test", "test_long"):
        run.write_hypotheses(split, list(hyps or HYPS[score]), SOURCES, list(refs))
    for name in ("encoder_L0_probe0", "cross_L0_probe0"):
        tiny_png(run.attention("test") / f"{name}.png")
    return run_dir


def make_sweep(root: Path) -> Path:
    """A multirun root: jobs 0–8 are 3 scores × 3 seeds, job 9 a failed run of a fourth score."""
    job = 0
    for score, values in BLEU.items():
        for seed, bleu in enumerate(values):
            make_run(root / str(job), score, seed, bleu)
            job += 1
    make_run(
        root / str(job), "gaussian", 0, error="NonFiniteLossError: the training loss became nan at step 12"
    )
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return make_sweep(tmp_path_factory.mktemp("compare") / "sweep")


@pytest.fixture(scope="module")
def comparison(sweep):
    return compare(load_runs([sweep]), bootstrap=200)


@pytest.fixture(scope="module")
def cli_run(sweep, tmp_path_factory):
    expected = tmp_path_factory.mktemp("paper") / "expected.yaml"
    expected.write_text(
        yaml.safe_dump(
            {
                "paper": "Luong et al. 2015, Table 4",
                "rows": [
                    {
                        "setting": "dot score",
                        "metric": "bleu",
                        "value": 20.5,
                        "source": "Table 4 row 2",
                        "ours": {"attention/score": "dot"},
                    },
                    {
                        "setting": "location",
                        "metric": "bleu",
                        "value": 19.0,
                        "source": "Table 4 row 1",
                        "ours": None,
                    },
                ],
            }
        )
    )
    proc = run_module(
        "attnlab.cli.compare", sweep, str(sweep), "--expected", str(expected), "--bootstrap", "200"
    )
    return proc, sweep / "compare"


def test_seeds_aggregate_to_the_hand_computed_mean_ci_and_std(comparison):
    by_label = {v.label: v for v in comparison.variants}
    dot = by_label["attention/score=dot"]
    # 30, 32, 34: mean 32, s = 2, CI = t(0.975, 2) * 2 / sqrt(3) = 4.302653 * 1.154701 = 4.968275
    assert (dot.n, dot.mean, dot.std) == (3, 32.0, 2.0)
    assert dot.ci == pytest.approx(4.968275, abs=1e-5)
    additive = by_label["attention/score=additive"]
    # 20, 24, 28: s = 4, CI = 4.302653 * 4 / sqrt(3) = 9.936550
    assert (additive.mean, additive.std) == (24.0, 4.0)
    assert additive.ci == pytest.approx(9.936550, abs=1e-5)
    assert dot.stats["test/chrf"].mean == 42.0 and dot.stats["train/tokens_per_s"].mean == 1100.0
    # two seeds: t(0.975, 1) = 12.706205; 1 and 3: s = sqrt(2), CI = 12.706205 * sqrt(2) / sqrt(2)
    assert summarise([1.0, 3.0]).ci == pytest.approx(12.706205, abs=1e-5)


def test_variants_are_grouped_by_the_differing_override_and_ranked_best_first(comparison):
    assert comparison.by == ["attention/score"]
    assert [(v.rank, v.label) for v in comparison.variants] == [
        (1, "attention/score=scaled_dot"),
        (2, "attention/score=dot"),
        (3, "attention/score=additive"),
        (None, "attention/score=gaussian"),
    ]
    assert comparison.variants[-1].n == 0


def test_lower_is_better_metrics_rank_ascending(sweep):
    result = compare(load_runs([sweep]), metric="val/loss", bootstrap=0)
    assert all(v.rank == 1 for v in result.variants if v.n)  # all 1.0: a three-way tie
    result = compare(load_runs([sweep]), metric="wall_s", columns=["test/bleu"], bootstrap=0)
    assert result.columns == ["test/bleu"]


def test_one_seed_gives_no_confidence_interval_rather_than_zero(tmp_path):
    assert summarise([30.0]) == summarise([30.0, None])
    one = summarise([30.0])
    assert (one.n, one.mean, one.std, one.ci) == (1, 30.0, None, None)
    make_run(tmp_path / "a", "dot", 0, 30.0)
    make_run(tmp_path / "b", "additive", 0, 20.0)
    table = to_markdown(compare(load_runs([tmp_path]), bootstrap=0))
    assert "30.00 ± n/a" in table and "20.00 ± n/a" in table


def test_the_first_run_found_is_the_baseline_and_the_output_says_so(comparison):
    assert comparison.baseline == "attention/score=dot"
    assert "first completed run found, sweep/0" in comparison.baseline_reason
    assert "baseline: attention/score=dot" in to_markdown(comparison)


def test_bootstrap_p_is_small_against_garbage_and_one_for_identical_hypotheses(comparison):
    by_label = {v.label: v for v in comparison.variants}
    assert by_label["attention/score=additive"].p_value < 0.05
    assert by_label["attention/score=scaled_dot"].p_value > 0.05
    assert by_label["attention/score=additive"].p_seeds == [0, 1, 2]
    assert (
        by_label["attention/score=dot"].p_value is None and by_label["attention/score=dot"].note == "baseline"
    )


def test_paired_bootstrap_is_sacrebleus_test_on_the_pooled_corpus():
    from sacrebleu.metrics import BLEU

    half = [r if i % 2 else g for i, (r, g) in enumerate(zip(REFS, GARBAGE))]
    p_good, p_same = paired_bootstrap(REFS, [half, list(REFS)], REFS, BLEU(), n_samples=200)
    assert p_good < 0.05 and p_same == 1.0


def test_runs_with_different_references_are_refused_in_one_line(tmp_path, capsys, monkeypatch):
    make_run(tmp_path / "a", "dot", 0, 30.0)
    make_run(tmp_path / "b", "additive", 0, 20.0, refs=[r + " x" for r in REFS])
    with pytest.raises(ValueError, match="differs between"):
        compare(load_runs([tmp_path]))
    monkeypatch.setattr("sys.argv", ["attnlab-compare", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        cli()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert (
        err.startswith("attnlab-compare: error: hyp/test.ref.txt differs between") and "--bootstrap 0" in err
    )


def test_an_explicit_baseline_and_by_key_from_the_config_are_used(sweep):
    result = compare(
        load_runs([sweep]), by=["attention/score", "model.num_heads"], baseline="additive, 2", bootstrap=0
    )
    assert result.baseline == "attention/score=additive, model.num_heads=2"
    assert result.baseline_reason == "--baseline"


def test_the_paper_table_puts_each_paper_row_beside_the_matching_variant(comparison, tmp_path):
    path = tmp_path / "expected.yaml"
    path.write_text(
        "paper: P\nrows:\n"
        "  - {setting: A, metric: bleu, value: 24.9, source: T3, ours: {attention/score: dot}}\n"
        "  - {setting: B, metric: bleu, value: 25.8, source: T3,\n"
        "     ours: {model.num_heads: 2, attention/score: additive}}\n"
        "  - {setting: C, metric: ppl, value: 4.9, source: T3}\n"
        "  - {setting: D, metric: ppl, value: 5.0, source: T3, ours: {attention/score: dot},\n"
        "     ours_metric: val/loss}\n"
    )
    title, header, rows = paper_table(comparison, load_expected(path))
    assert title == "P" and header[0] == "setting"
    assert rows[:3] == [
        ["A", "bleu 24.9", "T3", "attention/score=dot", "test/bleu", "32.00 ± 4.97"],
        ["B", "bleu 25.8", "T3", "attention/score=additive", "test/bleu", "24.00 ± 9.94"],
        ["C", "ppl 4.9", "T3", "—", "—", "—"],
    ]
    assert rows[3] == ["D", "ppl 5.0", "T3", "attention/score=dot", "val/loss", "1.00 ± 0.00"]


def test_a_paper_perplexity_stands_beside_our_validation_perplexity_unless_the_row_says_otherwise(
    comparison, tmp_path
):
    path = tmp_path / "expected.yaml"
    path.write_text(
        "paper: P\nrows:\n  - {setting: E, metric: ppl, value: 5.1, ours: {attention/score: dot}}\n"
    )
    [row] = paper_table(comparison, load_expected(path))[2]
    assert row[3:5] == ["attention/score=dot", "val/ppl"]


def test_a_paper_row_with_empty_ours_stands_beside_every_variant(comparison, tmp_path):
    path = tmp_path / "expected.yaml"
    path.write_text("paper: P\nrows:\n  - {setting: all, metric: bleu, value: 36.0, ours: {}}\n")
    _, _, rows = paper_table(comparison, load_expected(path))
    assert sorted(row[3] for row in rows) == sorted(v.label for v in comparison.variants)


def test_length_buckets_cover_every_length_once():
    lengths = [3, 3, 4, 5, 6, 7, 8, 9, 10, 12]
    buckets = length_buckets(lengths, 5)
    assert buckets[0][0] == 3 and buckets[-1][1] == 12
    assert all(lo <= hi for lo, hi in buckets)
    assert all(a[1] + 1 == b[0] for a, b in zip(buckets, buckets[1:]))
    assert length_buckets([5] * 10) == [(5, 5)]


def test_the_cli_prints_the_table_and_writes_csv_markdown_plots_and_report(cli_run):
    proc, out = cli_run
    assert proc.returncode == 0, proc.stderr
    assert "| rank | variant | n | test/bleu ↑ |" in proc.stdout
    assert "| 1 | attention/score=scaled_dot | 3 | 38.00 ± 4.97 |" in proc.stdout
    assert "| — | attention/score=gaussian | 0 | no completed run |" in proc.stdout
    assert "paired by seed" in proc.stdout
    for name in ("compare.csv", "compare.md", "runs.csv", "report.html"):
        assert (out / name).is_file(), name
    assert {p.name for p in (out / "plots").iterdir()} == {
        "metric.png",
        "val_curves.png",
        "length_buckets.png",
        "cost.png",
    }
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert [r["variant"] for r in rows][0] == "attention/score=scaled_dot"
    dot = next(r for r in rows if r["variant"] == "attention/score=dot")
    assert float(dot["test/bleu mean"]) == 32.0 and math.isclose(
        float(dot["test/bleu ci95"]), 4.968275, abs_tol=1e-5
    )
    assert (dot["test/bleu std"], dot["test/bleu n"]) == ("2.0", "3")
    runs = list(csv.DictReader((out / "runs.csv").open()))
    assert len(runs) == 10 and sum(r["status"] == "failed" for r in runs) == 1
    assert (out / "compare.md").read_text() in proc.stdout


def test_failed_runs_are_listed_with_their_error_and_left_out_of_the_statistics(cli_run, comparison):
    proc, out = cli_run
    assert "## failed runs (1, excluded from the statistics)" in proc.stdout
    assert "NonFiniteLossError: the training loss became nan at step 12" in proc.stdout
    assert "NonFiniteLossError: the training loss became nan at step 12" in (out / "report.html").read_text()
    assert sum(v.n for v in comparison.variants) == 9


def test_the_expected_file_prints_paper_rows_beside_ours(cli_run):
    proc, _ = cli_run
    assert "## paper vs ours: Luong et al. 2015, Table 4" in proc.stdout
    assert (
        "| dot score | bleu 20.5 | Table 4 row 2 | attention/score=dot | test/bleu | 32.00 ± 4.97 |"
        in proc.stdout
    )
    assert "| location | bleu 19.0 | Table 4 row 1 | — | — |" in proc.stdout


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.sources.append(attrs["src"])
        if tag in ("link", "script") or (tag == "a" and "href" in attrs):
            self.links.append(tag)


def test_the_html_report_is_self_contained_and_embeds_every_plot_and_attention_map(cli_run, sweep):
    _, out = cli_run
    parser = _Images()
    parser.feed((out / "report.html").read_text())
    parser.close()
    assert parser.links == []
    assert all(src.startswith("data:image/png;base64,") for src in parser.sources)
    embedded = [base64.b64decode(src.split(",", 1)[1]) for src in parser.sources]
    assert all(png.startswith(b"\x89PNG") for png in embedded)
    for plot in (out / "plots").iterdir():
        assert plot.read_bytes() in embedded, plot.name
    # each variant's maps come from its lowest-seed run: jobs 0 (dot), 3 (scaled_dot), 6 (additive)
    for job in ("0", "3", "6"):
        for png in (sweep / job / "attention" / "test").iterdir():
            assert png.read_bytes() in embedded
    assert len(parser.sources) == 4 + 3 * 2


def test_report_text_from_run_dirs_is_escaped(tmp_path):
    from attnlab.compare.html import write_report

    make_run(tmp_path / "a", "dot", 0, 30.0)
    make_run(tmp_path / "b", "<script>alert(1)</script>", 0, error="bad <b>tag</b> & more")
    result = compare(load_runs([tmp_path]), bootstrap=0)
    text = write_report(tmp_path / "r.html", result, {}).read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text and "bad &lt;b&gt;tag" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--by", "attention/scor"],
            "--by attention/scor: no run has this key (did you mean attention/score?)",
        ),
        (["--metric", "test/blue"], "--metric test/blue: no completed run has it (did you mean test/bleu?)"),
        (["--baseline", "posenc=rope"], "--baseline posenc=rope: no such variant; the labels are: "),
    ],
)
def test_bad_arguments_give_one_line_on_stderr_and_exit_2(sweep, args, message, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["attnlab-compare", str(sweep), "--bootstrap", "0", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith(f"attnlab-compare: error: {message}")


def test_a_folder_without_runs_gives_one_line_and_no_traceback(tmp_path):
    proc = run_module("attnlab.cli.compare", tmp_path, str(tmp_path))
    assert proc.returncode == 2
    assert (
        proc.stderr.startswith("attnlab-compare: error: no run directories") and proc.stderr.count("\n") == 1
    )
    assert "Traceback" not in proc.stderr


def test_an_experiments_expected_yaml_is_found_by_the_runs_experiment_name(tmp_path, monkeypatch, capsys):
    for job, (score, bleu) in enumerate([("dot", 30.0), ("additive", 20.0)]):
        make_run(tmp_path / "sweep" / str(job), score, 0, bleu, experiment="luong_scores")
    folder = tmp_path / "experiments" / "luong_scores"
    folder.mkdir(parents=True)
    (folder / "expected.yaml").write_text(
        "paper: Luong 2015\nrows:\n  - {setting: general, metric: bleu, value: 20.9, source: T4,\n"
        "     ours: {attention/score: additive}}\n"
    )
    monkeypatch.chdir(tmp_path)
    main(["sweep", "--bootstrap", "0", "--html", "r/page.html", "--markdown", "r/table.md"])
    out = capsys.readouterr().out
    assert "## paper vs ours: Luong 2015" in out
    assert "| general | bleu 20.9 | T4 | attention/score=additive | test/bleu | 20.00 ± n/a |" in out
    assert f"paper numbers: {Path('experiments/luong_scores/expected.yaml').resolve()}" in out
    assert (tmp_path / "r" / "page.html").is_file() and not (
        tmp_path / "sweep" / "compare" / "report.html"
    ).exists()
    assert (tmp_path / "r" / "table.md").read_text() == (
        tmp_path / "sweep" / "compare" / "compare.md"
    ).read_text()


def test_several_roots_are_compared_together_and_a_job_without_results_is_a_failed_run(tmp_path, monkeypatch):
    make_run(tmp_path / "a" / "0", "dot", 0, 30.0)
    make_run(tmp_path / "b" / "0", "additive", 0, 20.0)
    (tmp_path / "b" / "1" / ".hydra").mkdir(parents=True)
    (tmp_path / "b" / "1" / ".hydra" / "config.yaml").write_text("seed: 3\n")
    runs = load_runs([tmp_path / "a", tmp_path / "b"])
    assert [(r.name, r.status, r.seed) for r in runs] == [
        ("a/0", "completed", 0),
        ("b/0", "completed", 0),
        ("b/1", "failed", 3),
    ]
    assert "no results.json" in runs[2].error
    monkeypatch.chdir(tmp_path)
    main([str(tmp_path / "a"), str(tmp_path / "b"), "--bootstrap", "0"])
    assert (tmp_path / "compare" / "report.html").is_file()
    assert "no results.json (the job crashed" in (tmp_path / "compare" / "compare.md").read_text()


def test_a_failed_first_job_hands_the_default_baseline_to_the_first_completed_run(tmp_path):
    make_run(tmp_path / "0", "gaussian", 0, error="RuntimeError: out of memory")
    make_run(tmp_path / "1", "additive", 0, 20.0)
    make_run(tmp_path / "2", "dot", 0, 30.0)
    make_run(tmp_path / "3", "gaussian", 1, 25.0, hyps=REFS)
    result = compare(load_runs([tmp_path]), bootstrap=0)
    assert result.baseline == "attention/score=additive"
    assert result.variant("attention/score=gaussian").n == 1


def test_readme_gets_the_tables_with_the_runs_commit_and_machine_between_its_markers(sweep, tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# exp\n\n## Results\n\n<!-- results:start -->\nold\n<!-- results:end -->\n\nafter\n")
    main([str(sweep), "--bootstrap", "0", "--out", str(tmp_path / "c"), "--readme", str(readme)])
    text = readme.read_text()
    assert text.startswith("# exp\n\n## Results\n\n<!-- results:start -->\n") and text.endswith("\nafter\n")
    assert "old" not in text
    block = text.split("<!-- results:start -->")[1].split("<!-- results:end -->")[0]
    commit = load_runs([sweep])[0].env["commit"][:10]
    assert "runs made 20" in block and f"at commit `{commit}`" in block and "CPU cores" in block
    assert "### attnlab-compare: test/bleu" in block and "| rank | variant | n | test/bleu ↑ |" in block
    assert f"attnlab-compare {sweep}" in block


def test_a_readme_without_the_markers_is_refused_in_one_line(sweep, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(ValueError, match="needs the lines <!-- results:start --> and <!-- results:end -->"):
        main([str(sweep), "--bootstrap", "0", "--out", str(tmp_path / "c"), "--readme", str(readme)])
    assert readme.read_text() == "# no markers\n"
