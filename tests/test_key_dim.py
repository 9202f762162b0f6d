"""model.key_dim: queries and keys d_k wide, values d_v = model.head_dim wide (Vaswani et al. 2017, Table 3B).

Whole models composed from the real configs: null is today's model exactly, the parameter count moves with
d_k only through the query/key side, and cached decoding (keys cached at d_k, values at d_v) gives the
uncached tokens for every score and encoding.
"""

from dataclasses import replace

import pytest
import torch

from attnlab.model.cache import DecoderCache
from attnlab.training.decode import DecodeSettings, beam_search, greedy_decode

from conftest import (
    DECODE_VOCAB,
    assert_stepwise_decoding_matches_whole,
    config_options,
    decode_ids,
    decode_sources,
    pairwise_combos,
    tiny_decode_model,
)

IDS = decode_ids()
VOCAB, PAD, BOS, EOS = DECODE_VOCAB, IDS.pad_id, IDS.bos_id, IDS.eos_id
LIMITS = DecodeSettings(max_len_ratio=1.0, max_len_offset=5)  # at most 15 steps for the 10-token sources


pytestmark = pytest.mark.usefixtures("one_thread")


COMBOS = pairwise_combos()
SCORES, POSENCS = config_options("attention/score"), config_options("posenc")


def make_model(compose_cfg, *overrides: str, seed: int = 0):
    """A tiny untied model with 2 heads of d_v = 8 (d_model 16); ``model.key_dim`` comes in overrides.

    Its <eos> logit is held at 0 (the generator's row zeroed), below the best of the other 23 random
    logits at almost every step, so decoding runs to each sentence's limit instead of stopping at once.
    """
    model = tiny_decode_model(compose_cfg, *overrides, seed=seed)
    with torch.no_grad():
        model.generator.weight[EOS] = 0.0
    return model


sources = decode_sources


def attention_modules(model):
    for layer in model.encoder.layers:
        yield layer.self_attn
    for layer in model.decoder.layers:
        yield layer.self_attn
        yield layer.cross_attn


@pytest.mark.parametrize("model", config_options("model"))
def test_every_model_config_leaves_key_dim_null_so_keys_are_as_wide_as_values(model, compose_cfg):
    assert compose_cfg([f"model={model}"]).model.key_dim is None


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("posenc", POSENCS)
def test_key_dim_equal_to_head_dim_is_the_model_key_dim_null_builds(score, posenc, compose_cfg):
    default = make_model(compose_cfg, f"attention/score={score}", f"posenc={posenc}")
    explicit = make_model(compose_cfg, f"attention/score={score}", f"posenc={posenc}", "model.key_dim=8")
    assert default.state_dict().keys() == explicit.state_dict().keys()
    for name, value in default.state_dict().items():
        assert torch.equal(value, explicit.state_dict()[name]), name
    src, tgt = sources(), torch.randint(3, VOCAB, (4, 6))
    assert torch.equal(default(src, tgt), explicit(src, tgt))


@pytest.mark.parametrize("num_kv_heads", [None, 1])
def test_the_parameter_count_moves_with_key_dim_only_through_the_query_and_key_projections(
    num_kv_heads, compose_cfg
):
    kv = [] if num_kv_heads is None else [f"model.num_kv_heads={num_kv_heads}"]
    h, h_kv, d_model = 2, num_kv_heads or 2, 16

    def count(key_dim: int) -> int:
        return sum(p.numel() for p in make_model(compose_cfg, f"model.key_dim={key_dim}", *kv).parameters())

    modules = list(attention_modules(make_model(compose_cfg, "model.key_dim=4", *kv)))
    assert len(modules) == 1 + 2 * 2  # encoder self; decoder self and cross per layer
    for attn in modules:
        assert (attn.q_proj.out_features, attn.k_proj.out_features) == (h * 4, h_kv * 4)
        assert (attn.v_proj.out_features, attn.out_proj.in_features) == (h_kv * 8, h * 8)
    per_unit = len(modules) * (d_model + 1) * (h + h_kv)  # weights and biases of W_Q, W_K per unit of d_k
    assert count(4) - count(2) == 2 * per_unit
    assert count(16) - count(4) == 12 * per_unit


