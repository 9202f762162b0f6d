"""Attention maps of probe sentences, every N validation epochs and once at test (JoeyNMT-style).

Each probe is translated greedily (with the task's length limits); the model is then run teacher-forced
on its own translation while ``record_attention`` listens, and for every (site, layer) one figure is
drawn with a panel per head, source / target tokens on the axes. Probes run one at a time, so there is
no padding to cut. Figures go to ``<run dir>/attention/<tag>/<site>_L<layer>_probe<i>.png`` (tag
``step000300`` or ``test``; the run dir is the trainer's ``default_root_dir``) and,
when the logger can take images (wandb), to ``attention/<site>/L<layer>`` at the global step with the
probe and its translation as captions. The model and the task know nothing about it; the tokenizer
and the default probes come from the trainer's datamodule at ``setup``. Under DDP only global rank 0
draws (the model is the same on every rank); the others skip it.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from attnlab.analysis.images import Drawing, attention_image, same_size
from attnlab.attention.recording import record_attention
from attnlab.data.corpus import Pair
from attnlab.rundir import RunDir
from attnlab.training.decode import greedy_decode

SITE_TITLES = {
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention",
    "cross": "cross-attention",
}


def default_probes(pairs: list[Pair], n: int = 3) -> list[str]:
    """``n`` source sentences of different lengths: shortest, longest and evenly spaced between."""
    if n <= 0 or not pairs:
        return []
    ordered = sorted((p.src for p in pairs), key=lambda s: (len(s.split()), s))
    picks = [round(i * (len(ordered) - 1) / max(n - 1, 1)) for i in range(n)]
    return list(dict.fromkeys(ordered[i] for i in picks))


def image_loggers(trainer: L.Trainer) -> list:
    """The trainer's loggers that accept images (``log_image``), e.g. wandb."""
    return [lg for lg in trainer.loggers if hasattr(lg, "log_image")]


class AttentionMaps(L.Callback):
    """Draws and logs per-head attention maps of fixed probe sentences.

    Args:
        every_n_val_epochs: draw after every n-th validation epoch (0 = only at test).
        probes: source sentences to translate and draw; None = ``num_probes`` validation sentences of
            different lengths (``default_probes``).
        num_probes: how many default probes.
    """

    def __init__(self, every_n_val_epochs: int = 1, probes: list[str] | None = None, num_probes: int = 2):
        if every_n_val_epochs < 0:
            raise ValueError(f"diagnostics.every_n_val_epochs must be >= 0, got {every_n_val_epochs}")
        self.every, self.probes, self.num_probes = every_n_val_epochs, probes, num_probes
        self.saved: list[Path] = []

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        data = trainer.datamodule
        if self.probes is None:
            self.probes = default_probes(data.corpus.splits["valid"], self.num_probes)
        self.probes = list(self.probes)
        self.tokenizer, self.run_dir = data.tokenizer, RunDir(trainer.default_root_dir)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not self.every or (trainer.current_epoch + 1) % self.every:
            return
        if trainer.is_global_zero:
            self.draw(trainer, pl_module, f"step{trainer.global_step:06d}")

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            self.draw(trainer, pl_module, "test")

    @torch.no_grad()
    def draw(self, trainer: L.Trainer, pl_module: L.LightningModule, tag: str) -> list[Path]:
        """Draws every probe at every (site, layer); returns the PNG paths."""
        model, tok = pl_module.model, self.tokenizer
        by_key: dict[tuple[str, int], list[tuple[Path, Drawing, str]]] = {}
        for i, sentence in enumerate(self.probes):
            src = torch.tensor([tok.encode(sentence) + [tok.eos_id]], device=pl_module.device)  # (1, s)
            hyp = greedy_decode(model, src, tok.special_ids, pl_module.decode_settings)[0].tolist()
            hyp = hyp[: hyp.index(tok.eos_id)] if tok.eos_id in hyp else hyp
            tgt = torch.tensor([[tok.bos_id] + hyp], device=pl_module.device)  # (1, t)
            with record_attention(model) as maps:
                model(src, tgt)
            src_tokens, tgt_tokens = tok.tokens(src[0].tolist()), tok.tokens(tgt[0].tolist())
            caption = f"{sentence} → {tok.decode(hyp)}"
            for (site, layer), p in sorted(maps.items()):
                x = src_tokens if site != "decoder" else tgt_tokens
                y = src_tokens if site == "encoder" else tgt_tokens
                title = f"{SITE_TITLES[site]}, layer {layer} — {tag}, probe {i}"
                drawing = attention_image(p[0].float().cpu(), x_tokens=x, y_tokens=y, title=title)
                path = drawing.save(self.run_dir.attention(tag) / f"{site}_L{layer}_probe{i}.png")
                by_key.setdefault((site, layer), []).append((path, drawing, caption))
        for logger in image_loggers(trainer):
            for (site, layer), items in by_key.items():
                logger.log_image(  # the probes differ in length: one size, or wandb warns and misdraws
                    key=f"attention/{site}/L{layer}",
                    images=same_size([d.image for _, d, _ in items]),
                    caption=[c for _, _, c in items],
                    step=trainer.global_step,
                )
        paths = [p for items in by_key.values() for p, _, _ in items]
        self.saved += paths
        return paths
