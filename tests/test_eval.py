"""attnlab-eval: a checkpoint's own test split scores as in training; files and bad input."""

import json

import pytest

from conftest import TINY, results_of, run_cli, run_module


def run_eval(cwd, *overrides):
    return run_module("attnlab.eval", cwd, *overrides)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval_run")
    proc = run_cli(tmp, *TINY, "logger=none", "diagnostics.attention_maps=false")
    assert proc.returncode == 0, proc.stderr
    return tmp


def test_evaluating_the_best_checkpoint_reproduces_the_runs_test_score(trained):
    ckpt = trained / "run" / "checkpoints" / "best.ckpt"
    proc = run_eval(trained, f"ckpt={ckpt}", "split=test", f"output={trained / 'ev'}")
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((trained / "ev" / "scores.json").read_text())
    assert scores["bleu"] == pytest.approx(results_of(trained)["metrics"]["test/bleu"], abs=0.5)
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    hyps = (trained / "ev" / "hyp.txt").read_text().splitlines()
    assert len(hyps) == 40 and "BLEU" in proc.stdout


def test_a_source_file_is_translated_and_scored_against_its_references(trained):
    ckpt = trained / "run" / "checkpoints" / "best.ckpt"
    refs = (trained / "run" / "hyp" / "test.txt").read_text().splitlines()[:5]
    src = trained / "src.txt"
    src.write_text("the cat sees a dog\nthe two big dogs like the bird\n")
    (trained / "ref.txt").write_text("".join(r + "\n" for r in refs[:2]))
    proc = run_eval(
        trained,
        f"ckpt={ckpt}",
        f"input={src}",
        f"ref={trained / 'ref.txt'}",
        "decode.strategy=beam",
        "decode.beam_size=3",
        f"output={trained / 'file'}",
    )
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((trained / "file" / "scores.json").read_text())
    assert scores["sentences"] == 2 and scores["decode"]["strategy"] == "beam" and "chrf" in scores
    assert len((trained / "file" / "hyp.txt").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (["ckpt=nowhere.ckpt"], "ckpt=nowhere.ckpt: no such checkpoint file"),
        (["split=dev"], "split=dev is not in the corpus"),
        (["input=missing.txt"], "input=missing.txt: no such file"),
        (["decode.strategy=sample"], "decode.strategy must be 'greedy' or 'beam'"),
    ],
)
def test_bad_evaluation_input_gives_a_one_line_error(trained, overrides, expected):
    ckpt = f"ckpt={trained / 'run' / 'checkpoints' / 'best.ckpt'}"
    proc = run_eval(trained, *([] if overrides[0].startswith("ckpt=") else [ckpt]), *overrides)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("attnlab-eval: error: ") and expected in lines[0]
