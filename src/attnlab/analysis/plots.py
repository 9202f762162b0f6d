"""Attention heat maps as matplotlib figures, small enough to log to wandb on every validation.

Rendering uses the non-interactive "Agg" backend, so figures work on headless machines; nothing here
calls ``plt.show``. ``save_figure`` closes what it saves.

Shapes: l layers, h heads, t_q queries, t_k keys.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

if TYPE_CHECKING:
    from torch import Tensor

PANEL_INCHES = 2.2
MAX_COLUMNS = 4
DPI = 100
TOKEN_FONTSIZE = 6


def attention_figure(p: Tensor, x_tokens: list[str], y_tokens: list[str], title: str) -> Figure:
    """One heat map per head of p_ij = attention of query i to key j, with a shared 0..1 colorbar.

    Args:
        p: (h, t_q, t_k) attention probabilities of one sentence, padding already removed.
        x_tokens: the t_k key tokens, along the x axis (labels rotated).
        y_tokens: the t_q query tokens, down the y axis.
        title: the figure's suptitle.

    Returns:
        A figure with panels "head 0" … "head h-1" in a grid of at most 4 columns.

    Raises:
        ValueError: if ``p`` is not 3-D or the token counts do not match its shape.
    """
    if p.dim() != 3:
        raise ValueError(f"attention_figure needs p of shape (h, t_q, t_k), got {tuple(p.shape)}")
    h, t_q, t_k = p.shape
    if len(x_tokens) != t_k:
        raise ValueError(f"attention_figure got {len(x_tokens)} x_tokens (keys) but p has t_k = {t_k}")
    if len(y_tokens) != t_q:
        raise ValueError(f"attention_figure got {len(y_tokens)} y_tokens (queries) but p has t_q = {t_q}")
    values = p.detach().float().cpu().numpy()  # (h, t_q, t_k)
    ncols = min(h, MAX_COLUMNS)
    nrows = math.ceil(h / ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(PANEL_INCHES * ncols + 0.8, PANEL_INCHES * nrows + 0.5),
        squeeze=False,
        layout="constrained",
    )
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.set_axis_off()
            continue
        image = ax.imshow(
            values[i], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto", interpolation="nearest"
        )
        ax.set_title(f"head {i}", fontsize=8)
        ax.set_xticks(range(t_k), labels=x_tokens, rotation=90, fontsize=TOKEN_FONTSIZE)
        ax.set_yticks(range(t_q), labels=y_tokens, fontsize=TOKEN_FONTSIZE)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    fig.suptitle(title, fontsize=9)
    return fig


def heatmap_figure(
    values: Tensor, title: str, row_label: str = "layer", col_label: str = "head", fmt: str = ".2f"
) -> Figure:
    """An annotated heat map of a (rows, cols) table, e.g. attention entropy per layer × head.

    Args:
        values: (l, h) table of numbers.
        title: the axes title.
        row_label: y-axis label; rows are numbered from 0.
        col_label: x-axis label; columns are numbered from 0.
        fmt: format spec for each cell's annotation.

    Returns:
        A figure with one annotated heat map and its colorbar.

    Raises:
        ValueError: if ``values`` is not 2-D.
    """
    if values.dim() != 2:
        raise ValueError(f"heatmap_figure needs values of shape (rows, cols), got {tuple(values.shape)}")
    table = values.detach().float().cpu().numpy()  # (l, h)
    n_rows, n_cols = table.shape
    fig, ax = plt.subplots(
        figsize=(max(3.0, 0.6 * n_cols + 1.6), max(2.4, 0.45 * n_rows + 1.2)), layout="constrained"
    )
    image = ax.imshow(table, cmap="viridis", aspect="auto", interpolation="nearest")
    lo, hi = float(table.min()), float(table.max())
    middle = (lo + hi) / 2
    for r in range(n_rows):
        for c in range(n_cols):
            v = float(table[r, c])
            color = "black" if v > middle else "white"
            ax.text(c, r, format(v, fmt), ha="center", va="center", color=color, fontsize=7)
    ax.set_xticks(range(n_cols))
    ax.set_yticks(range(n_rows))
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax)
    return fig


def save_figure(fig: Figure, path: Path) -> Path:
    """Writes ``fig`` as a PNG at ``path`` (creating parent folders), closes it, and returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png")
    plt.close(fig)
    return path
