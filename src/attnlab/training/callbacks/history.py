"""Validation curves in the run directory: ``history.jsonl`` (``attnlab.rundir.RunDir.read_history``).

    {"step": 300, "epoch": 2, "val/bleu": 81.2, "val/chrf": 90.1, "val/loss": 0.61, "val/ppl": 1.84}

wandb and csv keep these too, but ``attnlab-compare`` reads run directories only, whatever the logger
(``logger=none`` included). Written by global rank 0 into the trainer's ``default_root_dir``; the sanity
check and the final re-validation of the best checkpoint are not part of the curve.
"""

from __future__ import annotations

import math

import lightning as L
from lightning.pytorch.trainer.states import TrainerFn

from attnlab.rundir import RunDir


class MetricsHistory(L.Callback):
    """Appends one line per validation while fitting.

    Args:
        prefixes: the logged metrics kept (``val/`` by default).
    """

    def __init__(self, prefixes: tuple[str, ...] = ("val/",)):
        self.prefixes = tuple(prefixes)

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            RunDir(trainer.default_root_dir).start_history()  # a resumed or repeated fit starts its own curve

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING or not trainer.is_global_zero:
            return
        row = {"step": trainer.global_step, "epoch": trainer.current_epoch}
        for key, value in sorted(trainer.callback_metrics.items()):
            if key.startswith(self.prefixes):
                value = float(value)
                row[key] = value if math.isfinite(value) else None
        RunDir(trainer.default_root_dir).append_history(row)
