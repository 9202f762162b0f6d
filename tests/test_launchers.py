"""Sweeps through Hydra's launcher plugins: joblib side by side, submitit locally, failing jobs, presets."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from attnlab.config import CONF_DIR
from attnlab.rundir import RunDir
from attnlab.rundir.sweep import job_dirs, read_summary
from attnlab.rundir.wandb_offline import read_run

from conftest import TINY, compose, config_options, run_module

FAST = [o for o in TINY if not o.startswith("trainer.max_steps")] + [
    "trainer.max_steps=13",  # one epoch of the 400 pairs in batches of 32: one validation
    "diagnostics.every_n_val_epochs=0",
]
SWEEP_PRESETS = sorted(p.stem for p in (Path(CONF_DIR) / "sweep").glob("*.yaml"))


def wandb_run_of(job: RunDir) -> dict:
    [folder] = (job.path / "wandb").glob("offline-run-*")  # one run per job, not one shared run
    return read_run(folder, wait=30)


def test_three_jobs_on_two_joblib_workers_leave_three_complete_run_dirs_each_with_its_own_wandb_run(tmp_path):
    """Two workers, three jobs: one worker runs two jobs in turn, so its wandb run must end with its job."""
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.cli.train",
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}",
        *FAST,
        "attention/score=dot,scaled_dot,general",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr
    jobs = job_dirs(sweep)
    assert [job.path.name for job in jobs] == ["0", "1", "2"]
    seen = set()
    for job in jobs:
        result = job.read_results()
        assert result["status"] == "completed" and result["error"] is None
        assert {"test/bleu", "test_long/bleu", "val/bleu", "train/tokens_per_s"} <= set(result["metrics"])
        assert job.read_hypotheses("test") is not None and [row["step"] for row in job.read_history()] == [13]
        assert (job.checkpoints / "last.ckpt").is_file()
        assert "cross_L0_probe0" in job.attention_maps()
        logged = wandb_run_of(job)
        choice = logged["config"]["choices"]["attention/score"]
        assert f"attention/score={choice}" in result["overrides"]
        assert logged["group"] == sweep.name and logged["exit_code"] == 0
        assert any("test/bleu" in row for row in logged["history"]) or "test/bleu" in logged["summary"]
        seen.add(choice)
    assert seen == {"dot", "scaled_dot", "general"}
    summary = read_summary(sweep)
    assert (summary["completed"], summary["failed"], summary["missing"]) == (3, 0, 0)


@pytest.mark.slow  # submitit's own processes (9 s); joblib covers launching jobs in other processes
def test_submitit_local_runs_one_job(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.cli.train",
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
    assert job.read_results()["status"] == "completed"
    assert list((sweep / ".submitit").rglob("*_log.out"))  # the job ran in submitit's own process


def test_failing_jobs_never_sink_the_sweep_whether_they_fail_before_or_after_wandb_started(tmp_path):
    """Four jobs in one process (the basic launcher): model.num_heads=5 fails before anything is built,
    optim.lr=1e30 fails on a NaN loss after its wandb run started; the good job completes."""
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.cli.train",
        tmp_path,
        "-m",
        f"hydra.sweep.dir={sweep}",
        *[o for o in FAST if not o.startswith("model.num_heads")],
        "diagnostics.attention_maps=false",
        "optim.lr=0.002,1e+30",
        "model.num_heads=2,5",
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("attnlab-train: error:")]
    assert errors == [lines[-1]] and errors[0].startswith("attnlab-train: error: 3 of 4 jobs failed")
    assert "Traceback" not in proc.stderr

    def swept(job: RunDir) -> tuple[str, str]:
        overrides = job.read_results()["overrides"]
        return tuple(o for o in overrides if o.startswith(("optim.lr=", "model.num_heads=")))

    jobs = {swept(job): job for job in job_dirs(sweep)}
    ok = jobs[("optim.lr=0.002", "model.num_heads=2")].read_results()
    assert ok["status"] == "completed" and "test/bleu" in ok["metrics"]
    nan = jobs[("optim.lr=1e+30", "model.num_heads=2")].read_results()
    assert nan["status"] == "failed" and "train/loss became" in nan["error"] and "optim.lr" in nan["error"]
    for lr in ("0.002", "1e+30"):
        bad = jobs[(f"optim.lr={lr}", "model.num_heads=5")].read_results()
        assert bad["status"] == "failed" and "model.num_heads (5)" in bad["error"] and not bad["metrics"]
    assert wandb_run_of(jobs[("optim.lr=0.002", "model.num_heads=2")])["exit_code"] == 0
    assert wandb_run_of(jobs[("optim.lr=1e+30", "model.num_heads=2")])["exit_code"] == 1
    summary = read_summary(sweep)
    assert (summary["completed"], summary["failed"], summary["missing"]) == (1, 3, 0)
    assert "sweep: 1 of 4 jobs completed, 3 failed" in proc.stdout


@pytest.mark.parametrize("preset", SWEEP_PRESETS)
def test_every_sweep_preset_composes_into_a_multirun_over_its_axis(preset):
    cfg = compose([f"sweep={preset}"], return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=True)
    assert params and all("," in str(values) for values in params.values())
    for key, values in params.items():  # every value of the axis composes on its own
        for value in str(values).split(","):
            compose([f"{key}={value}"])


@pytest.mark.parametrize(
    "preset,group,first",
    [
        ("scores", "attention/score", "scaled_dot"),
        ("posenc", "posenc", "sinusoidal"),
        ("masks", "attention/mask", "full"),
    ],
)
def test_the_variant_presets_sweep_every_option_of_their_group_the_default_first(preset, group, first):
    cfg = compose([f"sweep={preset}"], return_hydra_config=True)
    values = str(OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=True)[group]).split(",")
    assert values[0] == first and sorted(values) == config_options(group)
