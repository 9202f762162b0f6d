"""AdamW with a linear warm-up and inverse-square-root decay (Vaswani et al., 2017, eq. 3):

    lr(step) = lr_peak · min(step / warmup, sqrt(warmup / step)),   step counted from 1

The ``optim.*`` keys travel as one ``OptimSettings``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OptimSettings:
    """How to optimise (``optim.*``).

    Args:
        lr: peak learning rate, reached after ``warmup_steps``.
        warmup_steps: linear warm-up steps before the inverse-square-root decay.
        betas, eps, weight_decay: AdamW settings.
        label_smoothing: ε of label-smoothed cross-entropy.
    """

    lr: float = 1e-3
    warmup_steps: int = 400
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.warmup_steps <= 0:
            raise ValueError(
                f"optim.lr ({self.lr}) and optim.warmup_steps ({self.warmup_steps}) must be positive"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"optim.label_smoothing must be in [0, 1), got {self.label_smoothing}")
        object.__setattr__(self, "betas", tuple(self.betas))


def inverse_sqrt(warmup_steps: int) -> Callable[[int], float]:
    """lr factor = min(step / warmup, sqrt(warmup / step)), step counted from 1."""

    def factor(step: int) -> float:
        step += 1
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return factor


def optimizer_and_schedule(
    params: Iterable[torch.nn.Parameter], settings: OptimSettings
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """AdamW over ``params`` and its per-step schedule."""
    opt = torch.optim.AdamW(
        params, lr=settings.lr, betas=settings.betas, eps=settings.eps, weight_decay=settings.weight_decay
    )
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, inverse_sqrt(settings.warmup_steps))
