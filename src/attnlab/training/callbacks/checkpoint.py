"""Checkpoints in the run directory: ``<run dir>/checkpoints/best.ckpt`` (by val BLEU) and ``last.ckpt``.

Lightning's ``ModelCheckpoint`` puts checkpoints under the first logger's folder when it has no
``dirpath``; this one puts them in the run directory whatever the logger, where ``attnlab-eval`` and
later tools look for them (``attnlab.rundir.RunDir.checkpoints``).

It also keeps the ``val/*`` metrics of the validation that made the best checkpoint
(``best_val_metrics``): evaluation is deterministic, so these are what validating ``best.ckpt`` again
would give, and the run reports them instead of decoding the validation set a second time.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

from attnlab.rundir import RunDir


class RunCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose default ``dirpath`` is ``<trainer.default_root_dir>/checkpoints``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.best_val_metrics: dict[str, float] = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = str(RunDir(trainer.default_root_dir).checkpoints)
        super().setup(trainer, pl_module, stage)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        before = self.best_model_score
        super().on_validation_end(trainer, pl_module)
        if self.best_model_score is not before and not trainer.sanity_checking:  # a new best was saved
            metrics = trainer.callback_metrics
            self.best_val_metrics = {k: float(v) for k, v in metrics.items() if k.startswith("val/")}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "best_val_metrics": dict(self.best_val_metrics)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.best_val_metrics = dict(state_dict.get("best_val_metrics", {}))
