"""The FlexAttention path (``attention.backend``): on CPU, without gradients (eager FlexAttention has no
backward there), it gives the explicit path's and SDPA's outputs for ALiBi and T5 biases at encoder and
decoder sites, under padding, causal, local and dilated masks, with an empty query row, grouped-query
heads and every score that has a fused form; the encodings' bias (their ``score_mod`` on the whole
grid) is the papers' formula; ``auto`` keeps today's path on CPU; ``flex`` refuses to train on CPU; a
bad value names the key. One slow test compiles the score and mask functions with Inductor (CPU) and
checks the fused kernel."""

import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from torch.nn.attention.flex_attention import flex_attention

import attnlab.attention.multi_head as multi_head
from attnlab.attention.flex import block_mask, flex_attend
from attnlab.attention.masks import causal_mask, combine, padding_mask
from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.patterns.dilated import DilatedPattern
from attnlab.attention.patterns.full import FullPattern
from attnlab.attention.patterns.local import LocalPattern
from attnlab.attention.recording import record_attention
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.model.spec import AttentionParts
from attnlab.posenc.alibi import AlibiPositions
from attnlab.posenc.base import PositionalEncoding
from attnlab.posenc.t5_bias import T5BiasPositions, relative_position_bucket
from attnlab.training.build import build_model

from conftest import compose_fast, config_options

# eager FlexAttention on CPU says it is not compiled: known, it is the forward-only reference here
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

D_MODEL, HEADS, B, T = 32, 4, 2, 7
PATTERNS = {"full": FullPattern(), "local": LocalPattern(window=2), "dilated": DilatedPattern(dilation=2)}
ENCODINGS = {"alibi": AlibiPositions, "t5_bias": T5BiasPositions}


def fused_scores() -> dict[str, object]:
    """Every ``attention/score`` option with a fused form, as a factory ``(key_dim, num_heads)``."""
    scores = {}
    for name in config_options("attention/score"):
        factory = instantiate(compose_fast([f"attention/score={name}"]).attention.score)
        q = torch.randn(1, 2, 3, 4)
        if factory(key_dim=4, num_heads=2).fused(q, q) is not None:
            scores[name] = factory
    return scores


FUSED = fused_scores()