def test_every_site_gets_a_score_built_on_key_dim_whether_configured_or_the_scaled_dot_default(compose_cfg):
    model = make_model(
        compose_cfg, "attention/score=general", "attention.score_sites=[cross]", "model.key_dim=4"
    )
    for attn in attention_modules(model):
        if attn.site == "cross":
            assert attn.score.weight.shape == (2, 4, 4)  # (h, d_k, d_k)
        else:
            assert attn.score.key_dim == 4  # scaled dot: 1 / sqrt(d_k)


@pytest.mark.parametrize("key_dim", [4, 12], ids=["d_k<d_v", "d_k>d_v"])
@pytest.mark.parametrize("score,posenc,mask", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_cached_greedy_decoding_gives_the_uncached_tokens_when_key_dim_differs_from_head_dim(
    score, posenc, mask, key_dim, compose_cfg
):
    model = make_model(
        compose_cfg,
        f"attention/score={score}",
        f"posenc={posenc}",
        f"attention/mask={mask}",
        f"model.key_dim={key_dim}",
    )
    src = sources()
    uncached = greedy_decode(model, src, IDS, replace(LIMITS, use_cache=False))
    cached = greedy_decode(model, src, IDS, replace(LIMITS, use_cache=True))
    assert cached.tolist() == uncached.tolist()
    assert uncached.size(1) == 10 + 5  # the longest sentence ran to its limit: 15 cached steps


@pytest.mark.parametrize("score,posenc,mask", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_feeding_the_decoder_token_by_token_gives_the_states_of_feeding_it_whole_with_narrow_shared_keys(
    score, posenc, mask, compose_cfg
):
    model = make_model(
        compose_cfg,
        f"attention/score={score}",
        f"posenc={posenc}",
        f"attention/mask={mask}",
        "model.key_dim=4",
        "model.num_kv_heads=1",
    )
    assert_stepwise_decoding_matches_whole(model)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_the_cache_keeps_keys_at_key_dim_and_values_at_head_dim_for_the_key_value_heads(
    kv_heads, compose_cfg
):
    model = make_model(
        compose_cfg, "model.num_heads=4", f"model.num_kv_heads={kv_heads}", "posenc=rope", "model.key_dim=2"
    )  # d_model 16, 4 heads: d_v = 4, d_k = 2
    src = sources()
    memory, src_mask = model.encoder(src)
    cache = DecoderCache(len(model.decoder.layers))
    ys = torch.full((4, 1), BOS)
    for _ in range(3):
        nxt = model.generator(model.decoder(ys[:, -1:], memory, src_mask, cache)[:, -1]).argmax(-1)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
    for self_cache, cross_cache in cache.layers:
        assert self_cache.k.shape == (4, kv_heads, 3, 2) and self_cache.v.shape == (4, kv_heads, 3, 4)
        assert cross_cache.k.shape == (4, kv_heads, 10, 2) and cross_cache.v.shape == (4, kv_heads, 10, 4)
    uncached = greedy_decode(model, src, IDS, replace(LIMITS, use_cache=False))
    assert greedy_decode(model, src, IDS, LIMITS).tolist() == uncached.tolist()


@pytest.mark.parametrize("posenc", ["rope", "shaw"])
def test_cached_beam_search_gives_the_uncached_hypotheses_with_narrow_keys(posenc, compose_cfg):
    model = make_model(compose_cfg, f"posenc={posenc}", "model.key_dim=4", "model.num_kv_heads=1")
    src = sources()
    uncached = beam_search(model, src, IDS, replace(LIMITS, beam_size=3, use_cache=False))
    cached = beam_search(model, src, IDS, replace(LIMITS, beam_size=3, use_cache=True))
    assert cached.tolist() == uncached.tolist()
