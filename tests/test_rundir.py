"""The run directory: one place names every file, writes it and reads it back (``attnlab.rundir``)."""

import json

import pytest

from attnlab.rundir import RunDir
from attnlab.rundir.sweep import job_dirs, summarise

RECORD = dict(
    status="completed",
    error=None,
    choices={"attention/score": "additive", "posenc": "alibi"},
    overrides=["attention/score=additive", "seed=1"],
    seed=1,
    metrics={"test/bleu": 97.1, "val/loss": float("nan"), "params": 3},
    sacrebleu="nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
)


def test_results_json_has_the_documented_fields_and_no_value_that_is_not_json(tmp_path):
    run = RunDir(tmp_path / "run")
    path = run.write_results(**RECORD)
    assert path == run.results == tmp_path / "run" / "results.json"
    record = json.loads(path.read_text())  # strict JSON: NaN became null
    assert set(record) == {"status", "error", "choices", "overrides", "seed", "metrics", "sacrebleu", "env"}
    assert record["metrics"] == {"params": 3.0, "test/bleu": 97.1, "val/loss": None}
    assert record == run.read_results()
    assert not list(run.path.glob("*.tmp"))  # written through a temporary file, renamed into place


def test_a_status_other_than_completed_or_failed_is_refused(tmp_path):
    with pytest.raises(ValueError, match="status must be 'completed' or 'failed'"):
        RunDir(tmp_path).write_results(**{**RECORD, "status": "done"})


def test_hypotheses_round_trip_line_for_line_even_with_unicode_line_breaks_inside_a_sentence(tmp_path):
    run = RunDir(tmp_path)
    hyps, srcs, refs = ["a\u2028b", "", "c"], ["x", "y", "z"], ["r1", "r2", "r3"]
    run.write_hypotheses("test", hyps, srcs, refs)
    assert [p.name for p in run.hypothesis_files("test")] == ["test.txt", "test.src.txt", "test.ref.txt"]
    read = run.read_hypotheses("test")
    assert (read.hyps, read.srcs, read.refs) == (hyps, srcs, refs)
    assert run.read_hypotheses("valid") is None


def test_hypotheses_that_are_not_line_aligned_are_refused_when_written_and_when_read(tmp_path):
    run = RunDir(tmp_path)
    with pytest.raises(ValueError, match="not line-aligned: 2 hypotheses, 1 sources, 2 references"):
        run.write_hypotheses("test", ["a", "b"], ["x"], ["r", "s"])
    run.write_hypotheses("test", ["a", "b"], ["x", "y"], ["r", "s"])
    run.hypothesis_files("test")[2].write_text("r\n")
    with pytest.raises(ValueError, match=r"test files are not line-aligned \(2 hypotheses, 1 references"):
        run.read_hypotheses("test")


def test_history_starts_empty_per_fit_and_appends_one_row_per_validation(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.read_history() == []
    run.start_history()
    run.append_history({"step": 10, "val/bleu": 1.5})
    run.append_history({"step": 20, "val/bleu": None})
    assert run.read_history() == [{"step": 10, "val/bleu": 1.5}, {"step": 20, "val/bleu": None}]
    run.start_history()
    assert run.read_history() == []


def test_attention_maps_are_listed_in_natural_order(tmp_path):
    run = RunDir(tmp_path)
    for name in ("cross_L10_probe0", "cross_L2_probe0", "encoder_L0_probe1"):
        (run.attention("test") / f"{name}.png").parent.mkdir(parents=True, exist_ok=True)
        (run.attention("test") / f"{name}.png").write_bytes(b"")
    assert list(run.attention_maps()) == ["cross_L2_probe0", "cross_L10_probe0", "encoder_L0_probe1"]
    assert run.attention_maps("step000100") == {}


def test_a_checkpoint_knows_its_run_directory(tmp_path):
    run = RunDir(tmp_path / "run")
    assert RunDir.of_checkpoint(run.checkpoints / "best.ckpt").path == run.path.resolve()
    assert run.eval_output("test-greedy") == run.path / "eval" / "test-greedy"


def test_a_sweep_summary_counts_completed_failed_and_crashed_jobs_in_job_order(tmp_path):
    for job, status in [("0", "completed"), ("10", "failed"), ("2", None)]:
        run = RunDir(tmp_path / job)
        run.hydra_config.parent.mkdir(parents=True)
        if status:
            run.write_results(**{**RECORD, "status": status, "error": None if status == "completed" else "x"})
    assert [r.path.name for r in job_dirs(tmp_path)] == ["0", "2", "10"]
    summary = summarise(tmp_path)
    assert [(j["job"], j["status"]) for j in summary["jobs"]] == [
        ("0", "completed"),
        ("2", "missing"),
        ("10", "failed"),
    ]
    assert (summary["completed"], summary["failed"], summary["missing"]) == (1, 1, 1)
