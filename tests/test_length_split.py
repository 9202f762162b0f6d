"""data.max_train_words: train short, test long on any corpus."""

import pytest

from attnlab.data.corpus import Corpus, Pair
from attnlab.data.length_split import split_by_length


def pair(n: int) -> Pair:
    return Pair(" ".join(["w"] * n), " ".join(["v"] * n))


def corpus(**extra) -> Corpus:
    splits = {
        "train": [pair(n) for n in (3, 5, 8)],
        "valid": [pair(4), pair(9)],
        "test": [pair(n) for n in (2, 5, 7, 12)],
    }
    return Corpus("c", {**splits, **extra}, "en", "de")


def lengths(pairs) -> list[int]:
    return [len(p.src.split()) for p in pairs]


def test_longer_test_pairs_become_test_long_and_training_keeps_only_short_pairs():
    out = split_by_length(corpus(), 5)
    assert lengths(out.splits["train"]) == [3, 5] and lengths(out.splits["valid"]) == [4]
    assert lengths(out.splits["test"]) == [2, 5] and lengths(out.splits["test_long"]) == [7, 12]
    assert out.eval_splits == ["test", "test_long"]
    assert min(lengths(out.splits["test_long"])) > max(lengths(out.splits["train"]))


def test_a_corpus_with_its_own_test_long_keeps_it_and_its_test():
    own = [pair(30)]
    out = split_by_length(corpus(test_long=own), 5)
    assert out.splits["test_long"] == own and lengths(out.splits["test"]) == [2, 5, 7, 12]
    assert lengths(out.splits["train"]) == [3, 5]


@pytest.mark.parametrize(
    "max_words, message",
    [
        (0, "data.max_train_words must be positive or null, got 0"),
        (12, "no test sentence is longer (the longest has 12 words)"),
        (2, "leaves no train pairs; raise it"),
    ],
)
def test_a_bad_limit_names_the_key_and_what_to_do(max_words, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        split_by_length(corpus(), max_words)
