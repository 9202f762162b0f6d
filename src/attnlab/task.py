"""TranslationTask: label-smoothed cross-entropy, Adam with inverse-sqrt warm-up, greedy or beam evaluation.

Metrics (``stage/name``): ``train/loss``, ``train/lr``; ``val/loss`` and ``val/ppl`` (token-level NLL
without smoothing), ``val/bleu``, ``val/chrf``; at test, ``<split>/bleu`` and ``<split>/chrf`` for every
evaluation split (``test``, ``test_long``). BLEU and chrF are sacreBLEU's on detokenised text; the
signature is kept in ``bleu_signature``. Test hypotheses are kept in ``hypotheses`` for the caller
to write; the task itself writes no files.
"""

from __future__ import annotations

import math

import lightning as L
import torch
import torch.nn.functional as F
from sacrebleu.metrics import BLEU, CHRF

from attnlab.decode import check_decode_settings, decode_batch
from attnlab.model.transformer import Seq2Seq


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def inverse_sqrt(warmup_steps: int):
    """lr factor = min(step / warmup, sqrt(warmup / step)), step counted from 1."""

    def factor(step: int) -> float:
        step += 1
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return factor


class TranslationTask(L.LightningModule):
    """Trains and evaluates a ``Seq2Seq`` model.

    Args:
        model: the encoder–decoder model.
        tokenizer: encodes/decodes text; gives ``pad_id``, ``bos_id``, ``eos_id``.
        eval_splits: names of the test dataloaders, in order.
        lr: peak learning rate, reached after ``warmup_steps``.
        warmup_steps: linear warm-up steps before inverse-square-root decay.
        betas, eps, weight_decay: Adam(W) settings.
        label_smoothing: epsilon of label-smoothed cross-entropy.
        max_len_ratio, max_len_offset: decoding limit per sentence (ratio x source length + offset).
        strategy: ``"greedy"`` or ``"beam"`` (beam search with the GNMT length penalty).
        beam_size: hypotheses kept per sentence by beam search.
        length_penalty: α of the length penalty ((5 + |Y|) / 6)^α; 0 = none.
        use_cache: decode with the key/value cache (same tokens, faster).
    """

    def __init__(
        self,
        model: Seq2Seq,
        tokenizer,
        eval_splits: list[str],
        lr: float = 1e-3,
        warmup_steps: int = 400,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9,
        weight_decay: float = 0.0,
        label_smoothing: float = 0.1,
        max_len_ratio: float = 1.5,
        max_len_offset: int = 10,
        strategy: str = "greedy",
        beam_size: int = 4,
        length_penalty: float = 0.6,
        use_cache: bool = True,
    ):
        super().__init__()
        if lr <= 0 or warmup_steps <= 0:
            raise ValueError(f"optim.lr ({lr}) and optim.warmup_steps ({warmup_steps}) must be positive")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"optim.label_smoothing must be in [0, 1), got {label_smoothing}")
        check_decode_settings(strategy, beam_size)
        self.model, self.tokenizer, self.eval_splits = model, tokenizer, list(eval_splits)
        self.save_hyperparameters(ignore=["model", "tokenizer"])
        self.bleu, self.chrf = BLEU(), CHRF()
        self.bleu_signature: str | None = None  # known once a corpus has been scored
        self.hypotheses: dict[str, list[str]] = {}
        self._eval: dict[str, dict] = {}

    def nll(self, batch: dict, smoothing: float) -> tuple[torch.Tensor, int]:
        src, tgt = batch["src"], batch["tgt"]
        logits = self.model(src, tgt[:, :-1])  # (b, t, V)
        gold = tgt[:, 1:]  # (b, t)
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            gold.flatten(),
            ignore_index=self.tokenizer.pad_id,
            label_smoothing=smoothing,
            reduction="sum",
        )
        return loss, int((gold != self.tokenizer.pad_id).sum())

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        total, tokens = self.nll(batch, self.hparams.label_smoothing)
        loss = total / tokens
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"train/loss became {loss.item()} at step {self.global_step}: lower optim.lr "
                f"(now {self.hparams.lr}) or raise optim.warmup_steps (now {self.hparams.warmup_steps})"
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["src"].size(0))
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], batch_size=batch["src"].size(0))
        return loss

    def _decode(self, batch: dict, split: str, with_loss: bool) -> None:
        hp, tok = self.hparams, self.tokenizer
        out = decode_batch(
            self.model,
            batch["src"],
            tok.bos_id,
            tok.eos_id,
            tok.pad_id,
            strategy=hp.strategy,
            beam_size=hp.beam_size,
            length_penalty=hp.length_penalty,
            max_len_ratio=hp.max_len_ratio,
            max_len_offset=hp.max_len_offset,
            use_cache=hp.use_cache,
        )
        acc = self._eval.setdefault(split, {"index": [], "hyp": [], "ref": [], "nll": 0.0, "tokens": 0})
        acc["index"] += batch["index"].tolist()
        acc["hyp"] += [self.tokenizer.decode(row.tolist()) for row in out]
        acc["ref"] += batch["ref"]
        if with_loss:
            nll, tokens = self.nll(batch, 0.0)
            acc["nll"] += float(nll)
            acc["tokens"] += tokens

    def _score(self, split: str, prefix: str) -> dict[str, float]:
        acc = self._eval.pop(split)
        order = sorted(range(len(acc["index"])), key=acc["index"].__getitem__)
        hyps, refs = [acc["hyp"][i] for i in order], [acc["ref"][i] for i in order]
        metrics = {
            f"{prefix}/bleu": self.bleu.corpus_score(hyps, [refs]).score,
            f"{prefix}/chrf": self.chrf.corpus_score(hyps, [refs]).score,
        }
        self.bleu_signature = str(self.bleu.get_signature())
        if acc["tokens"]:
            metrics[f"{prefix}/loss"] = acc["nll"] / acc["tokens"]
            metrics[f"{prefix}/ppl"] = math.exp(min(metrics[f"{prefix}/loss"], 50.0))
        self.hypotheses[split] = hyps
        return metrics

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._decode(batch, "valid", with_loss=True)

    def on_validation_epoch_end(self) -> None:
        if "valid" in self._eval:
            self.log_dict(self._score("valid", "val"), prog_bar=True)

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._decode(batch, self.eval_splits[dataloader_idx], with_loss=False)

    def on_test_epoch_end(self) -> None:
        for split in self.eval_splits:
            if split in self._eval:
                self.log_dict(self._score(split, split))

    def configure_optimizers(self):
        hp = self.hparams
        opt = torch.optim.AdamW(
            self.model.parameters(), lr=hp.lr, betas=tuple(hp.betas), eps=hp.eps, weight_decay=hp.weight_decay
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, inverse_sqrt(hp.warmup_steps))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
