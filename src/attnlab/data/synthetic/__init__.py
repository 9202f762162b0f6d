"""A synthetic translation task with gold word alignments, generated from a seed.

Source: an English-like SVO language with determiners, numerals, adjectives ("very" intensifies),
negation ("does not"), relative clauses ("that chases the dog"), prepositional phrases ("in the
garden") and clause coordination ("and").

Target: an SOV language where
- adjectives, numerals and the definite article follow the noun (``the two big dogs`` ->
  ``vufaj granaj du ta``); the indefinite article has no translation;
- nouns and their adjectives agree in number and case (subject ``-a``/``-aj``, object
  ``-on``/``-ojn``), verbs agree with their subject (``-es``/``-en``);
- several source words fuse into one target word (many-to-one): ``very big`` -> ``granissima``,
  ``does not see`` -> ``vidnees``, ``in the garden`` -> ``ĝardene``;
- prepositional phrases move to the front of their clause and relative clauses are verb-final.

Because the generator knows which source words each target word comes from, every pair carries its
gold alignment as ``(source index, target index)`` links, for scoring cross-attention (AER).

Splits ``train``/``valid``/``test`` share the length range ``[min_len, max_len]`` (source and target
both); ``test_long`` has both sides at least ``long_min_len``, which must exceed ``max_len``, so it
measures length extrapolation.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

from attnlab.data import corpus as corpus_module
from attnlab.data.cache import digest, write_atomically
from attnlab.data.corpus import Corpus, Pair
from attnlab.data.synthetic import grammar as grammar_module
from attnlab.data.synthetic import lexicon
from attnlab.data.synthetic.grammar import LONG_RATES, SHORT_RATES, GrammarRates, _Grammar, render

__all__ = ["GrammarRates", "generate", "render"]


def _sample_split(
    rng: random.Random, rates: GrammarRates, size: int, lo: int, hi: int, seen: set[str]
) -> list[Pair]:
    grammar, pairs = _Grammar(rng, rates), []
    attempts = 0
    while len(pairs) < size:
        attempts += 1
        if attempts > 200 * size + 10_000:
            raise ValueError(
                f"could not generate {size} distinct pairs with {lo}-{hi} words per side: "
                "widen the length range or lower the split size"
            )
        pair = render(grammar.sentence())
        n_src, n_tgt = len(pair.src.split()), len(pair.tgt.split())
        if lo <= min(n_src, n_tgt) and max(n_src, n_tgt) <= hi and pair.src not in seen:
            seen.add(pair.src)
            pairs.append(pair)
    return pairs


def generate(
    seed: int = 0,
    train_size: int = 20_000,
    valid_size: int = 500,
    test_size: int = 500,
    test_long_size: int = 300,
    min_len: int = 4,
    max_len: int = 16,
    long_min_len: int = 20,
    long_max_len: int = 40,
    cache_dir: str | Path | None = None,
) -> Corpus:
    """Generates the corpus; the same arguments always give the same pairs.

    Args:
        seed: seed of the generator (independent of the training seed).
        train_size, valid_size, test_size, test_long_size: pairs per split.
        min_len, max_len: words per side in train / valid / test.
        long_min_len, long_max_len: words per side in test_long; ``long_min_len > max_len``.
        cache_dir: where generated corpora are kept (``attnlab.data.cache``), keyed by the arguments and
            the generator's own source, so a run loads in a fraction of a second what takes about 1.5 s
            to generate; null = generate every time.
    """
    positive = dict(
        train_size=train_size,
        valid_size=valid_size,
        test_size=test_size,
        test_long_size=test_long_size,
        min_len=min_len,
        long_max_len=long_max_len,
    )
    for name, value in positive.items():
        if value <= 0:
            raise ValueError(f"data.corpus.{name} must be positive, got {value}")
    if not min_len <= max_len:
        raise ValueError(f"data.corpus.min_len ({min_len}) must be <= data.corpus.max_len ({max_len})")
    if long_min_len <= max_len:
        raise ValueError(
            f"test_long must be longer than train: data.corpus.long_min_len ({long_min_len}) must "
            f"exceed data.corpus.max_len ({max_len})"
        )
    if long_max_len < long_min_len:
        raise ValueError(
            f"data.corpus.long_max_len ({long_max_len}) must be >= data.corpus.long_min_len ({long_min_len})"
        )
    path = None
    if cache_dir is not None:  # keyed by every argument and the source of everything a corpus is made of
        args = dict(seed=seed, max_len=max_len, long_min_len=long_min_len, **positive)
        sources = [Path(m.__file__).read_text() for m in (grammar_module, lexicon, corpus_module)]
        path = (
            Path(cache_dir).expanduser()
            / f"synthetic-{digest(args, [*sources, Path(__file__).read_text()])}.pkl"
        )
        if path.is_file():
            try:
                return pickle.loads(path.read_bytes())
            except Exception:  # noqa: BLE001 - a damaged cache file is made again, never trusted
                path.unlink(missing_ok=True)
    seen: set[str] = set()
    splits = {}
    plan = [
        ("train", train_size, SHORT_RATES, min_len, max_len),
        ("valid", valid_size, SHORT_RATES, min_len, max_len),
        ("test", test_size, SHORT_RATES, min_len, max_len),
        ("test_long", test_long_size, LONG_RATES, long_min_len, long_max_len),
    ]
    for offset, (name, size, rates, lo, hi) in enumerate(plan):
        rng = random.Random(seed * 1_000_003 + offset)
        splits[name] = _sample_split(rng, rates, size, lo, hi, seen)
    corpus = Corpus(name="synthetic", splits=splits, src_lang="src", tgt_lang="tgt")
    if path is not None:
        write_atomically(path, pickle.dumps(corpus, protocol=pickle.HIGHEST_PROTOCOL))
    return corpus
