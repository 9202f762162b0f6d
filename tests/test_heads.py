"""Head layouts: grouped/multi-query heads, per-head gates and importance, simplified attention."""

import pytest
import torch

from attnlab.analysis.head_importance import head_gates, head_importance
from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.probs import masked_softmax
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.posenc.base import PositionalEncoding

D, H = 32, 4


def attention(num_kv_heads=None, projections=True, seed=0, key_dim=None):
    torch.manual_seed(seed)
    return MultiHeadAttention(
        D,
        H,
        ScaledDotScore(key_dim or D // H, H),
        PositionalEncoding(D, H, D // H, key_dim),
        "encoder",
        num_kv_heads=num_kv_heads,
        projections=projections,
        key_dim=key_dim,
    ).eval()


def run(attn, x):
    pos = torch.arange(x.size(1))
    return attn(x, x, None, pos, pos)


def test_num_kv_heads_equal_to_num_heads_is_plain_multi_head_attention():
    x = torch.randn(2, 5, D)
    assert torch.equal(run(attention(num_kv_heads=H), x), run(attention(num_kv_heads=None), x))


@pytest.mark.parametrize("key_dim", [None, 4], ids=["d_k=d_v", "d_k<d_v"])
@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_query_attention_equals_multi_head_with_shared_key_value_heads(num_kv_heads, key_dim):
    gqa, mha = attention(num_kv_heads=num_kv_heads, key_dim=key_dim), attention(key_dim=key_dim)
    mha.load_state_dict(
        {k: v for k, v in gqa.state_dict().items() if not k.startswith(("k_", "v_"))}, strict=False
    )
    group = H // num_kv_heads
    for name, d in (("k_proj", key_dim or D // H), ("v_proj", D // H)):  # repeat each shared head's rows
        src, dst = getattr(gqa, name), getattr(mha, name)  # for every query head of its group
        dst.weight.data = src.weight.data.view(num_kv_heads, d, D).repeat_interleave(group, 0).reshape(-1, D)
        dst.bias.data = src.bias.data.view(num_kv_heads, d).repeat_interleave(group, 0).reshape(-1)
    x = torch.randn(2, 6, D)
    assert torch.allclose(run(gqa, x), run(mha, x), atol=1e-6)
    assert sum(p.numel() for p in gqa.parameters()) < sum(p.numel() for p in mha.parameters())


def test_a_zero_gate_removes_exactly_that_heads_contribution():
    x = torch.randn(2, 5, D)
    gated = attention()
    gated.head_gate.data[1] = 0.0
    cut = attention()  # same weights; head 1's columns of the output projection zeroed instead
    cut.out_proj.weight.data[:, 8:16] = 0.0
    assert torch.allclose(run(gated, x), run(cut, x), atol=1e-6)
    gated.q_proj.weight.data[8:16] = torch.randn(8, D)  # head 1's queries no longer matter
    assert torch.allclose(run(gated, x), run(cut, x), atol=1e-6)


def test_gates_are_not_trained_and_head_importance_is_the_gradient_wrt_the_gate():
    attn = attention()
    assert not attn.head_gate.requires_grad
    x = torch.randn(3, 5, D)

    def loss(batch):
        return run(attn, batch).pow(2).mean()

    importance = head_importance(attn, loss, [x])[""]
    eps, numeric = 1e-3, []
    for h in range(H):  # central finite difference of the loss in each gate
        plus, minus = attn.head_gate.data.clone(), attn.head_gate.data.clone()
        plus[h] += eps
        minus[h] -= eps
        attn.head_gate.data = plus
        up = loss(x).item()
        attn.head_gate.data = minus
        down = loss(x).item()
        attn.head_gate.data = torch.ones(H)
        numeric.append(abs(up - down) / (2 * eps))
    assert torch.allclose(importance, torch.tensor(numeric), rtol=1e-2, atol=1e-5)
    assert not attn.head_gate.requires_grad and attn.head_gate.grad is None
    assert list(head_gates(attn)) == [""]


def test_simplified_attention_uses_the_input_as_queries_keys_and_values():
    attn = attention(projections=False)
    assert sum(p.numel() for p in attn.parameters() if p.requires_grad) == 0
    x = torch.randn(2, 5, D)
    heads = x.view(2, 5, H, D // H).transpose(1, 2)  # (b, h, t, d)
    p = masked_softmax(heads @ heads.transpose(-2, -1) / (D // H) ** 0.5, None)
    expected = (p @ heads).transpose(1, 2).reshape(2, 5, D)
    assert torch.allclose(run(attn, x), expected, atol=1e-6)


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_query_and_key_projections_scale_with_key_dim_and_value_and_output_projections_do_not(num_kv_heads):
    kv = num_kv_heads or H
    for key_dim in (2, 4, 8, 16):
        attn = attention(num_kv_heads=num_kv_heads, key_dim=key_dim)
        assert sum(p.numel() for p in attn.q_proj.parameters()) == (D + 1) * H * key_dim
        assert sum(p.numel() for p in attn.k_proj.parameters()) == (D + 1) * kv * key_dim
        assert sum(p.numel() for p in attn.v_proj.parameters()) == (D + 1) * kv * (D // H)
        assert sum(p.numel() for p in attn.out_proj.parameters()) == (H * (D // H) + 1) * D
        assert run(attn, torch.randn(2, 5, D)).shape == (2, 5, D)
    assert sum(p.numel() for p in attention(key_dim=D // H).parameters()) == sum(
        p.numel() for p in attention().parameters()
    )


def test_simplified_attention_refuses_keys_narrower_than_values_naming_the_keys():
    with pytest.raises(
        ValueError, match=r"model\.projections=false needs model\.key_dim \(4\) = model\.head_dim \(8\)"
    ):
        attention(projections=False, key_dim=4)
    simplified = attention(projections=False, key_dim=D // H)  # key_dim = head_dim is allowed
    assert sum(p.numel() for p in simplified.parameters() if p.requires_grad) == 0


def test_simplified_attention_refuses_a_head_layout_that_does_not_tile_the_model():
    with pytest.raises(ValueError, match="model.projections=false"):
        MultiHeadAttention(
            D, H, ScaledDotScore(4, H), PositionalEncoding(D, H, 4), "encoder", head_dim=4, projections=False
        )
