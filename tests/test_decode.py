"""Cached decoding gives the uncached tokens; beam search finds hypotheses at least as good as greedy."""

from dataclasses import replace

import pytest
import torch

from attnlab.attention.recording import record_attention
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.model.cache import DecoderCache
from attnlab.training.decode import DecodeSettings, beam_search, gnmt_length_penalty, greedy_decode
from attnlab.training.task import TranslationTask

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


def tokenizer() -> WordTokenizer:
    """A word tokenizer with exactly VOCAB ids (4 specials and VOCAB - 4 words)."""
    return WordTokenizer.train([" ".join(f"w{i}" for i in range(VOCAB - 4))])


COMBOS = pairwise_combos()
SCORES, POSENCS = config_options("attention/score"), config_options("posenc")


def make_model(compose_cfg, *overrides: str, seed: int = 0):
    return tiny_decode_model(compose_cfg, *overrides, seed=seed)


sources = decode_sources


@pytest.mark.parametrize("score,posenc,mask", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_cached_greedy_decoding_gives_the_uncached_tokens(score, posenc, mask, compose_cfg):
    model = make_model(compose_cfg, f"attention/score={score}", f"posenc={posenc}", f"attention/mask={mask}")
    src = sources()
    uncached = greedy_decode(model, src, IDS, replace(LIMITS, use_cache=False))
    cached = greedy_decode(model, src, IDS, replace(LIMITS, use_cache=True))
    assert cached.tolist() == uncached.tolist()
    assert len(set(uncached.flatten().tolist())) > 3  # the test decodes something, not one repeated id


@pytest.mark.parametrize("posenc", POSENCS)
def test_feeding_the_decoder_token_by_token_gives_the_states_of_feeding_it_whole(posenc, compose_cfg):
    model = make_model(compose_cfg, f"posenc={posenc}", "attention/mask=local", "model.num_kv_heads=1")
    assert_stepwise_decoding_matches_whole(model)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_and_multi_query_attention_cache_only_the_key_value_heads(kv_heads, compose_cfg):
    model = make_model(compose_cfg, "model.num_heads=4", f"model.num_kv_heads={kv_heads}", "posenc=rope")
    src = sources()
    memory, src_mask = model.encoder(src)
    cache = DecoderCache(len(model.decoder.layers))
    ys = torch.full((4, 1), BOS)
    for _ in range(3):
        nxt = model.generator(model.decoder(ys[:, -1:], memory, src_mask, cache)[:, -1]).argmax(-1)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
    for self_cache, cross_cache in cache.layers:
        assert self_cache.k.shape == self_cache.v.shape == (4, kv_heads, 3, 4)  # (b, h_kv, t, d)
        assert cross_cache.k.shape == cross_cache.v.shape == (4, kv_heads, 10, 4)  # (b, h_kv, s, d)
    uncached = greedy_decode(model, src, IDS, replace(LIMITS, use_cache=False))
    assert greedy_decode(model, src, IDS, LIMITS).tolist() == uncached.tolist()


def test_recording_attention_during_cached_decoding_keeps_the_tokens_and_the_last_step_maps(compose_cfg):
    model = make_model(compose_cfg, "posenc=alibi")
    src = sources()
    plain = greedy_decode(model, src, IDS, LIMITS)
    with record_attention(model) as maps:
        recorded = greedy_decode(model, src, IDS, LIMITS)
    assert recorded.tolist() == plain.tolist()
    t = recorded.size(1)  # the last step fed token t - 1 and saw t keys
    assert maps[("decoder", 1)].shape == (4, 2, 1, t) and maps[("cross", 0)].shape == (4, 2, 1, 10)
    torch.testing.assert_close(maps[("decoder", 1)].sum(-1), torch.ones(4, 2, 1))


@pytest.mark.parametrize(
    "overrides", [[], ["attention/score=additive", "posenc=t5_bias"]], ids=["default", "additive"]
)
def test_beam_search_with_one_beam_is_greedy_decoding(overrides, compose_cfg):
    model = make_model(compose_cfg, *overrides)
    src = sources(1)
    greedy = greedy_decode(model, src, IDS, LIMITS)
    assert beam_search(model, src, IDS, replace(LIMITS, beam_size=1)).tolist() == greedy.tolist()


def penalised_log_prob(model, src: torch.Tensor, out: torch.Tensor, alpha: float) -> torch.Tensor:
    """log p(Y | x) / lp(Y) of each output row (up to and including its first <eos>) under the model."""
    tgt = torch.cat([torch.full((out.size(0), 1), BOS), out], dim=1)  # (b, t + 1)
    logp = model(src, tgt[:, :-1]).log_softmax(-1).gather(-1, out[..., None])[..., 0]  # (b, t)
    length = (out == EOS).long().argmax(1) + 1  # (b,)
    keep = torch.arange(out.size(1))[None] < length[:, None]  # (b, t)
    lp = torch.tensor([gnmt_length_penalty(n, alpha) for n in length.tolist()])
    return (logp * keep).sum(1) / lp


def test_beam_search_returns_finished_hypotheses_scoring_at_least_greedys(compose_cfg):
    model = make_model(compose_cfg, seed=3)
    src = torch.cat([sources(2), sources(3)])  # (8, 10)
    with torch.no_grad():
        greedy = greedy_decode(model, src, IDS, LIMITS)
        beam = beam_search(model, src, IDS, replace(LIMITS, beam_size=4, length_penalty=0.6))
        uncached = beam_search(
            model, src, IDS, replace(LIMITS, beam_size=4, length_penalty=0.6, use_cache=False)
        )
        assert beam.tolist() == uncached.tolist()
        limits = ((src != PAD).sum(1) * LIMITS.max_len_ratio).long() + LIMITS.max_len_offset
        for row, limit in zip(beam.tolist(), limits.tolist()):
            assert EOS in row[:limit]  # finished within the limit
            assert all(i == PAD for i in row[row.index(EOS) + 1 :])  # padded after <eos>
        ours, theirs = penalised_log_prob(model, src, beam, 0.6), penalised_log_prob(model, src, greedy, 0.6)
    assert (ours >= theirs - 1e-4).all()
    assert (ours > theirs + 1e-3).any()  # and the search did find something greedy missed
    assert beam.tolist() != greedy.tolist()


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("strategy", "sample", r"decode.strategy must be 'greedy' or 'beam', got 'sample'"),
        ("beam_size", 0, r"decode.beam_size must be at least 1, got 0"),
    ],
)
def test_bad_decode_settings_are_refused_naming_the_key(key, value, match):
    with pytest.raises(ValueError, match=match):
        DecodeSettings(**{key: value})


def test_the_decode_config_block_configures_beam_search_in_the_task(compose_cfg):
    from attnlab.training.build import decode_settings

    cfg = compose_cfg(["decode.strategy=beam", "decode.beam_size=3"])
    tok = tokenizer()
    model = make_model(compose_cfg)
    task = TranslationTask(model, tok, ["test"], decode=decode_settings(cfg.decode))
    src = torch.tensor([[4, 5, tok.eos_id], [6, tok.eos_id, tok.pad_id]])
    task._decode({"src": src, "index": torch.arange(2), "ref": ["a", "b"]}, "test", with_loss=False)
    expected = beam_search(model, src, tok.special_ids, DecodeSettings(beam_size=3, length_penalty=0.6))
    assert task._eval["test"]["hyp"] == [tok.decode(row.tolist()) for row in expected]
