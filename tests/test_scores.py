"""Every score in conf/attention/score/ against the contract, and each against its known answer.

Tests over the whole group parametrise over the YAML files, so a new score is covered without edits here.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.utils._python_dispatch import TorchDispatchMode

from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.attention.probs import masked_softmax
from attnlab.attention.scores.additive import AdditiveScore, AdditiveScores
from attnlab.attention.scores.cosine import CosineScore
from attnlab.attention.scores.dot import DotScore
from attnlab.attention.scores.gaussian import GaussianScore
from attnlab.attention.scores.general import GeneralScore
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.config import CONF_DIR
from attnlab.posenc.base import PositionalEncoding

from conftest import fused_and_explicit, self_attention_mask_with_an_empty_row

SCORE_FILES = sorted((Path(CONF_DIR) / "attention" / "score").glob("*.yaml"))
IDS = [p.stem for p in SCORE_FILES]


def build(path: Path, key_dim: int = 8, num_heads: int = 4) -> torch.nn.Module:
    """The score a model would get from this config: the ``_partial_`` finished with the shapes."""
    return instantiate(OmegaConf.load(path))(key_dim=key_dim, num_heads=num_heads)


def has_fused_form(path: Path) -> bool:
    q = torch.zeros(1, 4, 2, 8)
    return build(path).fused(q, q) is not None


FUSED_FILES = [p for p in SCORE_FILES if has_fused_form(p)]


def perturbed(score: torch.nn.Module) -> torch.nn.Module:
    """The score with every parameter moved off its initial value, so no test leans on the init."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in score.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return score


def qk(t_q: int = 5, t_k: int = 7, d: int = 8, h: int = 4, dtype=torch.float32):
    torch.manual_seed(0)
    q = torch.randn(2, h, t_q, d, dtype=dtype, requires_grad=True)
    k = torch.randn(2, h, t_k, d, dtype=dtype, requires_grad=True)
    return q, k


@pytest.mark.parametrize("key_dim", [8, 12])
@pytest.mark.parametrize("path", SCORE_FILES, ids=IDS)
def test_every_score_gives_one_finite_score_per_query_key_pair_and_gradients_to_all_inputs(path, key_dim):
    score = build(path, key_dim=key_dim)
    q, k = qk(t_q=5, t_k=7, d=key_dim)
    s = score(q, k)
    assert s.shape == (2, 4, 5, 7) and torch.isfinite(s).all()
    s.square().sum().backward()
    for name, t in [("q", q), ("k", k), *score.named_parameters()]:
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0, name


