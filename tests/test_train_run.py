"""A ~20-step training run through the real CLI leaves a complete run directory."""

import pytest

from attnlab.rundir.wandb_offline import read_run

from conftest import results_of

METRICS = {
    "test/bleu",
    "test/chrf",
    "test_long/bleu",
    "test_long/chrf",
    "val/bleu",
    "val/chrf",
    "val/loss",
    "val/ppl",
    "test/aer",
    "test/aer_mean",
    "test/entropy/encoder",
    "test/entropy/decoder",
    "test/entropy/cross",
    "test/max_weight/cross",
    "train/tokens_per_s",
    "train/padding_fraction",
    "params",
    "peak_mem_mb",
    "wall_s",
}


@pytest.fixture(scope="module")
def wandb_run(trained_run):
    return trained_run


def test_a_short_run_writes_a_complete_results_json(wandb_run):
    res = results_of(wandb_run)
    assert res["status"] == "completed" and res["error"] is None
    assert res["seed"] == 3
    assert res["choices"] == {
        "attention/score": "scaled_dot",
        "attention/mask": "full",
        "posenc": "sinusoidal",
        "model": "tiny",
        "data": "synthetic",
        "trainer": "default",
        "logger": "wandb",
        "callbacks": "default",
        "data/tokenizer": "word",
    }
    assert "seed=3" in res["overrides"] and "logger=wandb" in res["overrides"]
    assert METRICS <= set(res["metrics"])
    assert all(isinstance(v, float) for v in res["metrics"].values())
    assert 0.0 <= res["metrics"]["test/bleu"] <= 100.0 and res["metrics"]["params"] > 0
    assert res["sacrebleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_the_run_dir_holds_hypotheses_for_every_evaluation_split_and_both_checkpoints(wandb_run):
    run = wandb_run / "run"
    assert len((run / "hyp" / "test.txt").read_text().splitlines()) == 40
    assert len((run / "hyp" / "test_long.txt").read_text().splitlines()) == 20
    assert (run / "checkpoints" / "last.ckpt").is_file() and (run / "checkpoints" / "best.ckpt").is_file()


def test_attention_maps_and_entropy_heat_maps_are_saved_for_every_site_and_layer(wandb_run):
    names = sorted(p.name for p in (wandb_run / "run" / "attention" / "test").glob("*.png"))
    maps = [
        f"{site}_L{layer}_probe{i}.png"
        for site in ("cross", "decoder", "encoder")
        for layer in (0, 1)
        for i in (0, 1)
    ]
    assert names == sorted(maps + [f"entropy_{s}.png" for s in ("cross", "decoder", "encoder")])


def test_the_offline_wandb_run_is_written_and_reads_back_from_its_files(wandb_run):
    runs = list((wandb_run / "run" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    logged = read_run(runs[0], wait=30)
    assert logged["name"] == "scaled_dot-sinusoidal-h2-s3"
    assert logged["config"]["model"]["d_model"] == 32 and logged["config"]["seed"] == 3
    keys = set().union(*logged["history"])
    assert {"train/loss", "train/lr", "val/bleu", "val/loss", "test/bleu", "test_long/bleu"} <= keys
    test_bleu = [h["test/bleu"] for h in logged["history"] if "test/bleu" in h]
    assert test_bleu[-1] == pytest.approx(results_of(wandb_run)["metrics"]["test/bleu"])
    assert logged["exit_code"] == 0
    assert {"attention/score=scaled_dot", "posenc=sinusoidal", "model=tiny"} <= set(logged["tags"])
    assert {"attention/cross/L1", "attention/entropy/cross"} <= keys


@pytest.mark.parametrize("logger", ["csv", "none"])
def test_csv_and_none_loggers_still_leave_results(train_in_process, tmp_path, tiny, logger):
    tiny[tiny.index("trainer.max_steps=20")] = "trainer.max_steps=3"
    proc = train_in_process(*tiny, "trainer.log_every_n_steps=1", f"logger={logger}")
    assert proc.returncode == 0, proc.stderr
    assert results_of(tmp_path)["status"] == "completed"
    assert (tmp_path / "run" / "hyp" / "test.txt").is_file()
    assert len(list((tmp_path / "run" / "attention" / "test").glob("*.png"))) == 15
    assert not (tmp_path / "run" / "wandb").exists()
    csv = tmp_path / "run" / "csv" / "metrics.csv"
    if logger == "csv":
        assert "train/loss" in csv.read_text().splitlines()[0]
    else:
        assert not csv.exists()
