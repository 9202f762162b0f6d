import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.attention.masks import causal_mask, combine, padding_mask
from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.probs import masked_softmax
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.posenc.base import PositionalEncoding

from conftest import fused_and_explicit, self_attention_mask_with_an_empty_row


def test_padding_mask_hides_padded_keys_for_every_query():
    tokens = torch.tensor([[5, 6, 0, 0], [5, 6, 7, 8]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[0, 0, 0].tolist() == [True, True, False, False]
    assert mask[1].all()


def test_causal_mask_blocks_exactly_the_upper_triangle():
    pos = torch.arange(5)
    mask = causal_mask(pos, pos)[0, 0]
    assert torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril())


def test_masked_positions_get_zero_weight_and_rows_sum_to_one():
    scores = torch.randn(2, 3, 4, 4)
    mask = combine(
        padding_mask(torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]), 0),
        causal_mask(torch.arange(4), torch.arange(4)),
    )
    p = masked_softmax(scores, mask)
    assert torch.all(p.masked_select(~mask.expand_as(p)) == 0)
    assert torch.allclose(p.sum(-1), torch.ones(2, 3, 4))


def test_a_fully_masked_row_gives_zeros_not_nan():
    scores = torch.randn(1, 2, 3, 3, requires_grad=True)
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    mask[..., 1, :] = False
    p = masked_softmax(scores, mask)
    assert torch.all(p[..., 1, :] == 0) and torch.isfinite(p).all()
    p.sum().backward()
    assert torch.isfinite(scores.grad).all()


def _attention(num_heads=4, num_kv_heads=None, d_model=32, site="encoder"):
    torch.manual_seed(0)
    score = ScaledDotScore(head_dim=d_model // num_heads, num_heads=num_heads)
    return MultiHeadAttention(
        d_model, num_heads, score, PositionalEncoding(d_model, num_heads, 8), site, num_kv_heads=num_kv_heads
    ).eval()


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_fused_and_explicit_paths_agree_including_empty_rows(num_kv_heads):
    attn = _attention(num_kv_heads=num_kv_heads)
    x = torch.randn(2, 5, 32)
    mask, pos = self_attention_mask_with_an_empty_row(), torch.arange(5)
    fused, explicit = fused_and_explicit(attn, x, x, mask, pos, pos)
    assert torch.allclose(fused, explicit, atol=1e-5)
    assert torch.isfinite(fused).all()


def test_scaled_dot_score_equals_torch_sdpa():
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    p = masked_softmax(ScaledDotScore(8, 3)(q, k), None)
    assert torch.allclose(p @ v, F.scaled_dot_product_attention(q, k, v), atol=1e-6)
    assert torch.allclose(ScaledDotScore(8, 3)(q, k), q @ k.transpose(-2, -1) / math.sqrt(8))


def test_heads_that_do_not_divide_the_model_size_are_refused_with_the_key_named():
    with pytest.raises(ValueError, match=r"model.num_heads \(5\) must divide model.d_model \(32\)"):
        _attention(num_heads=5)


def test_kv_heads_must_divide_the_heads():
    with pytest.raises(ValueError, match="model.num_kv_heads"):
        _attention(num_heads=4, num_kv_heads=3)
