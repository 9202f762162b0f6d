"""Validation curves in the run directory: ``history.jsonl``, one JSON line per validation while fitting.

    {"step": 300, "epoch": 2, "val/bleu": 81.2, "val/chrf": 90.1, "val/loss": 0.61, "val/ppl": 1.84}

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

HISTORY = "history.jsonl"


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


def read_history(run_dir: str | Path) -> list[dict]:
    """The rows of ``<run_dir>/history.jsonl`` ([] when the run has none)."""
    path = Path(run_dir) / HISTORY
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
