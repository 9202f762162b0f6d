"""Attention maps and per-head tables as images: one panel per head, every cell the colour of its
value, labels drawn, PNGs on disk, mismatches refused."""

import numpy as np
import pytest
import torch
from PIL import Image

from attnlab.analysis.images import attention_image, colours, table_image

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SOURCE = ["the", "cat", "sat", "</s>"]
TARGET = ["die", "Katze", "saß"]


def probs(h: int, t_q: int, t_k: int) -> torch.Tensor:
    return torch.softmax(3 * torch.randn(h, t_q, t_k, generator=torch.Generator().manual_seed(0)), dim=-1)


def pixel(drawing, x: int, y: int) -> tuple[int, int, int]:
    return drawing.image.getpixel((x, y))


@pytest.mark.parametrize("heads", [1, 3, 6])
def test_every_cell_of_every_head_has_the_colour_of_its_attention_weight(heads):
    p = probs(heads, 3, 4)
    drawing = attention_image(p, SOURCE, TARGET, "layer 0 cross-attention")
    assert len(drawing.panels) == heads
    expected = colours(p.numpy(), 0.0, 1.0)  # (h, t_q, t_k, 3)
    for h, panel in enumerate(drawing.panels):
        assert (panel.rows, panel.cols) == (3, 4)
        for i in range(3):
            for j in range(4):
                assert pixel(drawing, *panel.centre(i, j)) == tuple(expected[h, i, j])


def test_panels_do_not_overlap_and_wrap_after_four_heads():
    drawing = attention_image(probs(6, 3, 4), SOURCE, TARGET, "t")
    tops = [panel.top for panel in drawing.panels]
    assert tops[:4] == [tops[0]] * 4 and tops[4] == tops[5] > tops[0]  # 4 a row
    lefts = [panel.left for panel in drawing.panels[:4]]
    assert all(b - a >= 4 * drawing.panels[0].cell for a, b in zip(lefts, lefts[1:]))


def test_the_token_labels_and_the_title_are_drawn_beside_the_cells():
    drawing = attention_image(probs(2, 3, 4), SOURCE, TARGET, "a title")
    image = np.asarray(drawing.image.convert("L"))
    panel = drawing.panels[0]
    ink = image < 128
    assert ink[: panel.top - 12].any()  # the title
    assert ink[panel.top : panel.top + 3 * panel.cell, : panel.left - 2].any()  # query tokens, left
    below = ink[panel.top + 3 * panel.cell + 2 :, panel.left : panel.left + 4 * panel.cell]
    assert below.any()  # key tokens, below
    longer = attention_image(probs(2, 3, 4), ["a-much-longer-key"] * 4, TARGET, "a title")
    assert longer.image.height > drawing.image.height  # room for the longest label


def test_a_drawing_saves_a_png_into_new_folders(tmp_path):
    drawing = attention_image(probs(2, 3, 4), SOURCE, TARGET, "t")
    path = drawing.save(tmp_path / "attention" / "test" / "cross_L0_probe0.png")
    assert path == tmp_path / "attention" / "test" / "cross_L0_probe0.png"
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert Image.open(path).size == drawing.image.size


def test_a_table_colours_its_cells_from_its_own_minimum_to_its_maximum_and_writes_every_value(tmp_path):
    values = torch.tensor([[0.1, 1.25, 2.0], [0.0, 0.5, 1.5]])  # (layers, heads)
    drawing = table_image(values, "val/entropy", fmt=".1f")
    (panel,) = drawing.panels
    assert (panel.rows, panel.cols) == (2, 3)
    x, y = panel.centre(1, 0)  # the minimum, 0.0: the colormap's first colour around its text
    assert pixel(drawing, x - panel.cell // 2 + 2, y - panel.cell // 2 + 2) == tuple(
        colours(np.zeros(1), 0, 1)[0]
    )
    x, y = panel.centre(0, 2)  # the maximum, 2.0
    assert pixel(drawing, x - panel.cell // 2 + 2, y - panel.cell // 2 + 2) == tuple(
        colours(np.ones(1), 0, 1)[0]
    )
    text_ink = np.asarray(drawing.image.crop((x - 8, y - 5, x + 8, y + 5)).convert("L"))
    assert text_ink.min() < 60  # the value is written in the cell
    assert drawing.save(tmp_path / "entropy.png").read_bytes().startswith(PNG_MAGIC)


def test_mismatched_tokens_or_shapes_are_refused():
    p = probs(2, 3, 4)
    with pytest.raises(ValueError, match="3 x_tokens \\(keys\\) but p has t_k = 4"):
        attention_image(p, SOURCE[:3], TARGET, "t")
    with pytest.raises(ValueError, match="4 y_tokens \\(queries\\) but p has t_q = 3"):
        attention_image(p, SOURCE, SOURCE, "t")
    with pytest.raises(ValueError, match=r"\(h, t_q, t_k\), got \(3, 4\)"):
        attention_image(p[0], SOURCE, TARGET, "t")
    with pytest.raises(ValueError, match=r"\(rows, cols\), got \(3,\)"):
        table_image(torch.ones(3), "t")
