"""TranslationTask: label-smoothed cross-entropy, AdamW with inverse-sqrt warm-up, greedy or beam evaluation.

Metrics (``stage/name``): ``train/loss``, ``train/lr``; ``val/loss`` and ``val/ppl`` (token-level NLL
without smoothing), ``val/bleu``, ``val/chrf``; at test, ``<split>/bleu`` and ``<split>/chrf`` for every
evaluation split (``test``, ``test_long``). BLEU and chrF are sacreBLEU's on detokenised text; the
signature is kept in ``bleu_signature``. Test hypotheses are kept in ``hypotheses`` for the caller
to write; the task itself writes no files.

Decoding speed at test, per evaluation split (what multi-query and grouped-query attention are for,
Shazeer 2019; Ainslie et al. 2023):

    <split>/decode_tokens_per_s = generated tokens / seconds inside ``decode_batch``
    <split>/decode_ms_per_sentence = 1000 × seconds inside ``decode_batch`` / sentences

A sentence's generated tokens are its output up to and including <eos> (beam search: the returned
hypothesis, not every beam). Time is ``time.perf_counter`` around the decode call only (CUDA is
synchronised before and after on a GPU), so detokenising and scoring are left out; the first batch's
warm-up is included. Wall time depends on the machine and its load: compare speeds measured on one
machine, with the same ``data.eval_batch_size`` and ``decode.*`` settings.

``translate(batches)`` decodes and detokenises any batches the way the test does, and ``corpus_scores``
scores them, without touching the metrics or hypotheses the task keeps (head pruning uses them).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import asdict

import lightning as L
import torch
import torch.nn.functional as F
from sacrebleu.metrics import BLEU, CHRF

from attnlab.data.tokenizers.base import Tokenizer
from attnlab.model.transformer import Seq2Seq
from attnlab.training.decode import DecodeSettings, decode_batch
from attnlab.training.optim import OptimSettings, optimizer_and_schedule


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def _accumulator() -> dict:
    """Decoded output of one split so far, with the time spent decoding it."""
    return {"index": [], "hyp": [], "ref": [], "nll": 0.0, "tokens": 0, "seconds": 0.0, "generated": 0}


def _in_corpus_order(acc: dict) -> tuple[list[str], list[str]]:
    order = sorted(range(len(acc["index"])), key=acc["index"].__getitem__)
    return [acc["hyp"][i] for i in order], [acc["ref"][i] for i in order]


def _output_lengths(out: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Tokens generated per row of out (b, t), <eos> included: up to the first <eos>, else the row."""
    is_eos = out == eos_id  # (b, t)
    first = is_eos.int().argmax(1) + 1  # (b,)
    return torch.where(is_eos.any(1), first, torch.full_like(first, out.size(1)))  # (b,)


