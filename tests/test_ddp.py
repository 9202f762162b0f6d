"""``trainer=ddp``: two CPU processes on gloo make one job, with one results.json and one wandb run.

The sharding of training batches and the child ranks' command are checked without processes; the
runs through the real CLI start 2 ranks each (the multirun ones are slow: ``pytest -m slow``).
"""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from attnlab.config import CONF_DIR
from attnlab.data.batching import RandomBatchSampler, ShardedBatchSampler, TokenBudgetBatchSampler, shard
from attnlab.data.datamodule import TranslationDataModule
from attnlab.data.synthetic import generate
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.rundir import RunDir
from attnlab.rundir.results import read_results
from attnlab.rundir.wandb_offline import read_run
from attnlab.training import distributed
from attnlab.training.build import build_model
from attnlab.training.callbacks.throughput import Throughput

from conftest import TINY, compose_fast, results_of, run_cli, run_module

DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]
FAST = [o for o in TINY if not o.startswith(("trainer.max_steps", "data.corpus.valid_size"))] + [
    "trainer.max_steps=10",
    "data.corpus.valid_size=20",
    "diagnostics.every_n_val_epochs=0",
]


def data_module(max_tokens: int | None, trainer=None) -> TranslationDataModule:
    corpus = generate(train_size=203, valid_size=10, test_size=10, test_long_size=5)
    pairs = corpus.splits["train"]
    tokenizer = WordTokenizer.train([p.src for p in pairs] + [p.tgt for p in pairs])
    data = TranslationDataModule(corpus, tokenizer, 16, 32, max_tokens=max_tokens, seed=3)
    data.trainer = trainer
    return data


def served(data: TranslationDataModule, epochs: int = 2) -> list[list[list[int]]]:
    """The example indices of every batch the training loader serves, per epoch."""
    loader = data.train_dataloader()
    out = []
    for epoch in range(epochs):
        loader.batch_sampler.set_epoch(epoch)  # as Lightning's fit loop does
        out.append([batch["index"].tolist() for batch in loader])
    return out


@pytest.mark.parametrize("max_tokens", [None, 200], ids=["fixed_size", "token_budget"])
def test_the_two_ranks_train_on_disjoint_equally_many_batches_of_the_same_epoch(max_tokens):
    ranks = [served(data_module(max_tokens, SimpleNamespace(global_rank=r, world_size=2))) for r in (0, 1)]
    whole = data_module(max_tokens).batch_sampler or RandomBatchSampler(203, 16, seed=3)
    for epoch in range(2):
        first, second = ranks[0][epoch], ranks[1][epoch]
        assert len(first) == len(second) == len(whole) // 2
        seen_0, seen_1 = {i for b in first for i in b}, {i for b in second for i in b}
        assert not seen_0 & seen_1
        all_batches = whole.batches(epoch)
        assert sorted(map(sorted, first + second)) == sorted(map(sorted, all_batches[: len(first) * 2]))
    assert ranks[0][0] != ranks[0][1]  # a new order every epoch


def test_a_shard_is_every_world_size_th_batch_after_setting_aside_the_remainder():
    batches = [[i] for i in range(7)]
    assert shard(batches, 0, 3) == [[0], [3]] and shard(batches, 2, 3) == [[2], [5]]
    assert shard(batches, 0, 1) == batches
    with pytest.raises(ValueError, match=r"rank \(3\) must be in \[0, world size \(3\)\)"):
        shard(batches, 3, 3)


def test_an_epoch_with_fewer_batches_than_ranks_is_refused_with_both_numbers():
    with pytest.raises(ValueError, match="an epoch has 2 training batches, fewer than the 4 DDP ranks"):
        ShardedBatchSampler(RandomBatchSampler(20, 10), rank=0, world_size=4)


def test_one_process_keeps_the_unsharded_training_batches():
    data = data_module(200, SimpleNamespace(global_rank=0, world_size=1))
    assert isinstance(data.train_dataloader().batch_sampler, TokenBudgetBatchSampler)
    assert data_module(None).train_dataloader().batch_sampler.__class__.__name__ == "BatchSampler"


