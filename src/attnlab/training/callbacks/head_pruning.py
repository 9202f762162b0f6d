"""BLEU as the least important heads are pruned (Michel et al., 2019, "Are Sixteen Heads Really Better
than One?"): I_h = E_x |∂L(x) / ∂ξ_h|, normalised per layer by its l2 norm, then heads gated off globally
in ascending order of importance.

At the end of testing (``on_test_end``), after the task has logged its own test metrics, global rank 0
decodes the whole split unsharded (other ranks do nothing):

1. importance of every head (encoder self, decoder self and cross-attention) from the teacher-forced,
   unsmoothed loss on ``importance_split`` (validation by default), with ``head_importance``, then
   ``normalise_by_layer``;
2. for each fraction p of ``fractions``, the round(p × N) least important heads of all N are pruned
   (gates set to 0, ``prune_heads``) and ``split`` is decoded with the task's own decode settings
   (``TranslationTask.translate``) and scored with sacreBLEU;
3. every gate gets its value back (all ones), so nothing after the callback sees a pruned model.

Pruning is global, as in the paper: a layer may lose all its heads; its attention sublayer then adds
a constant (the output projection's bias) and the residual connection carries the input on.

Metrics: ``<split>/bleu_pruned_<pct>`` (e.g. ``test/bleu_pruned_40``) and, when the first fraction is
0, ``<split>/bleu_kept_<pct>`` = BLEU pruned / BLEU unpruned for the others, sent to every logger and kept in
``final_metrics()`` for ``results.json``. ``<run dir>/head_importance.json`` holds the raw and normalised
importance per layer and head, the pruning order, and per fraction the heads pruned and BLEU. The
task's metrics and ``hypotheses`` are left untouched; in a one-process run ``<split>/bleu_pruned_0``
equals ``<split>/bleu`` (which Lightning hands on as float32).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence

import lightning as L
import torch

from attnlab.analysis.head_importance import (
    head_importance,
    heads_to_prune,
    normalise_by_layer,
    prune_heads,
    pruning_order,
)
from attnlab.rundir import RunDir

log = logging.getLogger("attnlab")
DEFAULT_FRACTIONS = (0.0, 0.2, 0.4, 0.6, 0.8)


def percent_label(fraction: float) -> str:
    """0.4 -> ``"40"``, 0.125 -> ``"12.5"``: the ``<pct>`` of ``bleu_pruned_<pct>``."""
    return f"{round(100 * fraction, 6):g}"


class HeadPruning(L.Callback):
    """Scores the test split with growing fractions of the least important heads pruned.

    Args:
        fractions: shares of all heads to prune, each in [0, 1].
        split: evaluation split to decode and score.
        importance_split: split whose teacher-forced loss gives the importance.
        importance_batches: use at most this many batches of ``importance_split`` (None = all).
    """

    def __init__(
        self,
        fractions: Sequence[float] = DEFAULT_FRACTIONS,
        split: str = "test",
        importance_split: str = "valid",
        importance_batches: int | None = None,
    ):
        fractions = [float(p) for p in fractions]
        if not fractions or any(not 0.0 <= p <= 1.0 for p in fractions):
            raise ValueError(f"diagnostics.prune_fractions must be fractions in [0, 1], got {fractions}")
        labels = [percent_label(p) for p in fractions]
        if len(set(labels)) != len(labels):
            raise ValueError(f"diagnostics.prune_fractions has repeated values: {fractions}")
        if importance_batches is not None and importance_batches <= 0:
            raise ValueError(
                f"diagnostics.importance_batches must be positive or null, got {importance_batches}"
            )
        self.fractions, self.split = fractions, split
        self.importance_split, self.importance_batches = importance_split, importance_batches
        self.metrics: dict[str, float] = {}

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        data = trainer.datamodule
        if not trainer.is_global_zero or data is None:
            return
        missing = {self.split, self.importance_split} - set(data.splits)
        if missing:
            log.warning("head pruning skipped: the data has no split %s", sorted(missing))
            return
        self.metrics = self.run(trainer, pl_module, data)
        for logger in trainer.loggers:
            logger.log_metrics(self.metrics, step=trainer.global_step)

    def final_metrics(self) -> dict[str, float]:
        """``<split>/bleu_pruned_<pct>`` and ``<split>/bleu_kept_<pct>`` ({} before the test has run)."""
        return dict(self.metrics)

    def run(self, trainer: L.Trainer, pl_module: L.LightningModule, data) -> dict[str, float]:
        """Importance, then BLEU per fraction; writes ``head_importance.json``; returns the metrics."""
        model = pl_module.model
        raw = self._importance(pl_module, data)
        importance = normalise_by_layer(raw)
        order = pruning_order(importance)
        rows, metrics = [], {}
        for fraction in self.fractions:
            heads = heads_to_prune(order, fraction)
            # decoded as test_step decodes: under the trainer's precision context (autocast if mixed)
            with prune_heads(model, heads), trainer.precision_plugin.forward_context(), torch.no_grad():
                hyps, refs = pl_module.translate(data.eval_dataloader(self.split))
            bleu = pl_module.corpus_scores(hyps, refs)["bleu"]
            metrics[f"{self.split}/bleu_pruned_{percent_label(fraction)}"] = bleu
            rows.append({"fraction": fraction, "heads_pruned": len(heads), "bleu": bleu, "pruned": heads})
        unpruned = rows[0]["bleu"] if rows and rows[0]["heads_pruned"] == 0 else None
        for row in rows[1:] if unpruned else []:  # the share of BLEU kept, as Michel et al. report it
            metrics[f"{self.split}/bleu_kept_{percent_label(row['fraction'])}"] = row["bleu"] / unpruned
        self._write(RunDir(trainer.default_root_dir), raw, importance, order, rows, pl_module)
        return metrics

    def _importance(self, pl_module: L.LightningModule, data) -> dict[str, torch.Tensor]:
        """Raw I_h per layer: name -> (h,) tensor.

        Taken in the model's own precision, without autocast (a float16 gradient could underflow).
        Lightning tests under inference mode, so gradients are switched back on here.
        """

        def loss(batch: dict) -> torch.Tensor:
            total, tokens = pl_module.nll(batch, 0.0)
            return total / max(tokens, 1)

        batches = _to(data.eval_dataloader(self.importance_split), pl_module.device, self.importance_batches)
        with torch.inference_mode(False), torch.enable_grad():
            importance = head_importance(pl_module.model, loss, batches)
        return {name: scores.float().cpu() for name, scores in importance.items()}

    def _write(self, run_dir: RunDir, raw, importance, order, rows, pl_module) -> None:
        run_dir.path.mkdir(parents=True, exist_ok=True)
        record = {
            "split": self.split,
            "importance_split": self.importance_split,
            "importance": "E|dL/d gate| per batch, divided by each layer's l2 norm (Michel et al., 2019)",
            "num_heads": len(order),
            "layers": {
                name: {"importance": importance[name].tolist(), "raw": raw[name].tolist()} for name in raw
            },
            "order": [[name, h] for name, h in order],
            "fractions": [{**row, "pruned": [[name, h] for name, h in row["pruned"]]} for row in rows],
            "sacrebleu": str(pl_module.bleu.get_signature()),
        }
        run_dir.head_importance.write_text(json.dumps(record, indent=1) + "\n")


def _to(loader, device: torch.device, limit: int | None = None) -> Iterator[dict]:
    """The batches of ``loader`` (at most ``limit``) with their tensors on ``device``."""
    for i, batch in enumerate(loader):
        if limit is not None and i >= limit:
            return
        yield {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