@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("path", FUSED_FILES, ids=[p.stem for p in FUSED_FILES])
def test_every_fused_form_agrees_with_its_explicit_path_through_attention(path, num_kv_heads):
    d_model, num_heads = 32, 4
    score = perturbed(build(path, key_dim=d_model // num_heads, num_heads=num_heads))
    torch.manual_seed(0)
    attn = MultiHeadAttention(
        d_model,
        num_heads,
        score,
        PositionalEncoding(d_model, num_heads, 8),
        "encoder",
        num_kv_heads=num_kv_heads,
    ).eval()
    x = torch.randn(2, 5, d_model)
    mask, pos = self_attention_mask_with_an_empty_row(), torch.arange(5)
    fused, explicit = fused_and_explicit(attn, x, x, mask, pos, pos)
    assert torch.isfinite(fused).all()
    assert torch.allclose(fused, explicit, atol=1e-5), (fused - explicit).abs().max()


def test_exactly_the_scores_sdpa_cannot_express_have_no_fused_form():
    assert {p.stem for p in SCORE_FILES} - {p.stem for p in FUSED_FILES} == {"additive", "gaussian"}


@pytest.mark.parametrize("num_kv_heads", [None, 2])
@pytest.mark.parametrize("path", SCORE_FILES, ids=IDS)
def test_every_score_attends_the_same_on_both_paths_when_keys_are_narrower_than_values(path, num_kv_heads):
    d_model, num_heads, key_dim, head_dim = 32, 4, 16, 32
    score = perturbed(build(path, key_dim=key_dim, num_heads=num_heads))
    torch.manual_seed(0)
    attn = MultiHeadAttention(
        d_model,
        num_heads,
        score,
        PositionalEncoding(d_model, num_heads, head_dim, key_dim),
        "encoder",
        head_dim=head_dim,
        num_kv_heads=num_kv_heads,
        key_dim=key_dim,
    ).eval()
    x = torch.randn(2, 5, d_model)
    mask, pos = self_attention_mask_with_an_empty_row(), torch.arange(5)
    fused, explicit = fused_and_explicit(attn, x, x, mask, pos, pos)
    assert torch.isfinite(fused).all()
    assert torch.allclose(fused, explicit, atol=1e-5), (fused - explicit).abs().max()
    # the reference: the score's own formula on d_k-wide heads, weighting d_v-wide values
    group = num_heads // (num_kv_heads or num_heads)
    q = attn.q_proj(x).view(2, 5, num_heads, key_dim).transpose(1, 2)  # (b, h, t, d_k)
    k = attn.k_proj(x).view(2, 5, -1, key_dim).transpose(1, 2).repeat_interleave(group, 1)  # (b, h, t, d_k)
    v = attn.v_proj(x).view(2, 5, -1, head_dim).transpose(1, 2).repeat_interleave(group, 1)  # (b, h, t, d_v)
    heads = masked_softmax(score(q, k), mask) @ v  # (b, h, t, d_v)
    expected = attn.out_proj(heads.transpose(1, 2).reshape(2, 5, num_heads * head_dim))  # (b, t, d_model)
    expected[0, 2] = attn.out_proj.bias  # the query that sees no key: zero heads, then the projection
    assert torch.allclose(explicit, expected, atol=1e-5), (explicit - expected).abs().max()


def test_scores_are_built_on_the_query_key_width_they_compare():
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 4, 7, 16)
    assert torch.allclose(ScaledDotScore(16, 4)(q, k), q @ k.transpose(-2, -1) / 4, atol=1e-6)
    assert ScaledDotScore(16, 4).fused(q, k)[2] == 0.25
    assert GeneralScore(16, 4).weight.shape == (4, 16, 16)
    assert AdditiveScore(16, 4).w_q.shape == AdditiveScore(16, 4).w_k.shape == (4, 16, 16)
    assert torch.allclose(CosineScore(16, 4, init_temperature=None).temperature, torch.full((4,), 4.0))
    assert torch.allclose(GaussianScore(16, 4).sigma, torch.full((4,), 2.0))


def test_dot_is_scaled_dot_times_sqrt_d():
    q, k = qk()
    assert torch.allclose(DotScore(8, 4)(q, k), ScaledDotScore(8, 4)(q, k) * math.sqrt(8), atol=1e-5)


def test_general_with_identity_weight_is_dot_and_starts_as_scaled_dot():
    q, k = qk()
    general = GeneralScore(8, 4)
    assert torch.allclose(general(q, k), ScaledDotScore(8, 4)(q, k), atol=1e-6)
    with torch.no_grad():
        general.weight.copy_(torch.eye(8).expand(4, 8, 8))
    assert torch.allclose(general(q, k), DotScore(8, 4)(q, k), atol=1e-5)


def test_general_uses_a_separate_matrix_per_head():
    q, k = qk()
    general = GeneralScore(8, 4)
    with torch.no_grad():
        general.weight.copy_(torch.randn(4, 8, 8))
    expected = torch.stack([q[:, i] @ general.weight[i] @ k[:, i].transpose(-2, -1) for i in range(4)], 1)
    assert torch.allclose(general(q, k), expected, atol=1e-5)


def test_cosine_is_cosine_similarity_times_the_per_head_temperature():
    q, k = qk()
    cosine = perturbed(CosineScore(8, 4, init_temperature=10.0))
    cos = F.cosine_similarity(q[:, :, :, None, :], k[:, :, None, :, :], dim=-1)  # (b, h, t_q, t_k)
    expected = cos * cosine.log_temperature.exp()[:, None, None]
    assert torch.allclose(cosine(q, k), expected, atol=1e-5)
    assert torch.allclose(
        CosineScore(8, 4, init_temperature=None).temperature, torch.full((4,), math.sqrt(8))
    )


def test_gaussian_is_minus_squared_distance_over_two_sigma_squared():
    q, k = qk()
    gaussian = perturbed(GaussianScore(8, 4))
    sq_dist = (q[:, :, :, None, :] - k[:, :, None, :, :]).pow(2).sum(-1)  # (b, h, t_q, t_k)
    expected = -sq_dist / (2 * gaussian.sigma[:, None, None] ** 2)
    assert torch.allclose(gaussian(q, k), expected, atol=1e-5)


def test_gaussian_initial_width_gives_softmax_of_scaled_dot():
    # −‖q−k‖²/(2σ²) with σ² = sqrt(d) is q·k/sqrt(d) plus terms constant per query row or per key;
    # with keys of equal norm only the first changes the softmax.
    q, k = qk()
    k = F.normalize(k, dim=-1) * 3
    p = torch.softmax(GaussianScore(8, 4)(q, k), -1)
    assert torch.allclose(p, torch.softmax(ScaledDotScore(8, 4)(q, k), -1), atol=1e-5)


def naive_additive(score: AdditiveScore, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    a, c = q @ score.w_q, k @ score.w_k  # (b, h, t_q, n), (b, h, t_k, n)
    tanh = torch.tanh(a[:, :, :, None, :] + c[:, :, None, :, :])  # (b, h, t_q, t_k, n)
    return (tanh * score.v[:, None, None, :]).sum(-1)  # (b, h, t_q, t_k)


@pytest.mark.parametrize("weight_scale", [1.0, 30.0], ids=["exp_identity", "tanh_fallback"])
@pytest.mark.parametrize("max_chunk_elements", [2**22, 700], ids=["one_chunk", "uneven_chunks"])
def test_additive_matches_the_naive_formula_in_value_and_gradient(weight_scale, max_chunk_elements):
    torch.manual_seed(0)
    score = AdditiveScore(8, 4, hidden_dim=6, max_chunk_elements=max_chunk_elements)
    with torch.no_grad():
        score.w_q.mul_(weight_scale)  # 30: |W_q q| passes 20 and the tanh fallback runs
    q, k = qk(t_q=9, t_k=7)
    assert ((q @ score.w_q).abs().max() > 20) == (weight_scale > 1)  # the regime the id names
    ours, naive = score(q, k), naive_additive(score, q, k)
    assert torch.allclose(ours, naive, atol=1e-5), (ours - naive).abs().max()
    g = torch.randn_like(ours)
    inputs = [q, k, score.w_q, score.w_k, score.v]
    for mine, ref in zip(torch.autograd.grad(ours, inputs, g), torch.autograd.grad(naive, inputs, g)):
        assert torch.allclose(mine, ref, atol=1e-5 * max(1.0, ref.abs().max().item())), (
            (mine - ref).abs().max()
        )


@pytest.mark.parametrize("scale", [1.0, 15.0], ids=["exp_identity", "tanh_fallback"])
def test_additive_gradients_pass_gradcheck_in_float64(scale):
    torch.manual_seed(0)
    a = (scale * torch.randn(1, 2, 5, 3, dtype=torch.float64)).requires_grad_()
    c = torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert (a.abs().max() > 20) == (scale > 1)  # the regime the id names
    assert torch.autograd.gradcheck(lambda a, c, v: AdditiveScores.apply(a, c, v, 2), (a, c, v))


def test_additive_tolerates_zero_entries_in_v():
    score = AdditiveScore(8, 4, hidden_dim=6)
    with torch.no_grad():
        score.v[:, ::2] = 0.0
    q, k = qk()
    assert torch.allclose(score(q, k), naive_additive(score, q, k), atol=1e-5)


class LargestTensor(TorchDispatchMode):
    """Records the most elements any tensor produced inside it had (backward included)."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


def test_additive_never_holds_the_whole_five_dimensional_tensor():
    b, h, t_q, t_k, n = 2, 4, 24, 20, 16
    score = AdditiveScore(8, h, hidden_dim=n, max_chunk_elements=4096)
    q, k = qk(t_q=t_q, t_k=t_k, h=h)
    with LargestTensor() as seen:
        score(q, k).sum().backward()
    assert seen.numel <= max(4096, b * h * t_q * t_k) < b * h * t_q * t_k * n


def test_additive_hidden_size_defaults_to_the_head_size():
    assert AdditiveScore(8, 4).v.shape == (4, 8)
    assert AdditiveScore(8, 4, hidden_dim=32).w_q.shape == (4, 8, 32)
    with pytest.raises(ValueError, match="hidden_dim"):
        AdditiveScore(8, 4, hidden_dim=0)


@pytest.mark.parametrize("cls,key", [(CosineScore, "init_temperature"), (GaussianScore, "init_sigma")])
def test_learned_scales_refuse_a_non_positive_start_naming_the_key(cls, key):
    with pytest.raises(ValueError, match=key):
        cls(8, 4, **{key: 0.0})


# --------------------------------------------------------------------------------------------------------
# Additive score: its two loops for the exp identity, the fused CPU float32 kernel
# (attention/scores/_additive_kernel.py) and the eager chunked loop (every other device and dtype), each
# against the textbook formula at a realistic length, and the plain tanh fallback beyond the identity.
# (Imports are local to keep this section self-contained at the end of the file.)
# --------------------------------------------------------------------------------------------------------


def _kernel_built() -> bool:
    from attnlab.attention.scores import _additive_kernel

    return _additive_kernel.library() is not None


@pytest.fixture
def additive_kernel_calls(monkeypatch):
    """Counts the kernel's forward and backward calls: {"forward": n, "backward": n}."""
    from attnlab.attention.scores import _additive_kernel

    calls = {"forward": 0, "backward": 0}
    for name in calls:
        original = getattr(_additive_kernel, name)

        def counted(*args, _name=name, _original=original):
            calls[_name] += 1
            return _original(*args)

        monkeypatch.setattr(_additive_kernel, name, counted)
    return calls


class RecordedOps(TorchDispatchMode):
    """Records the name of every ATen op run inside it (backward included)."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("loop", ["kernel", "eager"])
def test_additive_fast_loops_match_the_naive_formula_to_1e5_at_length_128(loop, additive_kernel_calls):
    import contextlib

    from attnlab.attention.scores import _additive_kernel

    if loop == "kernel" and not _kernel_built():
        pytest.skip("no fused kernel here (no C compiler, or ATTNLAB_ADDITIVE_KERNEL=0): the eager loop runs")
    torch.manual_seed(0)
    score = perturbed(AdditiveScore(32, 2))
    q, k = qk(t_q=128, t_k=128, d=32, h=2)
    g = torch.randn(2, 2, 128, 128)
    inputs = [q, k, score.w_q, score.w_k, score.v]
    with _additive_kernel.disabled() if loop == "eager" else contextlib.nullcontext():
        ours = score(q, k)
        ours_grads = torch.autograd.grad(ours, inputs, g)
    assert additive_kernel_calls == (
        {"forward": 1, "backward": 1} if loop == "kernel" else {"forward": 0, "backward": 0}
    )
    naive = naive_additive(score, q, k)
    assert torch.allclose(ours, naive, rtol=0, atol=1e-5), (ours - naive).abs().max()
    for name, mine, ref in zip("q k w_q w_k v".split(), ours_grads, torch.autograd.grad(naive, inputs, g)):
        tolerance = 1e-5 * max(1.0, ref.abs().max().item())  # float32 sums of 2·128·128 terms: relative
        assert torch.allclose(mine, ref, rtol=0, atol=tolerance), (name, (mine - ref).abs().max())


def test_additive_falls_back_to_plain_tanh_once_a_passes_the_identity_limit(additive_kernel_calls):
    from attnlab.attention.scores.additive import fits_exp_identity

    torch.manual_seed(0)
    score = AdditiveScore(8, 4, hidden_dim=6)
    q, k = qk(t_q=9, t_k=7)
    tanh_ops = {"tanh_.default", "tanh_backward.grad_input"}  # the fallback's, forward and backward
    for largest_a in [15.0, 25.0]:  # the limit is 20 in float32
        with torch.no_grad():
            score.w_q.mul_(largest_a / (q @ score.w_q).abs().max())
        a, c = q @ score.w_q, k @ score.w_k  # (b, h, t_q, n), (b, h, t_k, n)
        assert fits_exp_identity(a, c) == (largest_a < 20)
        with RecordedOps() as ops:
            ours = score(q, k)
            ours.backward(torch.ones_like(ours))
        assert tanh_ops.isdisjoint(ops.names) if largest_a < 20 else tanh_ops <= ops.names, largest_a
        assert torch.allclose(ours, naive_additive(score, q, k), atol=1e-5)
    assert additive_kernel_calls["forward"] == (1 if _kernel_built() else 0)  # the run within the limit


def test_additive_uses_the_eager_loop_for_other_dtypes_and_under_bfloat16_autocast(additive_kernel_calls):
    torch.manual_seed(0)
    score = AdditiveScore(8, 4, hidden_dim=6)
    q, k = qk(t_q=9, t_k=7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = score(q, k)
        ours.float().sum().backward()
    assert ours.dtype == torch.bfloat16 and torch.isfinite(q.grad).all()
    assert torch.allclose(ours.float(), naive_additive(score, q, k), atol=0.05)
    q64, k64 = qk(t_q=9, t_k=7, dtype=torch.float64)
    score.double()(q64, k64).sum().backward()
    assert additive_kernel_calls == {"forward": 0, "backward": 0}
