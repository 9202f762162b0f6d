"""Validation curves in the run directory: ``history.jsonl`` (format and reader: ``attnlab.history``).

wandb and csv keep these too, but ``attnlab-compare`` reads run directories only, whatever the logger
(``logger=none`` included). Written by global rank 0; the sanity check and the final re-validation of
the best checkpoint are not part of the curve.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import lightning as L
from lightning.pytorch.trainer.states import TrainerFn


class MetricsHistory(L.Callback):
    def __init__(self, path: str | Path, prefixes: tuple[str, ...] = ("val/",)):
        self.path, self.prefixes = Path(path), prefixes

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")  # a resumed or repeated fit starts its own curve

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING or not trainer.is_global_zero:
            return
        row = {"step": trainer.global_step, "epoch": trainer.current_epoch}
        for key, value in sorted(trainer.callback_metrics.items()):
            if key.startswith(self.prefixes):
                value = float(value)
                row[key] = value if math.isfinite(value) else None
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
