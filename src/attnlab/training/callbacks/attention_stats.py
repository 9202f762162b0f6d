"""Head diagnostics at test: entropy and max weight per site × layer × head, and cross-attention AER.

The model runs teacher-forced on the references of one evaluation split while ``record_attention``
listens. Per (site, layer, head) it reports the mean attention entropy (nats) and mean maximum weight
over real query rows. Unscaled dot product at a large head dim saturates the softmax, and shows up
here as near-zero entropy. It also draws one layer × head entropy heat map per site, into
``<run dir>/attention/<split>/entropy_<site>.png``.

When the corpus carries gold word alignments (the synthetic task), each target word is linked to its
most-attended source word, per head and for the head-averaged map of each layer, and scored by
alignment error rate. Row t of cross-attention is the decoder step that predicts target word t.

Metrics (logged, and returned by ``trainer.test`` so they reach ``results.json``):
``test/entropy/<site>`` and ``test/max_weight/<site>`` (means over layers and heads), the same per head
as ``…/<site>/L<l>H<h>``, ``test/aer`` (the best head), ``test/aer/L<l>H<h>``, ``test/aer/L<l>avg``,
``test/aer_mean`` (mean over heads and layers). Under DDP only global rank 0 computes, logs and draws
them (every rank holds the same model and the whole split); the others skip it.
"""

from __future__ import annotations

from collections import defaultdict

import lightning as L
import torch

from attnlab.analysis.diagnostics import attention_entropy, cross_attention_aer, max_weight
from attnlab.analysis.images import table_image
from attnlab.attention.recording import record_attention
from attnlab.rundir import RunDir
from attnlab.training.callbacks.attention_maps import image_loggers


class AttentionStats(L.Callback):
    """Computes head diagnostics on ``split`` at the end of testing.

    Args:
        split: evaluation split to analyse (default ``test``).
    """

    def __init__(self, split: str = "test"):
        self.split = split
        self.metrics: dict[str, float] = {}

    @torch.no_grad()
    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        data = trainer.datamodule
        if not trainer.is_global_zero or data is None or self.split not in data.splits:
            return
        model, pad = pl_module.model, data.tokenizer.pad_id
        pairs = data.corpus.splits[self.split]
        with_gold = all(p.alignment is not None for p in pairs)
        sums: dict[tuple[str, int], dict[str, torch.Tensor | float]] = defaultdict(dict)
        cross_maps, gold = [], []
        for batch in data.eval_dataloader(self.split):
            src = batch["src"].to(pl_module.device)  # (b, s)
            tgt = batch["tgt"][:, :-1].to(pl_module.device)  # (b, t) decoder input
            with record_attention(model) as maps:
                model(src, tgt)
            for (site, layer), p in maps.items():
                rows = (src if site == "encoder" else tgt) != pad  # (b, t_q) real queries
                n = float(rows.sum())
                acc = sums[(site, layer)]
                acc["entropy"] = acc.get("entropy", 0.0) + attention_entropy(p, rows).cpu() * n
                acc["max_weight"] = acc.get("max_weight", 0.0) + max_weight(p, rows).cpu() * n
                acc["rows"] = acc.get("rows", 0.0) + n
            if with_gold:
                layers = sorted(layer for site, layer in maps if site == "cross")
                for row, index in enumerate(batch["index"].tolist()):
                    pair = pairs[index]
                    n_src, n_tgt = len(pair.src.split()), len(pair.tgt.split())
                    stacked = torch.stack([maps[("cross", lay)][row, :, :n_tgt, :n_src] for lay in layers])
                    cross_maps.append(stacked.cpu())  # (layers, h, n_tgt, n_src)
                    gold.append(pair.alignment)
        self.metrics = self._summarise(sums, cross_maps, gold, trainer)
        pl_module.log_dict(self.metrics)

    def _summarise(self, sums, cross_maps, gold, trainer) -> dict[str, float]:
        metrics: dict[str, float] = {}
        sites = sorted({site for site, _ in sums})
        for site in sites:
            layers = sorted(layer for s, layer in sums if s == site)
            for stat in ("entropy", "max_weight"):
                table = torch.stack([sums[(site, lay)][stat] / sums[(site, lay)]["rows"] for lay in layers])
                metrics[f"{self.split}/{stat}/{site}"] = float(table.mean())  # table: (layers, h)
                for lay in layers:
                    for h, value in enumerate(table[lay].tolist()):
                        metrics[f"{self.split}/{stat}/{site}/L{lay}H{h}"] = value
                if stat == "entropy":
                    self._draw(site, table, trainer)
        if cross_maps:
            aer = cross_attention_aer(cross_maps, gold)
            per_head = aer["per_head"]  # (layers, h)
            metrics[f"{self.split}/aer"] = float(aer["best"][2])
            metrics[f"{self.split}/aer_mean"] = float(per_head.mean())
            for lay in range(per_head.shape[0]):
                metrics[f"{self.split}/aer/L{lay}avg"] = float(aer["layer_avg"][lay])
                for h in range(per_head.shape[1]):
                    metrics[f"{self.split}/aer/L{lay}H{h}"] = float(per_head[lay, h])
        return metrics

    def _draw(self, site: str, table: torch.Tensor, trainer: L.Trainer) -> None:
        title = f"{self.split}: mean attention entropy (nats), {site}"
        folder = RunDir(trainer.default_root_dir).attention(self.split)
        path = table_image(table, title).save(folder / f"entropy_{site}.png")
        for logger in image_loggers(trainer):
            logger.log_image(
                key=f"attention/entropy/{site}", images=[str(path)], caption=[title], step=trainer.global_step
            )
