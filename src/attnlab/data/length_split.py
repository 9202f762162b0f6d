"""Train short, test long on any corpus: ``data.max_train_words``.

Keeps the training and validation pairs whose source has at most N words, and, when the corpus has no
``test_long`` split of its own (real data), moves the test pairs longer than N words into one, so that
``test_long`` holds only sentences longer than anything seen in training and ``test`` the in-range
rest. The synthetic corpus has its own ``test_long`` (longer than its longest training sentence): there
only train and valid are filtered.
"""

from __future__ import annotations

from dataclasses import replace

from attnlab.data.corpus import Corpus, Pair


def words(pair: Pair) -> int:
    return len(pair.src.split())


def split_by_length(corpus: Corpus, max_words: int) -> Corpus:
    """The corpus with train/valid cut to ``max_words`` source words and (if absent) a ``test_long``.

    Raises:
        ValueError: if ``max_words`` is not positive, or a split it must keep would be left empty.
    """
    if max_words <= 0:
        raise ValueError(f"data.max_train_words must be positive or null, got {max_words}")
    splits = dict(corpus.splits)
    for name in ("train", "valid"):
        splits[name] = [p for p in corpus.splits[name] if words(p) <= max_words]
    if not corpus.splits.get("test_long"):
        test = corpus.splits["test"]
        splits["test"] = [p for p in test if words(p) <= max_words]
        splits["test_long"] = [p for p in test if words(p) > max_words]
        if not splits["test_long"]:
            longest = max(map(words, test))
            raise ValueError(
                f"data.max_train_words={max_words}: no test sentence is longer (the longest has {longest} "
                "words), so there is no test_long; lower it"
            )
    for name in ("train", "valid", "test"):
        if not splits[name]:
            raise ValueError(f"data.max_train_words={max_words} leaves no {name} pairs; raise it")
    return replace(corpus, splits=splits)