MODEL_OPTIONS = [
    (g, p.stem)
    for g in ("attention/score", "attention/mask", "posenc", "model")
    for p in sorted((Path(CONF_DIR) / g).glob("*.yaml"))
]


@pytest.mark.parametrize("group,option", MODEL_OPTIONS, ids=[f"{g}={o}" for g, o in MODEL_OPTIONS])
def test_every_model_option_gives_every_parameter_a_gradient_as_ddp_requires(group, option):
    # strategy: ddp keeps find_unused_parameters=False: a parameter left out of a step would stall DDP
    overrides = [f"{group}={option}"] + (["model.d_model=32", "model.ffn_dim=64"] if group != "model" else [])
    model = build_model(compose_fast(overrides), vocab_size=50, pad_id=0)
    src, tgt = torch.randint(4, 50, (2, 7)), torch.randint(4, 50, (2, 5))
    model(src, tgt).sum().backward()
    assert [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None] == []


def hydra_job(tmp_path: Path) -> OmegaConf:
    """The Hydra config of job 1 of ``attnlab-train -m hydra/launcher=joblib trainer=ddp seed=0,1``."""
    return OmegaConf.create(
        {
            "overrides": {
                "task": ["trainer=ddp", "trainer.devices=2", "seed=1"],
                "hydra": [
                    "hydra/launcher=joblib",
                    "hydra.launcher.n_jobs=2",
                    f"hydra.sweep.dir={tmp_path}",
                    "hydra.job.chdir=false",
                    "hydra.mode=MULTIRUN",
                ],
            },
            "runtime": {"output_dir": str(tmp_path / "1"), "cwd": "/somewhere"},
            "job": {"name": "train"},
        }
    )


def test_a_child_rank_reruns_only_this_job_as_a_single_run_in_the_jobs_folder(tmp_path, monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hydra_job(tmp_path)))
    command, cwd = distributed.child_command("attnlab.cli.train", local_rank=1)
    assert command[1:3] == ["-m", "attnlab.cli.train"] and cwd == "/somewhere"
    assert command[3:] == [
        "trainer=ddp",
        "trainer.devices=2",
        "seed=1",
        "hydra.job.chdir=false",
        f'hydra.run.dir="{tmp_path / "1"}"',
        "hydra.job.name=train_ddp_process_1",
        "hydra.output_subdir=null",
        "hydra/job_logging=stdout",
    ]


def test_only_rank_0_writes_results_unless_another_rank_recorded_its_own_failure(tmp_path):
    assert distributed.writes_results(0, failed=False, run_dir=tmp_path, since=0.0)
    assert not distributed.writes_results(1, failed=False, run_dir=tmp_path, since=0.0)
    assert distributed.writes_results(1, failed=True, run_dir=tmp_path, since=0.0)
    assert distributed.writes_results(0, failed=True, run_dir=tmp_path, since=0.0)
    RunDir(tmp_path).write_results(
        status="failed",
        error="rank 1: NonFiniteLossError: …",
        choices={},
        overrides=[],
        seed=0,
        metrics={},
        sacrebleu=None,
    )
    assert not distributed.writes_results(0, failed=True, run_dir=tmp_path, since=0.0)
    assert distributed.writes_results(0, failed=True, run_dir=tmp_path, since=2e9)  # an older record


def test_when_a_child_rank_fails_the_watch_stops_the_others_and_spares_the_launching_process():
    import subprocess

    failing, waiting = subprocess.Popen(["sh", "-c", "exit 3"]), subprocess.Popen(["sleep", "60"])
    watch = distributed.ChildWatch([failing, waiting], grace_s=30, poll_s=0.05)
    watch.start()
    assert waiting.wait(timeout=10) == -9  # killed, not left waiting in a collective
    watch.done.set()  # this process left the job (it recorded the failure) within the grace period
    watch.join(timeout=5)
    assert not watch.is_alive() and failing.returncode == 3


