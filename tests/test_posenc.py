"""Positional encodings: known answers per encoding, and contracts every conf/posenc/*.yaml must keep."""

from functools import partial
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attnlab.attention.masks import causal_mask, combine, padding_mask
from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.config import CONF_DIR
from attnlab.posenc.alibi import AlibiPositions, alibi_slopes
from attnlab.posenc.base import PositionalEncoding
from attnlab.posenc.learned import LearnedPositions
from attnlab.posenc.rope import RopePositions
from attnlab.posenc.t5_bias import T5BiasPositions, relative_position_bucket

from conftest import fused_and_explicit, make_transformer

POSENC_FILES = sorted((Path(CONF_DIR) / "posenc").glob("*.yaml"))
NAMES = [p.stem for p in POSENC_FILES]
SITES = ["encoder", "decoder", "cross"]


def posenc_factory(name: str):
    """The ``_partial_`` factory its YAML describes (what ``build_transformer`` receives)."""
    return instantiate(OmegaConf.load(Path(CONF_DIR) / "posenc" / f"{name}.yaml"))


def make_posenc(
    name: str, d_model: int = 32, num_heads: int = 4, head_dim: int = 8, key_dim: int | None = None
):
    torch.manual_seed(0)
    return posenc_factory(name)(d_model=d_model, num_heads=num_heads, head_dim=head_dim, key_dim=key_dim)


# (head_dim, key_dim): d_model / heads for both, and queries/keys narrower than values (Vaswani Table 3 B)
DIMS = [(8, None), (32, 16)]
DIM_IDS = ["d_k=d_v", "d_k<d_v"]


def make_attention(
    name: str, site: str, num_kv_heads: int | None = None, head_dim: int = 8, key_dim: int | None = None
) -> MultiHeadAttention:
    pe = make_posenc(name, head_dim=head_dim, key_dim=key_dim)
    with torch.no_grad():  # a learned bias starts near zero; make it matter for the comparison
        for p in pe.parameters():
            p.normal_()
    torch.manual_seed(1)
    return MultiHeadAttention(
        32,
        4,
        ScaledDotScore(key_dim or head_dim, 4),
        pe,
        site,
        head_dim=head_dim,
        num_kv_heads=num_kv_heads,
        key_dim=key_dim,
    ).eval()


def site_inputs(site: str):
    """x_q, x_kv, mask, q_pos, k_pos for a site, with padding, offset positions and t_q != t_k."""
    torch.manual_seed(2)
    if site == "cross":
        q_pos, k_pos = torch.arange(3, 8), torch.arange(6)
        mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6]), 0)  # (2, 1, 1, 6)
    else:
        q_pos = k_pos = torch.arange(3, 9)  # offset, as a cached decoding step would see them
        mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6]), 0)
        if site == "decoder":
            mask = combine(mask, causal_mask(q_pos, k_pos))
    return torch.randn(2, len(q_pos), 32), torch.randn(2, len(k_pos), 32), mask, q_pos, k_pos


# ----------------------------------------------------------------------- every encoding (every YAML)


@pytest.mark.parametrize("head_dim,key_dim", DIMS, ids=DIM_IDS)
@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("name", NAMES)
def test_every_encoding_gives_the_same_attention_on_the_fused_and_explicit_paths(
    name, num_kv_heads, site, head_dim, key_dim
):
    attn = make_attention(name, site, num_kv_heads, head_dim, key_dim)
    x_q, x_kv, mask, q_pos, k_pos = site_inputs(site)
    fused, explicit = fused_and_explicit(attn, x_q, x_kv, mask, q_pos, k_pos)
    assert torch.isfinite(fused).all()
    assert torch.allclose(fused, explicit, atol=1e-5)


