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


def _attention(num_heads=4, num_kv_heads=None, d_model=32, site="encoder", head_dim=None, key_dim=None):
    torch.manual_seed(0)
    d_k = key_dim or head_dim or d_model // num_heads
    score = ScaledDotScore(key_dim=d_k, num_heads=num_heads)
    return MultiHeadAttention(
        d_model,
        num_heads,
        score,
        PositionalEncoding(d_model, num_heads, 8),
        site,
        head_dim=head_dim,
        num_kv_heads=num_kv_heads,
        key_dim=key_dim,
    ).eval()


# (head_dim, key_dim): the default layout; keys narrower than values (Vaswani Table 3 B); and wider
DIMS = [(None, None), (32, 16), (8, 12)]


@pytest.mark.parametrize("head_dim,key_dim", DIMS, ids=["d_k=d_v", "d_k<d_v", "d_k>d_v"])
@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_fused_and_explicit_paths_agree_including_empty_rows(num_kv_heads, head_dim, key_dim):
    attn = _attention(num_kv_heads=num_kv_heads, head_dim=head_dim, key_dim=key_dim)
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


def test_attention_with_narrow_keys_is_the_textbook_formula_with_separate_key_and_value_widths():
    attn = _attention(head_dim=16, key_dim=4)  # d_model 32, 4 heads: d_k = 4, d_v = 16
    assert (attn.q_proj.out_features, attn.k_proj.out_features) == (4 * 4, 4 * 4)
    assert (attn.v_proj.out_features, attn.out_proj.in_features) == (4 * 16, 4 * 16)
    x = torch.randn(2, 5, 32)
    pos = torch.arange(5)
    heads = []
    for i in range(4):  # one head at a time: softmax(Q W_Q^i (K W_K^i)ᵀ / sqrt(d_k)) V W_V^i
        q_i = attn.q_proj(x)[..., 4 * i : 4 * i + 4]  # (b, t, d_k)
        k_i = attn.k_proj(x)[..., 4 * i : 4 * i + 4]  # (b, t, d_k)
        v_i = attn.v_proj(x)[..., 16 * i : 16 * i + 16]  # (b, t, d_v)
        heads.append(torch.softmax(q_i @ k_i.transpose(-2, -1) / 2.0, -1) @ v_i)  # (b, t, d_v)
    expected = attn.out_proj(torch.cat(heads, -1))  # (b, t, d_model)
    assert torch.allclose(attn(x, x, None, pos, pos), expected, atol=1e-5)


def test_a_non_positive_key_dim_is_refused_with_the_key_named():
    for key_dim in (0, -4):
        with pytest.raises(ValueError, match=rf"model\.key_dim must be positive or null, got {key_dim}"):
            _attention(key_dim=key_dim)


def test_heads_that_do_not_divide_the_model_size_are_refused_with_the_key_named():
    with pytest.raises(ValueError, match=r"model.num_heads \(5\) must divide model.d_model \(32\)"):
        _attention(num_heads=5)


def test_kv_heads_must_divide_the_heads():
    with pytest.raises(ValueError, match="model.num_kv_heads"):
        _attention(num_heads=4, num_kv_heads=3)