def encoding(name: str) -> PositionalEncoding:
    torch.manual_seed(1)
    pe = ENCODINGS[name](D_MODEL, HEADS, D_MODEL // HEADS)
    if isinstance(pe, T5BiasPositions):
        torch.nn.init.normal_(pe.table.weight, std=1.0)  # biases as large as the scores: they must show
    return pe


def site_mask(site: str, pattern: str) -> torch.Tensor:
    """(2, 1, T, T): padding after 5 tokens in sentence 0, causal in the decoder, the pattern, and query 1
    of sentence 0 sees nothing."""
    pos = torch.arange(T)
    tokens = torch.ones(B, T, dtype=torch.long)
    tokens[0, 5:] = 0
    causal = causal_mask(pos, pos) if site == "decoder" else None
    mask = combine(padding_mask(tokens, 0), causal, PATTERNS[pattern](pos, pos))
    mask = mask.expand(B, 1, T, T).clone()
    mask[0, 0, 1] = False
    return mask


def attention(score, posenc, site, num_kv_heads=None, backend="flex") -> MultiHeadAttention:
    torch.manual_seed(0)
    d_k = D_MODEL // HEADS
    return MultiHeadAttention(
        D_MODEL,
        HEADS,
        score(key_dim=d_k, num_heads=HEADS),
        posenc,
        site,
        num_kv_heads=num_kv_heads,
        backend=backend,
    ).eval()


@pytest.fixture
def flex_calls(monkeypatch) -> list[int]:
    """Counts the forwards that took the FlexAttention path."""
    calls, flex_attend = [], multi_head.flex_attend

    def counted(*args):
        calls.append(1)
        return flex_attend(*args)

    monkeypatch.setattr(multi_head, "flex_attend", counted)
    return calls


def three_paths(attn: MultiHeadAttention, x_q, x_kv, mask, q_pos, k_pos):
    """(flex, sdpa, explicit) outputs of ``attn``, without gradients (inference mode, as Lightning
    validates: one grad mode for every test here, so they share FlexAttention's traced graphs)."""
    with torch.inference_mode():
        attn.backend = "flex"
        flex = attn(x_q, x_kv, mask, q_pos, k_pos)
        attn.backend = "sdpa"
        sdpa = attn(x_q, x_kv, mask, q_pos, k_pos)
        with record_attention(attn):
            explicit = attn(x_q, x_kv, mask, q_pos, k_pos)
    return flex, sdpa, explicit


def assert_three_agree(flex, sdpa, explicit) -> None:
    assert torch.isfinite(flex).all()
    torch.testing.assert_close(flex, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(flex, sdpa, atol=1e-5, rtol=1e-5)


def test_the_fused_scores_found_include_the_four_that_sdpa_can_compute():
    assert {"scaled_dot", "dot", "general", "cosine"} <= set(FUSED)


@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("site", ["encoder", "decoder"])
@pytest.mark.parametrize("posenc", list(ENCODINGS))
def test_flex_equals_explicit_and_sdpa_for_every_fused_score_with_a_bias_and_a_mask(
    posenc, site, pattern, flex_calls, one_thread
):
    x, pos, mask = torch.randn(B, T, D_MODEL), torch.arange(T), site_mask(site, pattern)
    for score in FUSED.values():
        flex, sdpa, explicit = three_paths(attention(score, encoding(posenc), site), x, x, mask, pos, pos)
        assert_three_agree(flex, sdpa, explicit)
    assert len(flex_calls) == len(FUSED)


def test_a_query_row_with_nothing_to_attend_gives_the_same_zeros_on_flex(one_thread):
    attn = attention(ScaledDotScore, encoding("alibi"), "encoder")
    x, pos, mask = torch.randn(B, T, D_MODEL), torch.arange(T), site_mask("encoder", "local")
    with torch.inference_mode():
        attn.backend = "flex"
        out = attn(x, x, mask, pos, pos)
    torch.testing.assert_close(out[0, 1], attn.out_proj.bias)  # zero attention output, then W_O's bias
    assert torch.isfinite(out).all()


def test_flex_with_grouped_query_heads_equals_the_other_paths(one_thread):
    x, pos, mask = torch.randn(B, T, D_MODEL), torch.arange(T), site_mask("decoder", "local")
    attn = attention(ScaledDotScore, encoding("alibi"), "decoder", num_kv_heads=2)
    assert_three_agree(*three_paths(attn, x, x, mask, pos, pos))


def test_flex_cross_attention_with_a_padding_mask_and_no_bias_equals_the_other_paths(one_thread):
    src_tokens = torch.tensor([[5, 6, 7, 0, 0, 0, 0, 0, 0], [5, 6, 7, 8, 9, 1, 2, 3, 4]])
    mask = padding_mask(src_tokens, 0)  # (b, 1, 1, s): broadcast over queries
    attn = attention(ScaledDotScore, PositionalEncoding(D_MODEL, HEADS, 8), "cross")
    y, memory = torch.randn(B, T, D_MODEL), torch.randn(B, 9, D_MODEL)
    assert_three_agree(*three_paths(attn, y, memory, mask, torch.arange(T), torch.arange(9)))


class TableBias(PositionalEncoding):
    """A new encoding that defines only its ``score_mod``: a random table per head, query and key."""

    def __init__(self, d_model, num_heads, head_dim, key_dim=None):
        super().__init__(d_model, num_heads, head_dim, key_dim)
        self.register_buffer("table", torch.randn(num_heads, 16, 16))  # (h, t_q max, t_k max)

    def score_mod(self, q_pos, k_pos, site):
        return lambda score, b, h, i, j: score + self.table[h, q_pos[i], k_pos[j]]


def test_an_encoding_with_only_a_score_mod_gets_its_bias_and_runs_on_every_path(flex_calls, one_thread):
    torch.manual_seed(2)
    pe = TableBias(D_MODEL, HEADS, 8)
    q_pos, k_pos = torch.tensor([3, 1, 4, 1]), torch.tensor([5, 9, 2])
    assert torch.equal(pe.bias(q_pos, k_pos, "encoder"), pe.table[:, q_pos][:, :, k_pos][None])
    attn = attention(ScaledDotScore, pe, "encoder")
    x, pos, mask = torch.randn(B, T, D_MODEL), torch.arange(T), site_mask("encoder", "dilated")
    assert_three_agree(*three_paths(attn, x, x, mask, pos, pos))
    assert flex_calls == [1]


@pytest.mark.parametrize("site", ["encoder", "decoder"])
def test_the_bias_is_the_papers_formula_also_far_beyond_the_bucket_range(site):
    q_pos, k_pos = torch.arange(150, 160), torch.arange(0, 300, 3)  # distances up to ~300 (T5: 128 max)
    rel = q_pos[:, None] - k_pos[None, :]  # (t_q, t_k), i − j
    alibi = encoding("alibi")
    dist = rel.abs() if site == "encoder" else rel.clamp(min=0)
    torch.testing.assert_close(alibi.bias(q_pos, k_pos, site)[0], -alibi.slopes[:, None, None] * dist)
    t5 = encoding("t5_bias")
    buckets = relative_position_bucket(-rel, site == "encoder", t5.num_buckets, t5.max_distance)  # j − i
    torch.testing.assert_close(t5.bias(q_pos, k_pos, site)[0], t5.table.weight[buckets].permute(2, 0, 1))


def test_the_t5_score_mod_passes_gradients_to_the_table():
    pe, pos = encoding("t5_bias"), torch.arange(20)
    h, i, j = torch.arange(HEADS)[:, None, None], torch.arange(20)[:, None], torch.arange(20)[None, :]
    weights = torch.randn(HEADS, 20, 20)
    (pe.score_mod(pos, pos, "decoder")(torch.zeros(()), 0, h, i, j) * weights).sum().backward()
    via_mod, pe.table.weight.grad = pe.table.weight.grad, None
    (pe.bias(pos, pos, "decoder")[0] * weights).sum().backward()
    assert via_mod is not None and via_mod.abs().sum() > 0
    torch.testing.assert_close(via_mod, pe.table.weight.grad)


def test_flex_under_bf16_autocast_stays_close_to_sdpa(one_thread):
    x, pos, mask = torch.randn(B, T, D_MODEL), torch.arange(T), site_mask("decoder", "local")
    for posenc in ENCODINGS:
        attn = attention(ScaledDotScore, encoding(posenc), "decoder")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            flex, sdpa, _ = three_paths(attn, x, x, mask, pos, pos)
        assert flex.dtype == sdpa.dtype == torch.bfloat16
        torch.testing.assert_close(flex.float(), sdpa.float(), atol=3e-2, rtol=3e-2)


def test_flex_casts_float32_queries_and_keys_to_the_values_dtype_as_autocast_would(one_thread):
    q, k = torch.randn(B, HEADS, T, 8), torch.randn(B, HEADS, T, 8)  # a cosine score's norm is float32
    v = torch.randn(B, HEADS, T, 8).bfloat16()
    mask = site_mask("encoder", "full")
    with torch.inference_mode():
        out = flex_attend(q, k, v, 0.5, mask, None)
        reference = F.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v, attn_mask=mask, scale=0.5)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out[1], reference[1], atol=2e-2, rtol=2e-2)  # sentence 1 has no empty row