@pytest.mark.parametrize("site", ["encoder", "decoder"])
@pytest.mark.parametrize("name", NAMES)
def test_an_encoding_with_a_score_mod_gives_a_bias_per_head_query_and_key_and_the_others_none(name, site):
    pe = make_posenc(name)
    bias = pe.bias(torch.arange(2, 5), torch.arange(7), site)
    if type(pe).score_mod is PositionalEncoding.score_mod:
        assert bias is None
    else:
        assert bias.shape == (1, 4, 3, 7) and torch.isfinite(bias).all() and bias.abs().sum() > 0


@pytest.mark.parametrize("name", NAMES)
def test_cross_attention_gets_the_encoding_only_when_the_encoding_acts_there(name):
    model = make_transformer(30, posenc=posenc_factory(name), d_model=32, num_heads=4, ffn_dim=64).eval()
    decoder_pe = model.decoder.posenc
    acts = decoder_pe.acts_in_cross_attention
    for layer in model.decoder.layers:
        assert (layer.cross_attn.posenc is decoder_pe) == acts
        assert acts or type(layer.cross_attn.posenc) is PositionalEncoding  # the no-op base
    with torch.no_grad():  # learned terms start small: make any position dependence visible
        for p in decoder_pe.parameters():
            p.normal_()
    cross = model.decoder.layers[0].cross_attn
    x_q, x_kv = torch.randn(2, 3, 32), torch.randn(2, 5, 32)
    here = cross(x_q, x_kv, None, torch.arange(3), torch.arange(5))
    elsewhere = cross(x_q, x_kv, None, torch.arange(7, 10), torch.arange(2, 7))
    assert torch.allclose(here, elsewhere, atol=1e-6) != acts  # positions reach it exactly when it acts


@pytest.mark.parametrize("head_dim,key_dim", DIMS, ids=DIM_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_one_decoding_step_at_an_offset_position_matches_the_last_row_of_the_full_pass(
    name, head_dim, key_dim
):
    attn = make_attention(name, "decoder", head_dim=head_dim, key_dim=key_dim)
    x = torch.randn(2, 6, 32)
    pos = torch.arange(6)
    full = attn(x, x, causal_mask(pos, pos), pos, pos)  # (2, 6, 32)
    last = pos[-1:]
    step = attn(x[:, -1:], x, causal_mask(last, pos), last, pos)  # (2, 1, 32): query 5 alone
    assert torch.allclose(step, full[:, -1:], atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_the_encoder_is_permutation_equivariant_exactly_when_the_encoding_adds_no_positions(name):
    torch.manual_seed(0)
    model = make_transformer(
        30,
        0,
        posenc=posenc_factory(name),
        d_model=32,
        num_heads=4,
        ffn_dim=64,
        dropout=0.0,
    ).eval()
    if name != "none":  # position tables start small; make them clearly visible in the output
        with torch.no_grad():
            for p in model.encoder.posenc.parameters():
                p.normal_()
    src = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [10, 11, 12, 13, 14, 15, 16]])
    perm = torch.tensor([3, 0, 4, 1, 2, 5, 6])  # reorders the first five (non-pad) tokens of each row
    out, _ = model.encoder(src)  # (2, 7, 32)
    out_perm, _ = model.encoder(src[:, perm])
    equivariant = torch.allclose(out_perm, out[:, perm], atol=1e-5)
    assert equivariant == (name == "none")


@pytest.mark.parametrize("name", NAMES)
def test_every_encoding_builds_from_its_yaml_with_the_model_shapes(name):
    pe = posenc_factory(name)(d_model=48, num_heads=6, head_dim=8)
    x = torch.randn(2, 5, 48)
    assert pe.embed(x, torch.arange(5)).shape == x.shape


# ----------------------------------------------------------------------------------------- learned


def test_learned_positions_add_their_table_row_for_each_position():
    pe = LearnedPositions(d_model=16, num_heads=2, head_dim=8, max_len=10)
    x, pos = torch.randn(3, 4, 16), torch.tensor([0, 1, 2, 9])
    assert torch.allclose(pe.embed(x, pos) - x, pe.table.weight[pos].expand(3, 4, 16))
    pe.embed(x, pos).sum().backward()
    assert pe.table.weight.grad[pos].abs().sum() > 0 and pe.table.weight.grad[3:9].abs().sum() == 0


