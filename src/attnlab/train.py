"""``attnlab-train``: compose the config, build data, model and task, train, evaluate, write results.

    attnlab-train attention/score=scaled_dot posenc=sinusoidal model.num_heads=8 seed=1

Every run leaves ``results.json`` in its Hydra run directory (completed or failed), hypotheses in
``hyp/``, checkpoints in ``checkpoints/`` (last and best on val BLEU) and, with ``logger=wandb``, an
offline wandb run in ``wandb/``. Bad configuration stops before training with a one-line error.

With ``trainer=ddp`` the job runs as several processes (``attnlab.distributed``): only global rank 0
writes into the run directory (results, hypotheses, tokenizer, maps, the one wandb run); the other
ranks train silently and record only their own failure.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attnlab.distributed import ddp_job, global_rank, writes_results
from attnlab.errors import one_line, run_cli
from attnlab.history import HISTORY
from attnlab.loggers import finish_wandb
from attnlab.peak_memory import peak_memory_mb, reset_peak_memory
from attnlab.results import write_results

log = logging.getLogger("attnlab")
CONF_DIR = next(
    str(p) for p in (Path(__file__).parent / "conf", Path(__file__).parents[2] / "conf") if p.is_dir()
)


def ignore_known_warnings() -> None:
    """Lightning 2.6 on torch 2.13 warns about its own LeafSpec use; DataLoader workers stay at 0 on
    purpose; under DDP every rank evaluates whole splits, so epoch-level metrics are equal on all ranks
    and need no ``sync_dist``. Called at import and again in each job: a joblib worker receives ``main``
    by value when ``attnlab.train`` is ``__main__``, so this module's import-time code never runs there."""
    for pattern in (
        ".*does not have many workers.*",
        r".*isinstance\(treespec, LeafSpec\).*",
        r".*It is recommended to use `self.log\(.*sync_dist=True\)` when logging on epoch level.*",
    ):
        warnings.filterwarnings("ignore", pattern)


ignore_known_warnings()


def run_name(choices: dict[str, str], cfg: DictConfig) -> str:
    """e.g. ``scaled_dot-sinusoidal-h4-s0``."""
    return f"{choices.get('attention/score')}-{choices.get('posenc')}-h{cfg.model.num_heads}-s{cfg.seed}"


def build_model(cfg: DictConfig, vocab_size: int, pad_id: int):
    """The ``Seq2Seq`` model that ``cfg`` describes (model sizes, score, mask, posenc, sites)."""
    return instantiate(
        cfg.model,
        vocab_size=vocab_size,
        pad_id=pad_id,
        score=instantiate(cfg.attention.score),
        mask_pattern=instantiate(cfg.attention.mask),
        posenc=instantiate(cfg.posenc),
        score_sites=list(cfg.attention.score_sites),
        mask_sites=list(cfg.attention.mask_sites),
        padding_mask=cfg.attention.padding_mask,
    )


def run_group(cfg: DictConfig, choices: dict[str, str]) -> str | None:
    """wandb group: ``logger.group`` if set, else the experiment, else the sweep's folder name."""
    if cfg.logger.get("group"):
        return cfg.logger.group
    if choices.get("experiment"):
        return choices["experiment"]
    hc = HydraConfig.get()
    return Path(hc.sweep.dir).name if hc.mode == RunMode.MULTIRUN else None


