"""Validation curves in the run directory: ``history.jsonl`` (``attnlab.rundir.RunDir.read_history``).

    {"step": 300, "epoch": 2, "train_s": 41.3, "elapsed_s": 47.9, "val/bleu": 81.2, "val/chrf": 90.1, …}

``train_s`` is the wall time spent training up to this validation, the validations before it left out
(time to quality: what the model cost to get here); ``elapsed_s`` is the wall time since fitting started,
validations included (what the user waited). wandb and csv keep the metrics too, but ``attnlab-compare``
reads run directories only, whatever the logger (``logger=none`` included). Written by global rank 0
into the trainer's ``default_root_dir``; the sanity check and the final re-validation of the best
checkpoint (when the run needs one) are not part of the curve.
"""

from __future__ import annotations

import math
import time

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
        self._fit_start = self._validation_start = None
        self._validation_s = self._train_s = 0.0  # this fit's validations so far; its training until now

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._fit_start, self._validation_s = time.perf_counter(), 0.0
        if trainer.is_global_zero:
            RunDir(trainer.default_root_dir).start_history()  # a resumed or repeated fit starts its own curve

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_start = time.perf_counter()
        if self._fit_start is not None:
            self._train_s = self._validation_start - self._fit_start - self._validation_s

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        now = time.perf_counter()
        if self._validation_start is not None:
            self._validation_s += now - self._validation_start
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING or not trainer.is_global_zero:
            return
        row = {
            "step": trainer.global_step,
            "epoch": trainer.current_epoch,
            "train_s": round(self._train_s, 3),
            "elapsed_s": round(now - self._fit_start, 3),
        }
        for key, value in sorted(trainer.callback_metrics.items()):
            if key.startswith(self.prefixes):
                value = float(value)
                row[key] = value if math.isfinite(value) else None
        RunDir(trainer.default_root_dir).append_history(row)
