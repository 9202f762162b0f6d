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

import random
from dataclasses import dataclass, field

from attnlab.data.corpus import Corpus, Pair
from attnlab.data.synthetic_lexicon import (
    ADJECTIVES,
    AND,
    CASE,
    DEFINITE,
    NOUNS,
    NUMERALS,
    PLACES,
    PLURALS,
    PREPOSITIONS,
    RELATIVE,
    VERB_AGREEMENT,
    VERBS,
)


@dataclass
class _NounPhrase:
    noun: str
    plural: bool
    det: str | None  # "the", "a" or None (bare plural)
    numeral: str | None
    adjectives: list[tuple[str, bool]]  # (adjective, intensified by "very")
    relative: _Relative | None = None
    place_prep: str | None = None  # set for prepositional phrases


@dataclass
class _Relative:
    verb: str
    negated: bool
    obj: _NounPhrase


@dataclass
class _Clause:
    subj: _NounPhrase
    verb: str
    negated: bool
    obj: _NounPhrase
    place: _NounPhrase | None


@dataclass
class _Renderer:
    """Collects source words, then target words linked to the source indices they translate."""

    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)

    def source(self, word: str) -> int:
        self.src.append(word)
        return len(self.src) - 1

    def target(self, word: str, *sources: int) -> None:
        for s in sources:
            self.links.append((s, len(self.tgt)))
        self.tgt.append(word)


@dataclass(frozen=True)
class GrammarRates:
    """Probabilities that shape sentence length; ``test_long`` uses higher ones."""

    adjective: float = 0.35
    very: float = 0.15
    plural: float = 0.35
    numeral: float = 0.5
    negation: float = 0.2
    relative: float = 0.15
    place: float = 0.3
    coordination: float = 0.1
    max_relative_depth: int = 2


SHORT_RATES = GrammarRates()
LONG_RATES = GrammarRates(adjective=0.5, relative=0.45, place=0.6, coordination=0.7)


class _Grammar:
    def __init__(self, rng: random.Random, rates: GrammarRates):
        self.rng, self.rates = rng, rates

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    def noun_phrase(self, depth: int, nouns: dict[str, str] = NOUNS) -> _NounPhrase:
        r = self.rates
        plural = nouns is NOUNS and self._chance(r.plural)
        numeral = self.rng.choice(list(NUMERALS)) if plural and self._chance(r.numeral) else None
        if plural:
            det = None if numeral is None and self._chance(0.5) else "the"
        else:
            det = "the" if nouns is PLACES else self.rng.choice(["the", "a"])
        adjectives = []
        while len(adjectives) < 3 and self._chance(r.adjective / (1 + len(adjectives))):
            unused = [a for a in ADJECTIVES if a not in {used for used, _ in adjectives}]
            adjectives.append((self.rng.choice(unused), self._chance(r.very)))
        relative = None
        if nouns is NOUNS and depth < r.max_relative_depth and self._chance(r.relative):
            relative = _Relative(
                self.rng.choice(list(VERBS)), self._chance(r.negation), self.noun_phrase(depth + 1)
            )
        return _NounPhrase(self.rng.choice(list(nouns)), plural, det, numeral, adjectives, relative)

    def clause(self) -> _Clause:
        place = None
        if self._chance(self.rates.place):
            place = self.noun_phrase(self.rates.max_relative_depth, PLACES)
            place.place_prep = self.rng.choice(list(PREPOSITIONS))
        return _Clause(
            self.noun_phrase(0),
            self.rng.choice(list(VERBS)),
            self._chance(self.rates.negation),
            self.noun_phrase(0),
            place,
        )

    def sentence(self) -> list[_Clause]:
        clauses = [self.clause()]
        while len(clauses) < 4 and self._chance(self.rates.coordination):
            clauses.append(self.clause())
        return clauses


