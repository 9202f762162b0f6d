"""Recording attention: maps are distributions that respect every mask; no hooks left; loss unchanged."""

import pytest
import torch

from attnlab.attention.masks import causal_mask, padding_mask
from attnlab.attention.patterns.local import LocalPattern
from attnlab.attention.recording import attention_sites, record_attention

from conftest import make_transformer


@pytest.fixture
def model():
    torch.manual_seed(0)
    return make_transformer(
        30,
        0,
        mask=LocalPattern(window=2),
        d_model=16,
        num_heads=2,
        ffn_dim=32,
        dropout=0.0,
    ).eval()


SRC = torch.tensor([[5, 6, 7, 8, 9, 2], [5, 6, 2, 0, 0, 0]])
TGT = torch.tensor([[1, 10, 11, 12, 13], [1, 10, 0, 0, 0]])


def test_recorded_maps_are_distributions_that_respect_the_mask(model):
    with record_attention(model) as maps:
        model(SRC, TGT)
    assert set(maps) == {(s, layer) for s in ("encoder", "decoder", "cross") for layer in (0, 1)}
    src_keys = padding_mask(SRC, 0)  # (b, 1, 1, s)
    pos_s, pos_t = torch.arange(6), torch.arange(5)
    allowed = {
        "encoder": src_keys & LocalPattern(2)(pos_s, pos_s),
        "decoder": padding_mask(TGT, 0) & causal_mask(pos_t, pos_t) & LocalPattern(2)(pos_t, pos_t),
        "cross": src_keys.expand(2, 1, 5, 6),
    }
    for (site, _), p in maps.items():
        mask = allowed[site].expand_as(p)
        assert torch.all(p[~mask] == 0)  # no weight where the masks forbid it
        rows = mask.any(-1)
        assert torch.allclose(p.sum(-1)[rows], torch.ones(int(rows.sum())), atol=1e-6)


def test_recording_leaves_no_hooks_behind_and_does_not_change_the_output(model):
    before = model(SRC, TGT)
    with record_attention(model):
        during = model(SRC, TGT)
    after = model(SRC, TGT)
    assert torch.allclose(before, during, atol=1e-5) and torch.equal(before, after)
    assert all(not m.probs._forward_hooks for m in attention_sites(model).values())


def test_hooks_are_removed_even_when_the_forward_fails(model):
    with pytest.raises(IndexError), record_attention(model):
        model(torch.tensor([[99]]), TGT[:1])  # token id outside the vocabulary
    assert all(not m.probs._forward_hooks for m in attention_sites(model).values())
