"""One run end to end: build everything from the config, fit, test the best checkpoint (its validation
metrics are those recorded when it was saved), and leave the tokenizer, hypotheses and callback files
in the run directory.

``attnlab-train`` calls ``train`` once per Hydra job and writes ``results.json`` itself (it records
failures too); tests call it with a ``Job`` made by hand.

With ``trainer=ddp`` the job runs as several processes (``attnlab.training.distributed``): only global
rank 0 writes into the run directory (hypotheses, tokenizer, maps, the one wandb run); the other ranks
train silently.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attnlab.rundir import RunDir
from attnlab.training.build import build_corpus, build_datamodule, build_model, build_task, build_tokenizer
from attnlab.training.callbacks import build_callbacks, final_metrics
from attnlab.training.distributed import ddp_job
from attnlab.training.loggers import run_group, run_name
from attnlab.training.peak_memory import peak_memory_mb, reset_peak_memory

log = logging.getLogger("attnlab")
KNOWN_WARNINGS = (
    ".*does not have many workers.*",  # DataLoader workers stay at 0 on purpose
    r".*isinstance\(treespec, LeafSpec\).*",  # Lightning 2.6 on torch 2.13, about its own code
    # under DDP every rank evaluates whole splits: epoch-level metrics are equal on all ranks
    r".*It is recommended to use `self.log\(.*sync_dist=True\)` when logging on epoch level.*",
)
DDP_MODULE = "attnlab.cli.train"  # what the other DDP ranks run as ``python -m``


@dataclass(frozen=True)
class Job:
    """Where one run writes and what it was asked for.

    Args:
        run_dir: the run directory.
        choices: the config-group choices (``{"attention/score": "additive", …}``), for names and tags.
        sweep: the sweep folder's name when the run is a job of a multirun (its wandb group).
    """

    run_dir: Path
    choices: dict[str, str] = field(default_factory=dict)
    sweep: str | None = None


def _logger(cfg: DictConfig, job: Job):
    """The experiment logger ``cfg.logger`` describes (False for ``logger=none``)."""
    config = OmegaConf.to_container(cfg, resolve=True)
    config["choices"] = dict(job.choices)  # wandb: group by / parallel coordinates on choices.posenc, …
    tags = list(cfg.logger.get("tags") or []) + [f"{k}={v}" for k, v in sorted(job.choices.items())]
    group = run_group(cfg.logger.get("group"), job.choices, job.sweep)
    return instantiate(cfg.logger, group=group, tags=tags)(
        save_dir=job.run_dir,
        name=run_name(job.choices, cfg.model.num_heads, cfg.seed),
        config=config,
        quiet=cfg.quiet,
    )


def ignore_known_warnings() -> None:
    """Filters the ``KNOWN_WARNINGS``. Called in every job: a joblib worker receives the job function by
    value, so import-time code of the entry module never runs there."""
    for pattern in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", pattern)


def train(cfg: DictConfig, job: Job) -> tuple[dict[str, float], str | None]:
    """Builds everything from ``cfg``, trains and evaluates; returns (metrics, BLEU signature)."""
    import lightning as L

    ignore_known_warnings()
    if cfg.quiet:  # Lightning's info lines (devices, tips, stop reasons) too
        for name in ("lightning.pytorch", "lightning.fabric"):
            logging.getLogger(name).setLevel(logging.WARNING)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    reset_peak_memory()  # this job's peak, not the sweep process's
    run_dir = RunDir(job.run_dir)
    corpus = build_corpus(cfg.data)
    tokenizer = build_tokenizer(cfg.data, corpus)
    data = build_datamodule(cfg.data, corpus, tokenizer, cfg.seed)
    model = build_model(cfg, tokenizer.vocab_size, tokenizer.pad_id)
    task = build_task(cfg, model, tokenizer, corpus)
    callbacks = build_callbacks(cfg.callbacks)
    trainer = instantiate(
        cfg.trainer,
        logger=False,  # rank 0's logger is attached below: other ranks start no wandb run
        callbacks=callbacks,
        default_root_dir=str(run_dir.path),
        enable_progress_bar=not cfg.quiet,
    )
    logger = None
    if trainer.is_global_zero:  # the strategy knows the rank once the Trainer exists
        tokenizer.save(run_dir.tokenizer)  # for later evaluation: attnlab.data.tokenizers.load_tokenizer
        logger = _logger(cfg, job)
        trainer.loggers = [logger] if logger else []
    with ddp_job(trainer, module=DDP_MODULE):  # DDP ranks start and end with this job
        start = time.perf_counter()
        trainer.fit(task, datamodule=data)
        wall = time.perf_counter() - start
        checkpoint = trainer.checkpoint_callback
        ckpt = "best" if checkpoint is not None and checkpoint.best_model_path else None
        metrics = dict(getattr(checkpoint, "best_val_metrics", None) or {})  # kept when it was saved
        kept = getattr(checkpoint, "best_val_hypotheses", None)
        if metrics and kept is not None:
            task.hypotheses["valid"] = kept  # hyp/valid.txt of the best checkpoint, not the last validation
        else:  # no best checkpoint, or a checkpoint callback that does not keep them
            metrics = dict(trainer.validate(task, datamodule=data, ckpt_path=ckpt, verbose=False)[0])
        for split_metrics in trainer.test(task, datamodule=data, ckpt_path=ckpt, verbose=False):
            metrics.update(split_metrics)
    if not trainer.is_global_zero:
        return metrics, task.bleu_signature
    metrics.update(final_metrics(callbacks))  # train/tokens_per_s (summed over ranks), head pruning
    for split, hyps in task.hypotheses.items():
        pairs = corpus.splits[split]
        if len(pairs) != len(hyps):  # trainer.fast_dev_run or limit_test_batches: lines would not match
            log.warning("hyp/%s.txt not written: %d of %d sentences decoded", split, len(hyps), len(pairs))
            continue
        run_dir.write_hypotheses(split, hyps, [p.src for p in pairs], [p.tgt for p in pairs])
    metrics.update(
        {
            "params": float(sum(p.numel() for p in model.parameters() if p.requires_grad)),
            "peak_mem_mb": peak_memory_mb(),  # of this job, in this process (rank 0)
            "wall_s": wall,
            "train/world_size": float(trainer.world_size),  # DDP processes; 1 on one device
            "train/padding_fraction": data.train_padding_fraction,
        }
    )
    if logger:
        logger.log_metrics({k: v for k, v in metrics.items() if "/" not in k or k.startswith("train/")})
    return metrics, task.bleu_signature