def test_learned_positions_refuse_positions_beyond_the_table_naming_the_key():
    pe = LearnedPositions(d_model=16, num_heads=2, head_dim=8, max_len=4)
    with pytest.raises(ValueError, match=r"posenc\.max_len=4"):
        pe.embed(torch.randn(1, 5, 16), torch.arange(5))


# -------------------------------------------------------------------------------------------- rope


def test_rope_scores_depend_only_on_the_distance_between_query_and_key():
    pe = RopePositions(d_model=32, num_heads=2, head_dim=16)
    q, k = torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)
    pos = torch.arange(5)

    def scores(shift: int) -> torch.Tensor:
        rq, rk = pe.rotate(q, k, pos + shift, pos + shift, "encoder")
        return rq @ rk.transpose(-2, -1)  # (2, 2, 5, 5)

    assert not torch.allclose(scores(0), q @ k.transpose(-2, -1), atol=1e-3)  # positions do matter
    for shift in (1, 7, 40):
        assert torch.allclose(scores(shift), scores(0), atol=1e-4)


def test_rope_rotates_pairs_without_changing_their_length_and_leaves_position_zero_alone():
    pe = RopePositions(d_model=8, num_heads=1, head_dim=8)
    q = torch.randn(1, 1, 6, 8)
    rq, _ = pe.rotate(q, q, torch.arange(6), torch.arange(6), "decoder")
    pair_norms = [x.unflatten(-1, (4, 2)).norm(dim=-1) for x in (rq, q)]  # (1, 1, 6, 4) each
    assert torch.allclose(*pair_norms, atol=1e-6)
    assert torch.allclose(rq[..., 0, :], q[..., 0, :])
    angle = torch.tensor(1.0)  # position 1, first pair: θ_0 = 1
    x0, x1 = q[0, 0, 1, 0], q[0, 0, 1, 1]
    expected = torch.stack((x0 * angle.cos() - x1 * angle.sin(), x0 * angle.sin() + x1 * angle.cos()))
    assert torch.allclose(rq[0, 0, 1, :2], expected, atol=1e-6)


def test_rope_refuses_an_odd_head_dim_naming_the_key():
    with pytest.raises(ValueError, match=r"model\.head_dim, got 7"):
        RopePositions(d_model=28, num_heads=4, head_dim=7)


def test_rope_rotates_over_the_key_width_and_refuses_an_odd_key_dim_naming_that_key():
    pe = RopePositions(d_model=32, num_heads=2, head_dim=16, key_dim=6)
    assert pe.inv_freq.shape == (3,)  # one frequency per pair of the d_k = 6 query/key dimensions
    q, k, pos = torch.randn(1, 2, 5, 6), torch.randn(1, 2, 5, 6), torch.arange(5)
    rq, rk = pe.rotate(q, k, pos, pos, "encoder")
    shifted = pe.rotate(q, k, pos + 9, pos + 9, "encoder")
    assert torch.allclose(rq @ rk.transpose(-2, -1), shifted[0] @ shifted[1].transpose(-2, -1), atol=1e-4)
    RopePositions(d_model=28, num_heads=4, head_dim=7, key_dim=8)  # values are never rotated
    with pytest.raises(ValueError, match=r"model\.key_dim, got 7"):
        RopePositions(d_model=32, num_heads=4, head_dim=8, key_dim=7)


# ------------------------------------------------------------------------------------------- alibi


def test_alibi_slopes_are_geometric_from_two_to_the_minus_eight_over_n():
    assert alibi_slopes(8) == [2.0**-i for i in range(1, 9)]
    assert alibi_slopes(4) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]


def test_alibi_slopes_for_a_head_count_that_is_not_a_power_of_two_follow_the_papers_code():
    # the 4-head slopes, then every other 8-head slope (1/2, 1/8) to make up six
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert len(alibi_slopes(12)) == 12 and len(set(alibi_slopes(12))) == 12


