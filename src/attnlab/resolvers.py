"""OmegaConf resolvers the configs use: ``${div:${model.d_model},16}`` (integer division).

Registered when ``attnlab`` is imported, so ``attnlab-train``, ``attnlab-eval`` and tests that compose
the configs all have them.
"""

from __future__ import annotations

from omegaconf import OmegaConf


def div(a: int, b: int) -> int:
    """``a // b`` for sizes that must divide exactly, e.g. a key size of d_model / 16."""
    a, b = int(a), int(b)
    if b <= 0 or a % b:
        raise ValueError(f"${{div:{a},{b}}}: {b} must be a positive divisor of {a}")
    return a // b


def register() -> None:
    OmegaConf.register_new_resolver("div", div, replace=True)