def tiny_model(backend: str, posenc="alibi", mask="local"):
    """A one-layer model of the attention tests' sizes (so the FlexAttention graphs traced there serve)."""
    cfg = compose_fast(
        [
            f"posenc={posenc}",
            f"attention/mask={mask}",
            f"attention.backend={backend}",
            f"model.d_model={D_MODEL}",
            f"model.num_heads={HEADS}",
            "model.ffn_dim=32",
            "model.encoder_layers=1",
            "model.decoder_layers=1",
        ]
    )
    torch.manual_seed(0)
    return build_model(cfg, vocab_size=30, pad_id=0)


def model_batch():
    src, tgt = torch.randint(3, 30, (B, 9)), torch.randint(3, 30, (B, T))  # the lengths used above
    src[0, 5:], tgt[1, 4:] = 0, 0
    return src, tgt


def backends(model) -> dict[str, str]:
    return {name: m.backend for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}


def test_a_model_with_backend_flex_gives_the_logits_of_sdpa_without_gradients(flex_calls, one_thread):
    flex_model = tiny_model("flex").eval()
    src, tgt = model_batch()
    with torch.inference_mode():  # as Lightning validates and tests
        flex = flex_model(src, tgt)
        for m in flex_model.modules():
            if isinstance(m, MultiHeadAttention):
                m.backend = "sdpa"
        sdpa = flex_model(src, tgt)
    torch.testing.assert_close(flex, sdpa, atol=1e-5, rtol=1e-5)
    assert len(flex_calls) == 3  # encoder self, decoder self and cross attention


