"""attnlab-eval: a checkpoint's own test split scores as in training; files and bad input."""

import json

import pytest

from attnlab.rundir import RunDir

from conftest import results_of


def checkpoint(trained_run) -> str:
    return f"ckpt={RunDir(trained_run / 'run').checkpoints / 'best.ckpt'}"


def test_evaluating_the_best_checkpoint_reproduces_the_runs_test_score(trained_run, tmp_path, in_process):
    from attnlab.cli.eval import cli

    proc = in_process(cli, "attnlab-eval", checkpoint(trained_run), "split=test", f"output={tmp_path / 'ev'}")
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((tmp_path / "ev" / "scores.json").read_text())
    assert scores["bleu"] == pytest.approx(results_of(trained_run)["metrics"]["test/bleu"], abs=1e-4)
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    hyps = (tmp_path / "ev" / "hyp.txt").read_text().splitlines()
    assert hyps == RunDir(trained_run / "run").read_hypotheses("test").hyps  # the run's own decode
    assert "BLEU" in proc.stdout


def test_the_runs_validation_metrics_are_those_of_its_best_checkpoint(trained_run, tmp_path, in_process):
    from attnlab.cli.eval import cli

    out = in_process(cli, "attnlab-eval", checkpoint(trained_run), "split=valid", f"output={tmp_path / 'ev'}")
    assert out.returncode == 0, out.stderr
    scores = json.loads((tmp_path / "ev" / "scores.json").read_text())
    metrics = results_of(trained_run)["metrics"]  # recorded when best.ckpt was saved, not re-validated
    assert scores["bleu"] == pytest.approx(metrics["val/bleu"], abs=1e-4)
    assert scores["chrf"] == pytest.approx(metrics["val/chrf"], abs=1e-4)


def test_a_source_file_is_translated_and_scored_against_its_references(trained_run, tmp_path, in_process):
    from attnlab.cli.eval import cli

    refs = RunDir(trained_run / "run").read_hypotheses("test").hyps[:2]
    src = tmp_path / "src.txt"
    src.write_text("the cat sees a dog\nthe two big dogs like the bird\n")
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in refs))
    out = in_process(
        cli,
        "attnlab-eval",
        checkpoint(trained_run),
        f"input={src}",
        f"ref={tmp_path / 'ref.txt'}",
        "decode.strategy=beam",
        "decode.beam_size=3",
        f"output={tmp_path / 'file'}",
    )
    assert out.returncode == 0, out.stderr
    scores = json.loads((tmp_path / "file" / "scores.json").read_text())
    assert scores["sentences"] == 2 and scores["decode"]["strategy"] == "beam" and "chrf" in scores
    assert scores["decode"]["beam_size"] == 3 and scores["decode"]["max_len_offset"] == 10  # the run's
    assert len((tmp_path / "file" / "hyp.txt").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (["ckpt=nowhere.ckpt"], "ckpt=nowhere.ckpt: no such checkpoint file"),
        (["split=dev"], "split=dev is not in the corpus"),
        (["input=missing.txt"], "input=missing.txt: no such file"),
        (["decode.strategy=sample"], "decode.strategy must be 'greedy' or 'beam'"),
    ],
)
def test_bad_evaluation_input_gives_a_one_line_error(trained_run, in_process, overrides, expected):
    from attnlab.cli.eval import cli

    ckpt = [] if overrides[0].startswith("ckpt=") else [checkpoint(trained_run)]
    out = in_process(cli, "attnlab-eval", *ckpt, *overrides)
    lines = out.stderr.strip().splitlines()
    assert out.returncode != 0 and len(lines) == 1, out.stderr
    assert lines[0].startswith("attnlab-eval: error: ") and expected in lines[0]
