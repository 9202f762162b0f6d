"""Checkpoints in the run directory: ``<run dir>/checkpoints/best.ckpt`` (by val BLEU) and ``last.ckpt``.

Lightning's ``ModelCheckpoint`` puts checkpoints under the first logger's folder when it has no
``dirpath``; this one puts them in the run directory whatever the logger, where ``attnlab-eval`` and
later tools look for them (``attnlab.rundir.RunDir.checkpoints``).

It also keeps what the validation that made the best checkpoint gave: its ``val/*`` metrics
(``best_val_metrics``) and the task's validation hypotheses (``best_val_hypotheses``). Evaluation is
deterministic, so these are what validating ``best.ckpt`` again would give, and the run reports them
instead of decoding the validation set a second time. They live in memory only: a fit restored from a
checkpoint starts without them, and the run then validates ``best.ckpt`` as before.
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

from attnlab.rundir import RunDir


class RunCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose default ``dirpath`` is ``<trainer.default_root_dir>/checkpoints``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.best_val_metrics: dict[str, float] = {}
        self.best_val_hypotheses: list[str] | None = None

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
            self.best_val_hypotheses = list(getattr(pl_module, "hypotheses", {}).get("valid") or []) or None