def train(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> tuple[dict[str, float], str]:
    """Builds everything from ``cfg``, trains and evaluates; returns (metrics, BLEU signature)."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint, RichProgressBar

    from attnlab.callbacks.attention_maps import AttentionMaps, default_probes
    from attnlab.callbacks.attention_stats import AttentionStats
    from attnlab.callbacks.head_pruning import HeadPruning
    from attnlab.callbacks.history import MetricsHistory
    from attnlab.callbacks.throughput import Throughput
    from attnlab.data.datamodule import TranslationDataModule
    from attnlab.data.length_split import split_by_length
    from attnlab.task import TranslationTask

    if cfg.quiet:  # Lightning's info lines (devices, tips, stop reasons) too
        for name in ("lightning.pytorch", "lightning.fabric"):
            logging.getLogger(name).setLevel(logging.WARNING)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    reset_peak_memory()  # this job's peak, not the sweep process's
    corpus = instantiate(cfg.data.corpus)
    if cfg.data.get("max_train_words") is not None:  # train short, test long (length extrapolation)
        corpus = split_by_length(corpus, cfg.data.max_train_words)
    train_pairs = corpus.splits["train"]
    tokenizer = instantiate(cfg.data.tokenizer)([p.src for p in train_pairs] + [p.tgt for p in train_pairs])
    max_tokens = cfg.data.get("max_tokens")
    data = TranslationDataModule(
        corpus, tokenizer, cfg.data.batch_size, cfg.data.eval_batch_size, max_tokens, seed=cfg.seed
    )
    model = build_model(cfg, tokenizer.vocab_size, tokenizer.pad_id)
    hparams = {**OmegaConf.to_container(cfg.optim, resolve=True), **OmegaConf.to_container(cfg.decode)}
    task = TranslationTask(model, tokenizer, corpus.eval_splits, **hparams)
    throughput = Throughput(tokenizer.pad_id)
    checkpoint = ModelCheckpoint(
        dirpath=run_dir / "checkpoints",
        filename="best",
        monitor="val/bleu",
        mode="max",
        save_last=True,
        save_top_k=1,
        auto_insert_metric_name=False,
    )
    callbacks = [checkpoint, throughput, MetricsHistory(run_dir / HISTORY)]
    callbacks += [] if cfg.quiet else [RichProgressBar()]
    diag = cfg.diagnostics
    if diag.attention_maps:
        probes = list(diag.probes) if diag.probes else default_probes(corpus.splits["valid"], diag.num_probes)
        callbacks.append(
            AttentionMaps(
                run_dir / "attention",
                tokenizer,
                probes,
                diag.every_n_val_epochs,
                cfg.decode.max_len_ratio,
                cfg.decode.max_len_offset,
            )
        )
    if diag.attention_stats:
        callbacks.append(AttentionStats(run_dir / "attention", split="test"))
    head_pruning = None
    if diag.head_pruning:  # after the test metrics: BLEU with the least important heads gated off
        head_pruning = HeadPruning(
            run_dir, list(diag.prune_fractions), split="test", importance_batches=diag.importance_batches
        )
        callbacks.append(head_pruning)
    trainer = instantiate(
        cfg.trainer,
        logger=False,  # rank 0's logger is attached below: other ranks start no wandb run
        callbacks=callbacks,
        default_root_dir=str(run_dir),
        enable_progress_bar=not cfg.quiet,
    )
    logger = None
    if trainer.is_global_zero:  # the strategy knows the rank once the Trainer exists
        tokenizer.save(run_dir / "tokenizer")  # for later evaluation: attnlab.data.tokenizer.load_tokenizer
        config = OmegaConf.to_container(cfg, resolve=True)
        config["choices"] = dict(choices)  # wandb: group by / parallel coordinates on choices.posenc, …
        tags = list(cfg.logger.get("tags") or []) + [f"{k}={v}" for k, v in sorted(choices.items())]
        logger = instantiate(cfg.logger, group=run_group(cfg, choices), tags=tags)(
            save_dir=run_dir, name=run_name(choices, cfg), config=config, quiet=cfg.quiet
        )
        trainer.loggers = [logger] if logger else []
    with ddp_job(trainer, module="attnlab.train"):  # DDP ranks start and end with this job
        start = time.perf_counter()
        trainer.fit(task, datamodule=data)
        wall = time.perf_counter() - start
        ckpt = "best" if checkpoint.best_model_path else None
        metrics = dict(trainer.validate(task, datamodule=data, ckpt_path=ckpt, verbose=False)[0])
        for split_metrics in trainer.test(task, datamodule=data, ckpt_path=ckpt, verbose=False):
            metrics.update(split_metrics)
    if not trainer.is_global_zero:
        return metrics, task.bleu_signature
    if head_pruning is not None:
        metrics.update(head_pruning.metrics)  # test/bleu_pruned_<pct>; head_importance.json in run_dir
    write_hypotheses(run_dir / "hyp", task.hypotheses, corpus.splits)
    metrics.update(
        {
            "params": float(sum(p.numel() for p in model.parameters() if p.requires_grad)),
            "peak_mem_mb": peak_memory_mb(),  # of this job, in this process (rank 0)
            "wall_s": wall,
            "train/world_size": float(trainer.world_size),  # DDP processes; 1 on one device
        }
    )
    metrics["train/padding_fraction"] = data.train_padding_fraction
    if throughput.tokens_per_s is not None:
        metrics["train/tokens_per_s"] = throughput.tokens_per_s  # summed over ranks
    if logger:
        logger.log_metrics({k: v for k, v in metrics.items() if "/" not in k or k.startswith("train/")})
    return metrics, task.bleu_signature


def write_hypotheses(hyp_dir: Path, hypotheses: dict[str, list[str]], splits: dict) -> None:
    """``<split>.txt`` (detokenised output) with ``<split>.src.txt`` and ``<split>.ref.txt`` beside it,
    line for line, so significance tests and length buckets need nothing but the run directory.

    A split decoded only in part (``trainer.fast_dev_run``, ``trainer.limit_test_batches``) is not
    written: its lines could not be matched to the sentences."""
    hyp_dir.mkdir(exist_ok=True)
    for split, hyps in hypotheses.items():
        pairs = splits[split]
        if len(pairs) != len(hyps):
            log.warning("hyp/%s.txt not written: %d of %d sentences decoded", split, len(hyps), len(pairs))
            continue
        for suffix, lines in (
            ("txt", hyps),
            ("src.txt", [p.src for p in pairs]),
            ("ref.txt", [p.tgt for p in pairs]),
        ):
            (hyp_dir / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines))


def report(metrics: dict[str, float], run_dir: Path) -> None:
    keys = [
        "test/bleu",
        "test/chrf",
        "test_long/bleu",
        "test_long/chrf",
        "val/bleu",
        "val/loss",
        "test/aer",
        "test/entropy/cross",
        "test/decode_tokens_per_s",
        "test/bleu_pruned_40",
        "train/tokens_per_s",
        "train/padding_fraction",
        "train/world_size",
        "params",
        "peak_mem_mb",
        "wall_s",
    ]
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="attnlab run")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for k in keys:
            if k in metrics:
                table.add_row(k, f"{metrics[k]:,.2f}")
        Console().print(table)
    except ImportError:  # pragma: no cover - rich is a dependency; plain text as a fallback
        print("\n".join(f"{k}: {metrics[k]:.2f}" for k in keys if k in metrics))
    print(f"run dir: {run_dir}\nresults: {run_dir / 'results.json'}")


@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    ignore_known_warnings()
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra") and v is not None}
    status, error, metrics, signature = "failed", None, {}, None
    started = time.time()
    try:
        metrics, signature = train(cfg, run_dir, choices)
        status = "completed"
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then reported in one line
        error = one_line(err)
        log.debug("run failed", exc_info=True)
    finally:
        finish_wandb(failed=status != "completed")
        rank = global_rank()
        if rank and error:
            error = f"rank {rank}: {error}"
        if writes_results(rank, status == "failed", run_dir, since=started):
            write_results(
                run_dir, status, error, choices, list(hc.overrides.task), cfg.seed, metrics, signature
            )
    if status == "failed":
        if hc.mode == RunMode.MULTIRUN:
            log.error("job %s failed: %s", hc.job.num, error)
            return None
        # exit here, not by raising: Hydra would print its own extra line for an exception
        print(f"attnlab-train: error: {error} (run dir: {run_dir})", file=sys.stderr)
        sys.exit(1)
    if rank:  # another DDP rank of this job: rank 0 reports
        return None
    if not cfg.quiet:
        report(metrics, run_dir)
    return metrics.get("val/bleu")


def cli() -> None:
    """Console entry point ``attnlab-train``: errors become one line on stderr (exit 1 or 2)."""
    from attnlab.sweep import raise_if_failed

    def main_then_sweep_status() -> None:
        main()
        raise_if_failed()  # a multirun with failed jobs exits non-zero (see attnlab.sweep)

    run_cli(main_then_sweep_status, "attnlab-train")


if __name__ == "__main__":
    cli()
