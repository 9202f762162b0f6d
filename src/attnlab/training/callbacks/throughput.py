"""Training throughput: non-padding source + target tokens per second of training-step time.

Validation time is excluded. Logged as ``train/tokens_per_s`` every ``log_every_n_steps`` and kept
in ``tokens_per_s`` (whole-run average) for ``results.json``. Under DDP both are the job's throughput,
the sum of every rank's rate (each rank trains on its own batches), comparable with a one-device run.
"""

from __future__ import annotations

import time

import lightning as L
import torch


class Throughput(L.Callback):
    """Counts real (non-padding) tokens of every training batch and the time its step took."""

    def __init__(self):
        self.tokens, self.seconds = 0, 0.0
        self._window_tokens, self._window_seconds = 0, 0.0
        self._start = 0.0
        self._summed: float | None = None  # over ranks, once training has ended

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        elapsed = time.perf_counter() - self._start
        pad = pl_module.tokenizer.pad_id
        tokens = int((batch["src"] != pad).sum() + (batch["tgt"][:, 1:] != pad).sum())
        self.tokens += tokens
        self.seconds += elapsed
        self._window_tokens += tokens
        self._window_seconds += elapsed
        if trainer.global_step % trainer.log_every_n_steps == 0 and self._window_seconds > 0:
            rate = self._window_tokens / self._window_seconds
            pl_module.log("train/tokens_per_s", rate, sync_dist=True, reduce_fx="sum")  # every rank logs
            self._window_tokens, self._window_seconds = 0, 0.0

    def on_train_end(self, trainer, pl_module) -> None:
        local = torch.tensor(self.tokens / self.seconds if self.seconds else 0.0, device=pl_module.device)
        self._summed = float(trainer.strategy.reduce(local, reduce_op="sum"))  # every rank reaches this

    def final_metrics(self) -> dict[str, float]:
        """``train/tokens_per_s`` of the whole run ({} before any training step)."""
        return {} if self.tokens_per_s is None else {"train/tokens_per_s": self.tokens_per_s}

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens per second of the whole run, summed over DDP ranks once training has ended."""
        if self._summed is not None and self.seconds:
            return self._summed
        return self.tokens / self.seconds if self.seconds else None
