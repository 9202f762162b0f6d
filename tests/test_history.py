"""history.jsonl: one line per validation while fitting, with the training time it took to get there."""

import json
from types import SimpleNamespace

import pytest
from lightning.pytorch.trainer.states import TrainerFn

import attnlab.training.callbacks.history as history
from attnlab.rundir import RunDir
from attnlab.training.callbacks.history import MetricsHistory


def test_each_validation_records_the_training_seconds_before_it_and_the_wall_time_since_the_fit_began(
    tmp_path, monkeypatch
):
    clock = iter([100.0, 110.0, 113.0, 123.0, 125.0])  # fit, val 1 start/end, val 2 start/end
    monkeypatch.setattr(history.time, "perf_counter", lambda: next(clock))
    trainer = SimpleNamespace(
        default_root_dir=str(tmp_path),
        is_global_zero=True,
        sanity_checking=False,
        state=SimpleNamespace(fn=TrainerFn.FITTING),
        global_step=0,
        current_epoch=0,
        callback_metrics={"val/bleu": 1.5, "train/loss": 2.0, "val/loss": float("nan")},
    )
    callback = MetricsHistory()
    callback.on_fit_start(trainer, None)
    for step in (10, 20):
        trainer.global_step = step
        callback.on_validation_start(trainer, None)
        callback.on_validation_end(trainer, None)
    rows = RunDir(tmp_path).read_history()
    assert [(r["step"], r["train_s"], r["elapsed_s"]) for r in rows] == [(10, 10.0, 13.0), (20, 20.0, 25.0)]
    assert rows[0]["val/bleu"] == 1.5 and rows[0]["val/loss"] is None and "train/loss" not in rows[0]


@pytest.mark.parametrize(
    "sanity,fn,zero",
    [(True, TrainerFn.FITTING, True), (False, TrainerFn.VALIDATING, True), (False, TrainerFn.FITTING, False)],
)
def test_the_sanity_check_a_later_validate_call_and_other_ranks_write_nothing(tmp_path, sanity, fn, zero):
    trainer = SimpleNamespace(
        default_root_dir=str(tmp_path),
        is_global_zero=zero,
        sanity_checking=sanity,
        state=SimpleNamespace(fn=fn),
        global_step=5,
        current_epoch=0,
        callback_metrics={"val/bleu": 1.0},
    )
    callback = MetricsHistory()
    callback.on_fit_start(trainer, None)
    callback.on_validation_start(trainer, None)
    callback.on_validation_end(trainer, None)
    assert RunDir(tmp_path).read_history() == []


@pytest.mark.parametrize("max_steps,validated", [(12, [5, 10, 12]), (10, [5, 10]), (3, [3])])
def test_the_last_step_is_validated_once_whatever_the_cadence(
    train_in_process, tiny, tmp_path, max_steps, validated
):
    out = train_in_process(
        *tiny,
        "logger=none",
        f"trainer.max_steps={max_steps}",
        "trainer.val_check_interval=5",
        "diagnostics.attention_maps=false",
        "diagnostics.attention_stats=false",
    )
    assert out.returncode == 0, out.stderr
    run = RunDir(tmp_path / "run")
    rows = run.read_history()
    assert [row["step"] for row in rows] == validated
    assert (tmp_path / "run" / "checkpoints" / "best.ckpt").is_file()
    best = max(rows, key=lambda row: row["val/bleu"])  # the first of equals, as the checkpoint keeps it
    metrics = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]
    assert {k: metrics[k] for k in ("val/bleu", "val/loss")} == pytest.approx(
        {k: best[k] for k in ("val/bleu", "val/loss")}
    )


def test_the_validation_hypotheses_are_those_of_the_best_checkpoint_not_the_last_validation(
    train_in_process, tiny, tmp_path, monkeypatch
):
    from attnlab.training.task import TranslationTask

    real_scores, real_decode = TranslationTask.corpus_scores, TranslationTask._decode_into

    def falling_bleu(task, hyps, refs):  # a BLEU that makes the first validation the best
        return {**real_scores(task, hyps, refs), "bleu": 100.0 - task.global_step}

    def stamped(task, acc, batch):  # every hypothesis says at which step it was decoded
        first = len(acc["hyp"])
        real_decode(task, acc, batch)
        acc["hyp"][first:] = [f"{hyp} @{task.global_step}" for hyp in acc["hyp"][first:]]

    monkeypatch.setattr(TranslationTask, "corpus_scores", falling_bleu)
    monkeypatch.setattr(TranslationTask, "_decode_into", stamped)
    quiet = ["logger=none", "diagnostics.attention_maps=false", "diagnostics.attention_stats=false"]
    out = train_in_process(*tiny, *quiet, "trainer.max_steps=12", "trainer.val_check_interval=5")
    assert out.returncode == 0, out.stderr
    run = RunDir(tmp_path / "run")
    assert [row["step"] for row in run.read_history()] == [5, 10, 12]
    assert json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]["val/bleu"] == 95.0
    hyps = run.read_hypotheses("valid").hyps
    assert hyps and all(hyp.endswith(" @5") for hyp in hyps)  # the best validation's, not step 12's