def test_alibi_encoder_bias_is_minus_slope_times_distance_on_a_hand_computed_case():
    bias = AlibiPositions(d_model=32, num_heads=4, head_dim=8).bias(
        torch.arange(3), torch.arange(3), "encoder"
    )
    distance = torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]])
    slopes = torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256])
    assert bias.shape == (1, 4, 3, 3)
    assert torch.equal(bias[0, 0], -distance / 4)
    assert torch.equal(bias, -(slopes[:, None, None] * distance)[None])


def test_alibi_decoder_bias_penalises_past_keys_only_on_a_hand_computed_case():
    bias = AlibiPositions(d_model=32, num_heads=4, head_dim=8).bias(
        torch.arange(3), torch.arange(3), "decoder"
    )
    past = torch.tensor([[0.0, 0, 0], [1, 0, 0], [2, 1, 0]])  # i − j for j <= i; future keys are masked
    slopes = torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256])
    assert torch.equal(bias[0, 1], -past / 16)
    assert torch.equal(bias, -(slopes[:, None, None] * past)[None])


def test_alibi_bias_uses_the_given_positions_so_a_cached_step_sees_the_same_row():
    pe = AlibiPositions(d_model=32, num_heads=4, head_dim=8)
    full = pe.bias(torch.arange(5), torch.arange(5), "decoder")
    step = pe.bias(torch.tensor([4]), torch.arange(5), "decoder")
    assert torch.equal(step, full[:, :, 4:])


# ---------------------------------------------------------------------------------------------- t5


def test_t5_bidirectional_buckets_match_hand_computed_values():
    # 8 buckets, 4 per direction, exact for |j − i| < 2, log-spaced up to 16; keys after i add 4
    rel = torch.tensor([0, -1, 1, -2, 2, -4, 4, -5, 5, -6, 6, -100, 100])
    expected = [0, 1, 5, 2, 6, 2, 6, 2, 6, 3, 7, 3, 7]
    assert relative_position_bucket(rel, True, num_buckets=8, max_distance=16).tolist() == expected


def test_t5_unidirectional_buckets_match_hand_computed_values():
    # 8 buckets, exact for i − j < 4, then 4 + floor(4·log(n/4)/log 4) capped at 7; future keys -> 0
    rel = -torch.tensor([0, 1, 3, 4, 5, 6, 7, 10, 12, 16, 100])
    expected = [0, 1, 3, 4, 4, 5, 5, 6, 7, 7, 7]
    assert relative_position_bucket(rel, False, num_buckets=8, max_distance=16).tolist() == expected
    assert relative_position_bucket(torch.tensor([1, 5, 50]), False, 8, 16).tolist() == [0, 0, 0]


def test_t5_bias_looks_up_one_learned_scalar_per_head_and_bucket():
    pe = T5BiasPositions(d_model=32, num_heads=4, head_dim=8, num_buckets=8, max_distance=16)
    q_pos, k_pos = torch.arange(2, 6), torch.arange(7)
    for site, bidirectional in (("encoder", True), ("decoder", False)):
        bias = pe.bias(q_pos, k_pos, site)
        buckets = relative_position_bucket(k_pos[None, :] - q_pos[:, None], bidirectional, 8, 16)
        assert torch.equal(bias, pe.table.weight[buckets].permute(2, 0, 1)[None])
    pe.bias(q_pos, k_pos, "encoder").sum().backward()
    assert pe.table.weight.grad.abs().sum() > 0


def test_t5_refuses_a_max_distance_inside_the_exact_buckets_naming_the_keys():
    with pytest.raises(ValueError, match=r"posenc\.max_distance \(8\).*posenc\.num_buckets"):
        partial(T5BiasPositions, num_buckets=32, max_distance=8)(d_model=32, num_heads=4, head_dim=8)
