"""A parallel corpus: named splits of (source, target) sentence pairs, with optional gold alignments.

Sources: the embedded synthetic task (``attnlab.data.synthetic.generate``); hub datasets and local
files come with the real-data issue and return the same ``Corpus``.
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