class TranslationTask(L.LightningModule):
    """Trains and evaluates a ``Seq2Seq`` model.

    Args:
        model: the encoder–decoder model.
        tokenizer: encodes/decodes text; gives the special ids.
        eval_splits: names of the test dataloaders, in order.
        optim: optimiser, schedule and label smoothing (``optim.*``).
        decode: how validation and test decode (``decode.*``).
    """

    def __init__(
        self,
        model: Seq2Seq,
        tokenizer: Tokenizer,
        eval_splits: list[str],
        optim: OptimSettings = OptimSettings(),
        decode: DecodeSettings = DecodeSettings(),
    ):
        super().__init__()
        self.model, self.tokenizer, self.eval_splits = model, tokenizer, list(eval_splits)
        self.optim_settings, self.decode_settings = optim, decode
        # plain values in the checkpoint: ``optim`` and ``decode`` as dicts
        self.save_hyperparameters(
            {"optim": asdict(optim), "decode": asdict(decode), "eval_splits": eval_splits}
        )
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
        total, tokens = self.nll(batch, self.optim_settings.label_smoothing)
        loss = total / tokens
        if not torch.isfinite(loss):
            optim = self.optim_settings
            raise NonFiniteLossError(
                f"train/loss became {loss.item()} at step {self.global_step}: lower optim.lr "
                f"(now {optim.lr}) or raise optim.warmup_steps (now {optim.warmup_steps})"
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["src"].size(0))
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], batch_size=batch["src"].size(0))
        return loss

    def decode(self, src: torch.Tensor) -> torch.Tensor:
        """src (b, s) -> output ids (b, t) with the task's ``decode.*`` settings (``decode_batch``)."""
        return decode_batch(self.model, src, self.tokenizer.special_ids, self.decode_settings)

    def translate(self, batches: Iterable[dict]) -> tuple[list[str], list[str]]:
        """Decodes ``batches`` (as the datamodule makes them) as the test does.

        Returns:
            (hypotheses, references), detokenised, in corpus order (by ``batch["index"]``). The metrics,
            ``hypotheses`` and ``bleu_signature`` of the task are left as they are.
        """
        acc = _accumulator()
        for batch in batches:
            self._decode_into(acc, {**batch, "src": batch["src"].to(self.device)})
        return _in_corpus_order(acc)

    def corpus_scores(self, hyps: list[str], refs: list[str]) -> dict[str, float]:
        """sacreBLEU ``bleu`` and ``chrf`` of detokenised ``hyps`` against ``refs`` (one reference each)."""
        return {
            "bleu": self.bleu.corpus_score(hyps, [refs]).score,
            "chrf": self.chrf.corpus_score(hyps, [refs]).score,
        }

    def _decode_into(self, acc: dict, batch: dict) -> None:
        src = batch["src"]  # (b, s)
        if src.is_cuda:
            torch.cuda.synchronize(src.device)
        start = time.perf_counter()
        out = self.decode(src)  # (b, t)
        if src.is_cuda:
            torch.cuda.synchronize(src.device)
        acc["seconds"] += time.perf_counter() - start
        acc["generated"] += int(_output_lengths(out, self.tokenizer.eos_id).sum())
        acc["index"] += batch["index"].tolist()
        acc["hyp"] += [self.tokenizer.decode(row.tolist()) for row in out]
        acc["ref"] += batch["ref"]

    def _decode(self, batch: dict, split: str, with_loss: bool) -> None:
        acc = self._eval.setdefault(split, _accumulator())
        self._decode_into(acc, batch)
        if with_loss:
            nll, tokens = self.nll(batch, 0.0)
            acc["nll"] += float(nll)
            acc["tokens"] += tokens

    def _score(self, split: str, prefix: str, speed: bool = False) -> dict[str, float]:
        acc = self._eval.pop(split)
        hyps, refs = _in_corpus_order(acc)
        metrics = {f"{prefix}/{name}": value for name, value in self.corpus_scores(hyps, refs).items()}
        self.bleu_signature = str(self.bleu.get_signature())
        if acc["tokens"]:
            metrics[f"{prefix}/loss"] = acc["nll"] / acc["tokens"]
            metrics[f"{prefix}/ppl"] = math.exp(min(metrics[f"{prefix}/loss"], 50.0))
        if speed and acc["seconds"] > 0:
            metrics[f"{prefix}/decode_tokens_per_s"] = acc["generated"] / acc["seconds"]
            metrics[f"{prefix}/decode_ms_per_sentence"] = 1000.0 * acc["seconds"] / len(hyps)
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
                self.log_dict(self._score(split, split, speed=True))

    def configure_optimizers(self):
        trainer = self._trainer
        total = trainer.max_steps if trainer is not None else None  # -1 when unbounded
        # Lightning's AMP plugin refuses gradient clipping with a fused optimizer, bf16-mixed included
        amp = trainer is not None and ("mixed" in str(trainer.precision) or str(trainer.precision) == "16")
        opt, sched = optimizer_and_schedule(self.model.parameters(), self.optim_settings, total, fuse=not amp)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
