"""Attention figures: one labelled panel per head, PNGs on disk, mismatches refused."""

import matplotlib.pyplot as plt
import pytest
import torch

from attnlab.analysis.plots import attention_figure, heatmap_figure, save_figure

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SOURCE = ["the", "cat", "sat", "</s>"]
TARGET = ["die", "Katze", "saß"]


def probs(h: int, t_q: int, t_k: int) -> torch.Tensor:
    return torch.softmax(torch.randn(h, t_q, t_k, generator=torch.Generator().manual_seed(0)), dim=-1)


def panels(fig) -> list:
    """The axes holding a heat map, i.e. with an image and not the colorbar."""
    colorbars = {im.colorbar.ax for ax in fig.axes for im in ax.images if im.colorbar is not None}
    return [ax for ax in fig.axes if ax.images and ax not in colorbars]


@pytest.mark.parametrize("heads", [1, 3, 6])
def test_attention_figure_has_one_titled_panel_per_head(heads):
    fig = attention_figure(probs(heads, 3, 4), SOURCE, TARGET, "layer 0 cross-attention")
    heat_maps = panels(fig)
    assert len(heat_maps) == heads
    assert [ax.get_title() for ax in heat_maps] == [f"head {i}" for i in range(heads)]
    assert fig.get_suptitle() == "layer 0 cross-attention"
    assert len(fig.axes) > heads  # the colorbar (and any unused grid cells) besides the panels
    plt.close(fig)


def test_attention_figure_labels_keys_on_x_and_queries_on_y():
    fig = attention_figure(probs(2, 3, 4), SOURCE, TARGET, "t")
    for ax in panels(fig):
        assert [label.get_text() for label in ax.get_xticklabels()] == SOURCE
        assert [label.get_text() for label in ax.get_yticklabels()] == TARGET
        assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close(fig)


def test_save_figure_writes_a_png_into_new_folders_and_closes_the_figure(tmp_path):
    fig = attention_figure(probs(2, 3, 4), SOURCE, TARGET, "t")
    path = save_figure(fig, tmp_path / "plots" / "epoch0" / "attn.png")
    assert path == tmp_path / "plots" / "epoch0" / "attn.png"
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert not plt.fignum_exists(fig.number)


def test_heatmap_figure_annotates_every_cell_and_saves(tmp_path):
    values = torch.tensor([[0.1, 1.25, 2.0], [0.0, 0.5, 1.5]])  # (layers, heads)
    fig = heatmap_figure(values, "val/entropy", fmt=".1f")
    (ax,) = panels(fig)
    assert sorted(t.get_text() for t in ax.texts) == sorted(["0.1", "1.2", "2.0", "0.0", "0.5", "1.5"])
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("layer", "head")
    assert save_figure(fig, tmp_path / "entropy.png").read_bytes().startswith(PNG_MAGIC)


def test_mismatched_tokens_or_shapes_are_refused():
    p = probs(2, 3, 4)
    with pytest.raises(ValueError, match="3 x_tokens \\(keys\\) but p has t_k = 4"):
        attention_figure(p, SOURCE[:3], TARGET, "t")
    with pytest.raises(ValueError, match="4 y_tokens \\(queries\\) but p has t_q = 3"):
        attention_figure(p, SOURCE, SOURCE, "t")
    with pytest.raises(ValueError, match=r"\(h, t_q, t_k\), got \(3, 4\)"):
        attention_figure(p[0], SOURCE, TARGET, "t")
    with pytest.raises(ValueError, match=r"\(rows, cols\), got \(3,\)"):
        heatmap_figure(torch.ones(3), "t")
