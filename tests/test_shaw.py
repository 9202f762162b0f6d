"""Shaw et al. relative position representations: known answers and the clip distance."""

import pytest
import torch

from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.posenc.shaw import ShawPositions

from conftest import fused_and_explicit


def test_relative_key_terms_match_a_hand_computed_case():
    shaw = ShawPositions(4, 1, 2, clip=1, values=False)
    shaw.rel_keys.weight.data = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])  # j−i = −1, 0, +1
    q = torch.tensor([[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]]])  # (1, 1, 3, 2)
    pos = torch.arange(3)
    terms = shaw.score_terms(q, pos, pos, "encoder")[0, 0] * 2**0.5  # undo 1/sqrt(d)
    # row i, column j uses vector for clip(j − i): q_i · a
    expected = torch.tensor([[2.0, 6.0, 6.0], [3.0, 4.0, 14.0], [5.0, 5.0, 6.0]])
    assert torch.allclose(terms, expected)


def test_relative_value_terms_add_the_probability_weighted_vectors():
    shaw = ShawPositions(4, 1, 2, clip=1, keys=False)
    shaw.rel_values.weight.data = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    p = torch.tensor([[[[0.5, 0.5], [0.25, 0.75]]]])  # (1, 1, 2, 2)
    pos = torch.arange(2)
    out = shaw.value_terms(p, pos, pos, "decoder")[0, 0]
    assert torch.allclose(out, torch.tensor([[1.0, 1.5], [0.25, 0.75]]))
    assert shaw.needs_probs


def test_clip_zero_carries_no_position_information():
    torch.manual_seed(0)
    attn = MultiHeadAttention(8, 2, ScaledDotScore(4, 2), ShawPositions(8, 2, 4, clip=0), "encoder").eval()
    x, pos, perm = torch.randn(1, 5, 8), torch.arange(5), torch.tensor([3, 0, 4, 1, 2])
    assert torch.allclose(
        attn(x, x, None, pos, pos)[:, perm], attn(x[:, perm], x[:, perm], None, pos, pos), atol=1e-5
    )


def test_keys_only_runs_fused_and_agrees_with_the_explicit_path():
    torch.manual_seed(0)
    attn = MultiHeadAttention(
        8, 2, ScaledDotScore(4, 2), ShawPositions(8, 2, 4, clip=2, values=False), "encoder"
    ).eval()
    assert not attn.posenc.needs_probs
    x, pos = torch.randn(2, 6, 8), torch.arange(6)
    fused, explicit = fused_and_explicit(attn, x, x, None, pos, pos)
    assert torch.allclose(fused, explicit, atol=1e-5)


def test_relative_keys_are_as_wide_as_the_keys_and_relative_values_as_wide_as_the_values():
    shaw = ShawPositions(8, 2, head_dim=12, key_dim=4, clip=3)
    assert shaw.rel_keys.weight.shape == (7, 4) and shaw.rel_values.weight.shape == (7, 12)
    assert shaw.scale == 4**-0.5  # the relative key term is scaled like q · k, by 1/sqrt(d_k)
    pos = torch.arange(5)
    assert shaw.score_terms(torch.randn(2, 2, 5, 4), pos, pos, "encoder").shape == (2, 2, 5, 5)
    assert shaw.value_terms(torch.rand(2, 2, 5, 5), pos, pos, "decoder").shape == (2, 2, 5, 12)
    assert ShawPositions(8, 2, head_dim=12, clip=3).rel_keys.weight.shape == (
        7,
        12,
    )  # key_dim None = head_dim


@pytest.mark.parametrize("values", [False, True], ids=["keys_only_fused", "keys_and_values_explicit"])
def test_relative_terms_with_keys_narrower_than_values_agree_on_both_paths(values):
    torch.manual_seed(0)
    shaw = ShawPositions(8, 2, head_dim=12, key_dim=4, clip=2, values=values)
    with torch.no_grad():
        for p in shaw.parameters():
            p.normal_()
    attn = MultiHeadAttention(8, 2, ScaledDotScore(4, 2), shaw, "encoder", head_dim=12, key_dim=4).eval()
    x, pos = torch.randn(2, 6, 8), torch.arange(6)
    fused, explicit = fused_and_explicit(attn, x, x, None, pos, pos)
    assert torch.isfinite(fused).all() and torch.allclose(fused, explicit, atol=1e-5)


def test_a_negative_clip_is_refused_with_the_key_named():
    with pytest.raises(ValueError, match=r"posenc.clip must be >= 0, got -1"):
        ShawPositions(8, 2, 4, clip=-1)
