"""Sweeps through Hydra's launcher plugins: joblib side by side, submitit locally, sweep presets."""

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from attnlab.results import read_results
from attnlab.wandb_offline import read_run

from conftest import TINY, run_module

FAST = [o for o in TINY if not o.startswith("trainer.max_steps")] + [
    "trainer.max_steps=12",
    "diagnostics.every_n_val_epochs=0",
]
SWEEP_PRESETS = sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "sweep").glob("*.yaml"))


def job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted((p for p in sweep_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def test_a_2x2_joblib_multirun_leaves_four_complete_run_dirs_each_with_its_own_wandb_run(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.train",
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}",
        *FAST,
        "attention/score=dot,scaled_dot",
        "seed=0,1",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr
    jobs = job_dirs(sweep)
    assert [p.name for p in jobs] == ["0", "1", "2", "3"]
    seen = set()
    for job in jobs:
        result = read_results(job)
        assert result["status"] == "completed" and result["error"] is None
        assert {"test/bleu", "test_long/bleu", "val/bleu", "train/tokens_per_s"} <= set(result["metrics"])
        for name in ("test.txt", "test.src.txt", "test.ref.txt"):
            assert (job / "hyp" / name).is_file()
        assert (job / "checkpoints" / "last.ckpt").is_file() and (job / "history.jsonl").is_file()
        assert list((job / "attention" / "test").glob("cross_L*_probe0.png"))
        [wandb_dir] = (job / "wandb").glob("offline-run-*")  # one run per job, not one shared run
        logged = read_run(wandb_dir, wait=30)
        choice, seed = logged["config"]["choices"]["attention/score"], logged["config"]["seed"]
        assert f"attention/score={choice}" in result["overrides"] and seed == result["seed"]
        assert logged["group"] == sweep.name and logged["exit_code"] == 0
        assert any("test/bleu" in row for row in logged["history"]) or "test/bleu" in logged["summary"]
        seen.add((choice, seed))
    assert seen == {("dot", 0), ("dot", 1), ("scaled_dot", 0), ("scaled_dot", 1)}
    summary = json.loads((sweep / "sweep.json").read_text())
    assert (summary["completed"], summary["failed"], summary["missing"]) == (4, 0, 0)


def test_submitit_local_runs_one_job(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.train",
        tmp_path,
        "-m",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        f"hydra.sweep.dir={sweep}",
        *FAST,
        "logger=none",
        "diagnostics.attention_maps=false",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    [job] = job_dirs(sweep)
    assert read_results(job)["status"] == "completed"
    assert list((sweep / ".submitit").rglob("*_log.out"))  # the job ran in submitit's own process


def test_a_job_that_fails_after_wandb_started_finishes_its_run_as_failed_and_the_others_complete(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.train",
        tmp_path,
        "-m",
        f"hydra.sweep.dir={sweep}",
        *FAST,
        "diagnostics.attention_maps=false",
        "optim.lr=2e-3,1e30",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("attnlab-train: error: 1 of 2 jobs failed")
    assert "Traceback" not in proc.stderr
    ok, bad = (read_results(job) for job in job_dirs(sweep))
    assert ok["status"] == "completed" and bad["status"] == "failed"
    assert "train/loss became" in bad["error"] and "optim.lr" in bad["error"]
    exit_codes = [
        read_run(next((job / "wandb").glob("offline-run-*")), wait=30)["exit_code"] for job in job_dirs(sweep)
    ]
    assert exit_codes == [0, 1]
    assert "sweep: 1 of 2 jobs completed, 1 failed" in proc.stdout


@pytest.mark.parametrize("preset", SWEEP_PRESETS)
def test_every_sweep_preset_composes_into_a_multirun_over_its_axis(preset):
    from hydra import compose, initialize_config_dir

    from attnlab.train import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[f"sweep={preset}"], return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params)
    assert params and all("," in str(values) for values in params.values())
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        for key, values in params.items():  # every value of the axis composes on its own
            for value in str(values).split(","):
                compose("train", overrides=[f"{key}={value}"])
