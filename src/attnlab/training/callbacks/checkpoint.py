"""Checkpoints in the run directory: ``<run dir>/checkpoints/best.ckpt`` (by val BLEU) and ``last.ckpt``.

Lightning's ``ModelCheckpoint`` puts checkpoints under the first logger's folder when it has no
``dirpath``; this one puts them in the run directory whatever the logger, where ``attnlab-eval`` and
later tools look for them (``attnlab.rundir.RunDir.checkpoints``).
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

from attnlab.rundir import RunDir


class RunCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose default ``dirpath`` is ``<trainer.default_root_dir>/checkpoints``."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = str(RunDir(trainer.default_root_dir).checkpoints)
        super().setup(trainer, pl_module, stage)
