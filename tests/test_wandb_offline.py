"""The offline-run reader recovers what wandb recorded, including records spanning 32 KiB blocks."""

import wandb

from attnlab.rundir.wandb_offline import read_run
from attnlab.training.loggers import resolve_wandb_mode


def test_reader_recovers_config_history_summary_and_exit_code(tmp_path):
    run = wandb.init(
        mode="offline",
        dir=str(tmp_path),
        project="t",
        name="reader",
        group="g",
        tags=["a=b"],
        config={"model": {"d_model": 64}, "long": "x" * 70_000},
    )
    for step in range(300):
        run.log({"val/bleu": float(step), "blob": "y" * 200}, step=step)
    run.summary["test/bleu"] = 42.5
    run.finish(exit_code=0)
    [run_dir] = (tmp_path / "wandb").glob("offline-run-*")
    logged = read_run(run_dir, wait=30)
    assert logged["name"] == "reader" and logged["group"] == "g" and logged["tags"] == ["a=b"]
    assert logged["config"]["model"] == {"d_model": 64}
    assert logged["config"]["long"] == "x" * 70_000  # one record over two blocks
    bleu = [h["val/bleu"] for h in logged["history"] if "val/bleu" in h]
    assert bleu == [float(s) for s in range(300)]
    assert logged["summary"]["test/bleu"] == 42.5
    assert logged["exit_code"] == 0


def test_wandb_is_offline_without_a_key_and_follows_wandb_mode(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert resolve_wandb_mode(None) == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert resolve_wandb_mode(None) == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert resolve_wandb_mode(None) == "disabled"
    assert resolve_wandb_mode("offline") == "offline"
