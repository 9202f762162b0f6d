"""A parallel corpus: named splits of (source, target) sentence pairs, with optional gold alignments.

Sources: the embedded synthetic task (``attnlab.data.synthetic.generate``), HuggingFace hub datasets
(``attnlab.data.hub.load_hub``) and local files (``attnlab.data.files.load_files``); all return a
``Corpus``. Real text is cleaned by ``clean`` (strip, collapse runs of whitespace, non-breaking spaces
included) and paired by ``make_pairs``, which checks that both sides have the same length.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    """One sentence pair; ``alignment`` holds (source word, target word) index links, if known."""

    src: str
    tgt: str
    alignment: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class Corpus:
    """Splits by name (``train``, ``valid``, ``test``, and optionally ``test_long``)."""

    name: str
    splits: dict[str, list[Pair]]
    src_lang: str
    tgt_lang: str

    def __post_init__(self) -> None:
        for split in ("train", "valid", "test"):
            if not self.splits.get(split):
                raise ValueError(f"corpus '{self.name}' has no '{split}' pairs: check the data config")

    @property
    def eval_splits(self) -> list[str]:
        """Splits scored at test time, in a fixed order."""
        return [s for s in ("test", "test_long") if self.splits.get(s)]


def clean(text: str | None) -> str:
    """Strips a sentence and collapses every run of whitespace (non-breaking spaces too) to one space."""
    return " ".join((text or "").split())


def make_pairs(src: list[str], tgt: list[str], where: str, what: str = "lines") -> list[Pair]:
    """Cleans and pairs two parallel sides; drops pairs empty on both sides; raises if none remain.

    Args:
        src, tgt: source and target sentences, item N of ``src`` translating item N of ``tgt``.
        where: names the data in error messages, e.g. ``"data.corpus.train_src (train.en)"``.
        what: what the items are called in error messages (``lines``, ``rows``).
    """
    if len(src) != len(tgt):
        raise ValueError(
            f"{where}: source has {len(src)} {what} but target has {len(tgt)}; they must be equal"
        )
    pairs = [Pair(s, t) for s, t in zip(map(clean, src), map(clean, tgt)) if s or t]
    if not pairs:
        raise ValueError(f"{where}: no sentence pairs (the split is empty)")
    return pairs