def test_auto_reaches_only_the_sites_with_a_pattern_or_a_bias():
    assert set(backends(tiny_model("auto", "sinusoidal", "full")).values()) == {"sdpa"}
    sites = backends(tiny_model("auto", "alibi", "full"))
    assert {n: b for n, b in sites.items() if "cross" in n} == {"decoder.layers.0.cross_attn": "sdpa"}
    assert {b for n, b in sites.items() if "cross" not in n} == {"auto"}
    assert set(backends(tiny_model("flex", "sinusoidal", "full")).values()) == {"flex"}


def test_auto_on_cpu_takes_the_existing_path_and_trains(flex_calls, one_thread):
    model = tiny_model("auto").train()
    src, tgt = model_batch()
    model(src, tgt).sum().backward()
    assert flex_calls == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_backend_flex_refuses_to_train_on_cpu_in_one_line():
    model = tiny_model("flex").train()
    with pytest.raises(ValueError, match="attention.backend=flex") as error:
        model(*model_batch())
    assert "\n" not in str(error.value)


def test_a_bad_backend_is_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"attention.backend must be one of .*'triton'"):
        AttentionParts(ScaledDotScore, FullPattern(), PositionalEncoding, backend="triton")
    with pytest.raises(ValueError, match="attention.backend"):
        tiny_model("triton")
    with pytest.raises(ValueError, match="attention.backend"):
        attention(ScaledDotScore, PositionalEncoding(D_MODEL, HEADS, 8), "encoder", backend="fast")


@pytest.mark.slow
@pytest.mark.parametrize(
    "posenc,site,pattern", [("alibi", "decoder", "local"), ("t5_bias", "encoder", "dilated")]
)
def test_the_score_and_mask_functions_compile_to_a_fused_kernel_that_agrees(
    posenc, site, pattern, one_thread
):
    """Inductor's CPU kernel (static shapes; the CUDA path compiles the same functions with Triton)."""
    compiled = torch.compile(flex_attention, dynamic=False)
    pe, pos, mask = encoding(posenc), torch.arange(T), site_mask(site, pattern)
    q, k, v = (torch.randn(B, HEADS, T, 8) for _ in range(3))
    mod = pe.score_mod(pos, pos, site)
    with torch.inference_mode():
        fused = compiled(q, k, v, score_mod=mod, block_mask=block_mask(mask, (B, HEADS, T, T)), scale=0.3)
        eager = flex_attend(q, k, v, 0.3, mask, mod)
    torch.testing.assert_close(fused, eager, atol=1e-5, rtol=1e-5)
