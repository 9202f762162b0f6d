"""Token-budget batches: within budget, each example once per epoch, seeded, and far less padding."""

from pathlib import Path

import pytest

from attnlab.data.batching import TokenBudgetBatchSampler, fixed_size_batches, padding_fraction
from attnlab.data.corpus import Corpus, Pair
from attnlab.data.datamodule import TranslationDataModule
from attnlab.data.synthetic import generate
from attnlab.data.tokenizers.word import WordTokenizer

MULTI30K = Path(__file__).parents[2] / "shared" / "data" / "multi30k"
MAX_TOKENS = 600


@pytest.fixture(scope="module")
def data() -> TranslationDataModule:
    """3,000 Multi30k training pairs (word tokens), with a token budget."""
    if not MULTI30K.is_dir():
        pytest.skip(f"Multi30k not found at {MULTI30K} (the shared data folder beside the checkout)")
    sides = []
    for lang in ("en", "de"):
        with open(MULTI30K / f"train.{lang}", encoding="utf-8") as f:
            sides.append([" ".join(next(f).split()) for _ in range(3000)])
    pairs = [Pair(s, t) for s, t in zip(*sides)]
    corpus = Corpus("multi30k", {"train": pairs, "valid": pairs[:50], "test": pairs[:50]}, "en", "de")
    tokenizer = WordTokenizer.train(sides[0] + sides[1])
    return TranslationDataModule(corpus, tokenizer, 32, 64, max_tokens=MAX_TOKENS, seed=0)


def test_batches_stay_within_the_token_budget_unless_one_sentence_exceeds_it(data):
    seen = 0
    for batch in data.train_dataloader():
        b, t_src = batch["src"].shape  # (b, t_src), (b, t_tgt)
        longest = max(t_src, batch["tgt"].shape[1])
        assert b * longest <= MAX_TOKENS or b == 1
        seen += b
    assert seen == len(data.splits["train"])


def test_a_sentence_longer_than_the_budget_gets_a_batch_of_its_own():
    sampler = TokenBudgetBatchSampler([3, 50, 4, 5, 3], max_tokens=10, seed=1)
    batches = sampler.batches(0)
    assert [1] in batches
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4]
    assert all(len(b) * max([3, 50, 4, 5, 3][i] for i in b) <= 10 for b in batches if b != [1])


def test_every_example_comes_once_per_epoch_and_the_order_is_seeded_and_changes_each_epoch(data):
    lengths = [max(s, t) for s, t in zip(*data.train_lengths)]
    sampler = TokenBudgetBatchSampler(lengths, MAX_TOKENS, seed=5)
    epochs = [list(sampler), list(sampler)]
    for batches in epochs:
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert epochs[0] != epochs[1]
    again = TokenBudgetBatchSampler(lengths, MAX_TOKENS, seed=5)
    assert list(again) == epochs[0] and list(again) == epochs[1]
    assert TokenBudgetBatchSampler(lengths, MAX_TOKENS, seed=6).batches(0) != epochs[0]


def test_the_length_is_the_number_of_batches_served_in_every_epoch(data):
    # Lightning finds an epoch's last batch (and so when to validate) from len(); it must not drift
    lengths = [max(s, t) for s, t in zip(*data.train_lengths)]
    sampler = TokenBudgetBatchSampler(lengths, MAX_TOKENS, seed=5)
    for _ in range(3):
        expected = len(sampler)
        assert len(list(sampler)) == expected


def test_token_budget_batches_pad_far_less_than_random_batches_of_the_same_mean_size(data):
    src, tgt = data.train_lengths
    bucketed = data.batch_sampler.batches(0)
    mean_size = round(len(src) / len(bucketed))
    random_batches = fixed_size_batches(len(src), mean_size, seed=0)
    bucketed_padding = padding_fraction(bucketed, src, tgt)
    random_padding = padding_fraction(random_batches, src, tgt)
    assert bucketed_padding < 0.5 * random_padding
    assert data.train_padding_fraction == pytest.approx(bucketed_padding)


def test_without_a_token_budget_batches_keep_the_fixed_batch_size_and_report_their_padding():
    corpus = generate(train_size=200, valid_size=20, test_size=20, test_long_size=10)
    tokenizer = WordTokenizer.train(
        [p.src for p in corpus.splits["train"]] + [p.tgt for p in corpus.splits["train"]]
    )
    data = TranslationDataModule(corpus, tokenizer, 32, 64)  # positional, as before max_tokens
    sizes = [len(batch["index"]) for batch in data.train_dataloader()]
    assert sizes == [32] * 6 + [8]
    assert 0.0 < data.train_padding_fraction < 1.0


def test_a_non_positive_token_budget_names_the_key():
    with pytest.raises(ValueError, match="data.max_tokens must be positive or null, got 0"):
        TokenBudgetBatchSampler([3, 4], max_tokens=0)
