"""Structural mask patterns and the padding-mask ablation."""

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attnlab.attention.patterns.dilated import DilatedPattern
from attnlab.attention.patterns.local import LocalPattern
from attnlab.config import CONF_DIR

from conftest import make_transformer

POS = torch.arange(5)


def test_local_window_allows_exactly_the_band_of_half_width_w():
    allowed = LocalPattern(window=1)(POS, POS)[0, 0]
    expected = torch.tensor(
        [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1]]
    )
    assert torch.equal(allowed, expected.bool())


def test_dilated_pattern_allows_every_rth_position_within_the_window():
    allowed = DilatedPattern(dilation=2, window=1)(POS, POS)[0, 0]
    expected = torch.tensor(
        [[1, 0, 1, 0, 0], [0, 1, 0, 1, 0], [1, 0, 1, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 0, 1]]
    )
    assert torch.equal(allowed, expected.bool())


@pytest.mark.parametrize("pattern", [LocalPattern, DilatedPattern])
def test_patterns_refuse_a_non_positive_window(pattern):
    with pytest.raises(ValueError, match="attention.mask.window must be positive"):
        pattern(window=0)


@pytest.mark.parametrize("path", sorted((Path(CONF_DIR) / "attention" / "mask").glob("*.yaml")), ids=str)
def test_every_pattern_keeps_the_diagonal_and_works_at_offset_positions(path):
    pattern = instantiate(OmegaConf.load(path))
    q_pos, k_pos = torch.arange(7, 10), torch.arange(10)  # a decoding step late in the sentence
    allowed = pattern(q_pos, k_pos)
    if allowed is not None:
        assert allowed.shape == (1, 1, 3, 10)
        assert all(allowed[0, 0, i, 7 + i] for i in range(3))
        full = pattern(torch.arange(10), k_pos)[0, 0, 7:]
        assert torch.equal(allowed[0, 0], full)


def _model(padding_mask):
    torch.manual_seed(0)
    return make_transformer(
        20,
        0,
        mask=LocalPattern(2),
        d_model=16,
        num_heads=2,
        ffn_dim=32,
        dropout=0.0,
        padding_mask=padding_mask,
    ).eval()


def test_padding_does_not_change_a_sentence_unless_the_padding_mask_is_switched_off():
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    padded = torch.tensor([[5, 6, 7, 2, 0, 0]])
    on = _model(padding_mask=True)
    assert torch.allclose(on(src, tgt), on(padded, tgt), atol=1e-5)
    off = _model(padding_mask=False)
    assert not torch.allclose(off(src, tgt), off(padded, tgt), atol=1e-3)
