"""The grammar of the synthetic corpus (``attnlab.data.synthetic``): sentences as parsed clauses, sampled
from ``GrammarRates``, and rendered into a source/target pair whose target words are linked to the
source words they translate (the gold alignment).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from attnlab.data.corpus import Pair
from attnlab.data.synthetic.lexicon import (
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