def test_the_run_throughput_is_the_sum_of_the_ranks_rates():
    class TwoRanks:  # every rank measured the same rate
        def reduce(self, tensor, reduce_op):
            assert reduce_op == "sum"
            return tensor * 2

    throughput = Throughput()
    throughput.tokens, throughput.seconds = 300, 2.0
    assert throughput.tokens_per_s == 150.0
    throughput.on_train_end(SimpleNamespace(strategy=TwoRanks()), SimpleNamespace(device=torch.device("cpu")))
    assert throughput.tokens_per_s == 300.0
    assert throughput.final_metrics() == {"train/tokens_per_s": 300.0}


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp_run")
    proc = run_cli(tmp, *FAST, *DDP, "logger=wandb", "quiet=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp, proc


def test_a_2_process_run_writes_one_complete_results_json(ddp_run):
    tmp, _ = ddp_run
    result = results_of(tmp)
    assert result["status"] == "completed" and result["error"] is None
    assert result["choices"]["trainer"] == "ddp"
    assert result["metrics"]["train/world_size"] == 2.0
    assert {"test/bleu", "val/bleu", "train/tokens_per_s", "test/aer"} <= set(result["metrics"])
    assert (tmp / "run" / "checkpoints" / "best.ckpt").is_file()
    assert len((tmp / "run" / "hyp" / "test.txt").read_text().splitlines()) == 40


def test_a_2_process_run_makes_one_finished_wandb_run_holding_the_config(ddp_run):
    tmp, _ = ddp_run
    [wandb_dir] = (tmp / "run" / "wandb").glob("offline-run-*")
    logged = read_run(wandb_dir, wait=30)
    assert logged["exit_code"] == 0
    assert logged["config"]["choices"]["trainer"] == "ddp" and logged["config"]["trainer"]["devices"] == 2


def test_the_other_rank_creates_no_folder_writes_no_file_and_prints_no_report(ddp_run):
    tmp, proc = ddp_run
    assert [p.name for p in tmp.iterdir()] == ["run"]  # no outputs/<date>/<time> from rank 1
    assert not [p for p in (tmp / "run").rglob("*") if "ddp_process" in p.name]  # no rank-1 Hydra log
    assert proc.stdout.count("results: ") == 1


@pytest.mark.slow
def test_a_2_job_ddp_multirun_gives_two_job_dirs_each_with_one_result_and_one_wandb_run(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.cli.train", tmp_path, "-m", f"hydra.sweep.dir={sweep}", *FAST, *DDP, "seed=0,1"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["sweep"]  # rank 1 re-ran no sweep elsewhere
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "1", "multirun.yaml", "sweep.json"]
    for job in ("0", "1"):
        result = read_results(sweep / job)
        assert result["status"] == "completed" and result["seed"] == int(job)
        assert result["metrics"]["train/world_size"] == 2.0
        [wandb_dir] = (sweep / job / "wandb").glob("offline-run-*")
        logged = read_run(wandb_dir, wait=30)
        assert logged["config"]["seed"] == int(job) and logged["exit_code"] == 0


@pytest.mark.slow
def test_a_failing_ddp_job_is_recorded_and_the_sweep_goes_on(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_module(
        "attnlab.cli.train", tmp_path, "-m", f"hydra.sweep.dir={sweep}", *FAST, *DDP, "optim.lr=1e30,2e-3"
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("attnlab-train: error: 1 of 2 jobs failed")
    bad, ok = read_results(sweep / "0"), read_results(sweep / "1")
    assert bad["status"] == "failed" and "train/loss became" in bad["error"]
    assert ok["status"] == "completed" and ok["metrics"]["train/world_size"] == 2.0


@pytest.mark.slow
def test_ddp_jobs_side_by_side_under_joblib_start_their_ranks_as_attnlab_train(tmp_path):
    # in a joblib worker __main__ is loky's, so Lightning's own child command would not run attnlab
    sweep = tmp_path / "sweep"
    overrides = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"]
    proc = run_module("attnlab.cli.train", tmp_path, "-m", *overrides, *FAST, *DDP, "logger=none", "seed=0,1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["sweep"]
    for job in ("0", "1"):
        result = read_results(sweep / job)
        assert result["status"] == "completed" and result["metrics"]["train/world_size"] == 2.0
    assert "sync_dist=True" not in proc.stderr  # equal on every rank: the advice is silenced
