"""Training-loop pieces: schedule, decoding, and a NaN loss stopping the run with a clear error."""

import pytest
import torch

from attnlab.attention.patterns.full import FullPattern
from attnlab.attention.scores.scaled_dot import ScaledDotScore
from attnlab.data.synthetic import generate
from attnlab.data.tokenizer import WordTokenizer
from attnlab.decode import greedy_decode
from attnlab.model.transformer import build_transformer
from attnlab.posenc.sinusoidal import SinusoidalPositions
from attnlab.task import NonFiniteLossError, TranslationTask, inverse_sqrt


def _model(vocab_size=30):
    torch.manual_seed(0)
    return build_transformer(
        vocab_size,
        0,
        ScaledDotScore,
        FullPattern(),
        SinusoidalPositions,
        d_model=32,
        num_heads=2,
        ffn_dim=64,
        dropout=0.0,
    ).eval()


def test_inverse_sqrt_warms_up_linearly_then_decays_with_the_square_root():
    f = inverse_sqrt(100)
    assert f(0) == pytest.approx(0.01) and f(49) == pytest.approx(0.5) and f(99) == pytest.approx(1.0)
    assert f(399) == pytest.approx(0.5)


def test_greedy_decoding_stops_at_eos_and_respects_the_length_limit():
    model = _model()
    src = torch.tensor([[5, 6, 7, 2], [5, 2, 0, 0]])
    out = greedy_decode(model, src, bos_id=1, eos_id=2, pad_id=0, max_len_ratio=1.0, max_len_offset=2)
    lengths = (src != 0).sum(1)
    for row, limit in zip(out, (lengths + 2).tolist()):
        ids = row.tolist()
        assert 2 in ids[:limit]  # every sentence ends within its limit
        assert all(i == 0 for i in ids[ids.index(2) + 1 :])  # and only padding follows


def test_decoding_the_batch_equals_decoding_each_sentence_alone():
    model = _model()
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    batch = greedy_decode(model, src, 1, 2, 0)
    for i, length in enumerate([5, 3]):
        alone = greedy_decode(model, src[i : i + 1, :length], 1, 2, 0)
        n = alone.size(1)
        assert batch[i, :n].tolist() == alone[0].tolist()


def test_a_nan_loss_stops_training_with_an_error_naming_the_learning_rate():
    corpus = generate(train_size=20, valid_size=5, test_size=5, test_long_size=2)
    tok = WordTokenizer.train(p.src + " " + p.tgt for p in corpus.splits["train"])
    task = TranslationTask(_model(tok.vocab_size), tok, ["test"], lr=1e-3)
    task.train()
    with torch.no_grad():
        task.model.generator.weight.fill_(float("nan"))
    batch = {"src": torch.tensor([[5, 6, 2]]), "tgt": torch.tensor([[1, 7, 8, 2]])}
    task.optimizers = lambda: None
    with pytest.raises(NonFiniteLossError, match=r"train/loss became nan at step 0: lower optim.lr"):
        task.training_step(batch, 0)