def _render_source_np(out: _Renderer, np: _NounPhrase) -> dict:
    """Writes the source words of a noun phrase; returns their indices for the target side."""
    idx: dict = {}
    if np.place_prep:
        idx["prep"] = out.source(np.place_prep)
    if np.det:
        idx["det"] = out.source(np.det)
    if np.numeral:
        idx["num"] = out.source(np.numeral)
    idx["adj"] = []
    for adj, very in np.adjectives:
        very_i = [out.source("very")] if very else []
        idx["adj"].append(very_i + [out.source(adj)])
    noun = PLURALS.get(np.noun, np.noun + "s") if np.plural else np.noun
    idx["noun"] = out.source(noun)
    if np.relative:
        idx["rel"] = _render_source_relative(out, np.relative, np.plural)
    return idx


def _render_source_verb(out: _Renderer, verb: str, negated: bool, plural: bool) -> list[int]:
    if negated:
        return [out.source("do" if plural else "does"), out.source("not"), out.source(verb)]
    return [out.source(verb if plural else verb + ("es" if verb.endswith(("ch", "sh")) else "s"))]


def _render_source_relative(out: _Renderer, rel: _Relative, head_plural: bool) -> dict:
    that = out.source("that")
    verb = _render_source_verb(out, rel.verb, rel.negated, head_plural)
    return {"that": that, "verb": verb, "obj": _render_source_np(out, rel.obj)}


def _target_verb(verb: str, negated: bool, plural: bool) -> str:
    return VERBS[verb] + ("ne" if negated else "") + VERB_AGREEMENT[plural]


def _render_target_np(out: _Renderer, np: _NounPhrase, idx: dict, case: str) -> None:
    if np.place_prep:
        suffix = PREPOSITIONS[np.place_prep]
        out.target(PLACES[np.noun] + suffix, idx["prep"], idx["det"], idx["noun"])
    else:
        suffix = CASE[(case, np.plural)]
        out.target(NOUNS[np.noun] + suffix, idx["noun"])
    for (adj, very), sources in zip(np.adjectives, idx["adj"]):
        out.target(ADJECTIVES[adj] + ("issim" if very else "") + suffix, *sources)
    if np.numeral:
        out.target(NUMERALS[np.numeral], idx["num"])
    if np.det == "the" and not np.place_prep:
        out.target(DEFINITE, idx["det"])
    if np.relative:
        rel, rel_idx = np.relative, idx["rel"]
        out.target(RELATIVE, rel_idx["that"])
        _render_target_np(out, rel.obj, rel_idx["obj"], "obj")
        out.target(_target_verb(rel.verb, rel.negated, np.plural), *rel_idx["verb"])


def render(clauses: list[_Clause]) -> Pair:
    """Turns a parsed sentence into a source/target pair with gold alignment links."""
    out = _Renderer()
    indices = []
    for i, c in enumerate(clauses):
        and_i = out.source("and") if i else None
        subj = _render_source_np(out, c.subj)
        verb = _render_source_verb(out, c.verb, c.negated, c.subj.plural)
        obj = _render_source_np(out, c.obj)
        place = _render_source_np(out, c.place) if c.place else None
        indices.append((and_i, subj, verb, obj, place))
    for c, (and_i, subj, verb, obj, place) in zip(clauses, indices):
        if and_i is not None:
            out.target(AND, and_i)
        if c.place:
            _render_target_np(out, c.place, place, "place")
        _render_target_np(out, c.subj, subj, "subj")
        _render_target_np(out, c.obj, obj, "obj")
        out.target(_target_verb(c.verb, c.negated, c.subj.plural), *verb)
    return Pair(" ".join(out.src), " ".join(out.tgt), tuple(sorted(out.links)))


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
) -> Corpus:
    """Generates the corpus; the same arguments always give the same pairs.

    Args:
        seed: seed of the generator (independent of the training seed).
        train_size, valid_size, test_size, test_long_size: pairs per split.
        min_len, max_len: words per side in train / valid / test.
        long_min_len, long_max_len: words per side in test_long; ``long_min_len > max_len``.
    """
    sizes = dict(
        train_size=train_size,
        valid_size=valid_size,
        test_size=test_size,
        test_long_size=test_long_size,
        min_len=min_len,
        long_max_len=long_max_len,
    )
    for name, value in sizes.items():
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
    return Corpus(name="synthetic", splits=splits, src_lang="src", tgt_lang="tgt")
