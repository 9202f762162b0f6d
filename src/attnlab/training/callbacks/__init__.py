"""Lightning callbacks: what a run observes and records besides training itself.

They are listed in ``conf/callbacks/default.yaml`` (one YAML each in ``conf/callbacks/``) and built by
``build_callbacks``; a new callback is a class here and a YAML there, with no edit to the training code.
A callback receives its own hyperparameters only: the run directory (``trainer.default_root_dir``), the
tokenizer and corpus (``trainer.datamodule``) and the decode settings (``pl_module.decode_settings``)
it reads from the trainer at ``setup``. One that contributes to ``results.json`` has
``final_metrics()`` (``ReportsMetrics``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf


@runtime_checkable
class ReportsMetrics(Protocol):
    def final_metrics(self) -> dict[str, float]:
        """Metrics for ``results.json``, once the run has ended."""


def build_callbacks(nodes: DictConfig | dict | None) -> list[L.Callback]:
    """Every entry of ``callbacks`` (a mapping of name to config) that has a ``_target_``, in order.

    An entry with ``enabled: false`` (how the ``diagnostics.*`` switches reach their callbacks) or set to
    null (``callbacks.attention_maps=null``) is skipped; ``enabled`` is not passed to the class.
    """
    out = []
    for node in (nodes or {}).values():
        if node is None:
            continue
        node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
        if not node.pop("enabled", True) or "_target_" not in node:
            continue
        out.append(instantiate(node))
    return out


def final_metrics(callbacks: list[L.Callback]) -> dict[str, float]:
    """What the callbacks contribute to ``results.json``."""
    metrics: dict[str, float] = {}
    for callback in callbacks:
        if isinstance(callback, ReportsMetrics):
            metrics.update(callback.final_metrics())
    return metrics
