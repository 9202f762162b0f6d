"""Experiment loggers: ``logger=wandb`` (default), ``csv`` or ``none``.

wandb runs offline unless told otherwise (``logger.mode``, ``WANDB_MODE``) or a key is configured;
online initialisation that cannot reach the server within ``init_timeout`` falls back to offline, so a
run never blocks. The offline run lives in ``<run dir>/wandb/offline-run-*``; ``wandb sync`` uploads it.
Under DDP (``trainer=ddp``) ``attnlab.training.run`` builds the logger on global rank 0 only, so a job
has one wandb run however many processes train it.

Runs are named ``<score>-<posenc>-h<heads>-s<seed>`` (``run_name``) and grouped by ``logger.group``, else
the experiment, else the sweep folder (``run_group``).
"""

from __future__ import annotations

import logging
import netrc
import os
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, WandbLogger

log = logging.getLogger(__name__)


def run_name(choices: dict[str, str], num_heads: int, seed: int) -> str:
    """e.g. ``scaled_dot-sinusoidal-h4-s0``."""
    return f"{choices.get('attention/score')}-{choices.get('posenc')}-h{num_heads}-s{seed}"


def run_group(group: str | None, choices: dict[str, str], sweep: str | None) -> str | None:
    """``group`` (``logger.group``) if set, else the experiment, else the sweep's folder name."""
    return group or choices.get("experiment") or sweep


def _has_wandb_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def resolve_wandb_mode(mode: str | None) -> str:
    """``mode`` if set, else ``WANDB_MODE``, else online with a key and offline without."""
    if mode:
        return mode
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    return "online" if _has_wandb_key() else "offline"


def wandb_logger(
    save_dir: str | Path,
    name: str,
    config: dict,
    project: str = "attnlab",
    entity: str | None = None,
    mode: str | None = None,
    group: str | None = None,
    tags: list[str] | None = None,
    init_timeout: float = 30.0,
    quiet: bool = False,
) -> WandbLogger:
    """A Lightning ``WandbLogger`` around a run started here (so the offline fallback is ours)."""
    import wandb

    mode = resolve_wandb_mode(mode)
    kwargs = dict(
        project=project,
        entity=entity,
        name=name,
        group=group,
        tags=list(tags or []),
        config=config,
        dir=str(save_dir),
        reinit="finish_previous",
    )
    settings = wandb.Settings(init_timeout=init_timeout, silent=quiet)
    try:
        run = wandb.init(mode=mode, settings=settings, **kwargs)
    except Exception as err:  # network or auth failure: never block a run on the dashboard
        if mode != "online":
            raise
        log.warning("wandb online init failed (%s); logging offline instead", str(err).splitlines()[0])
        run = wandb.init(mode="offline", settings=settings, **kwargs)
    return WandbLogger(experiment=run, save_dir=str(save_dir), log_model=False)


def csv_logger(
    save_dir: str | Path,
    name: str,
    config: dict,
    quiet: bool = False,
    group: str | None = None,
    tags: list[str] | None = None,
) -> CSVLogger:
    """Metrics as ``<run dir>/csv/metrics.csv``; the config as ``hparams.yaml`` beside it.

    ``group`` and ``tags`` are accepted for a uniform call and not used (results.json has the choices).
    """
    logger = CSVLogger(save_dir=str(save_dir), name="csv", version="")
    logger.log_hyperparams(config)
    return logger


def no_logger(
    save_dir: str | Path,
    name: str,
    config: dict,
    quiet: bool = False,
    group: str | None = None,
    tags: list[str] | None = None,
) -> bool:
    """``logger=none``: Lightning takes False as 'no logger'."""
    return False


def finish_wandb(failed: bool) -> None:
    """Closes the current wandb run (if any) so the next job of a sweep starts its own."""
    import sys

    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=1 if failed else 0)
