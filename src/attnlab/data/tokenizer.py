"""Word-level tokenizer with a joint source/target vocabulary, built from the training split.

Used for the synthetic corpus, whose words are its tokens (so token positions are word positions and
gold alignments apply directly). ``attnlab.data.sentencepiece.SentencePieceTokenizer`` (real data)
offers the same interface: ``encode``, ``decode``, ``tokens``, ``pad_id``/``bos_id``/``eos_id``/``unk_id``,
``vocab_size``, ``save``/``load``; ``load_tokenizer`` reads either back from a run directory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
VOCAB_FILE = "vocab.txt"


class WordTokenizer:
    """Splits on whitespace; ids 0-3 are ``<pad> <bos> <eos> <unk>``."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, vocab: list[str]):
        if list(vocab[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"vocabulary must start with {SPECIALS}")
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}

    @classmethod
    def train(cls, sentences: Iterable[str], min_count: int = 1) -> WordTokenizer:
        """Builds the vocabulary from sentences, most frequent first (ties alphabetical)."""
        counts = Counter(w for s in sentences for w in s.split())
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + words)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, sentence: str) -> list[int]:
        return [self.index.get(w, self.unk_id) for w in sentence.split()]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """The token string of every id, specials included (axis labels for attention maps)."""
        return [self.vocab[i] for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenises ids, stopping at ``<eos>`` and dropping ``<pad>``/``<bos>``."""
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                words.append(self.vocab[i])
        return " ".join(words)

    def save(self, directory: str | Path) -> Path:
        """Writes ``vocab.txt`` (one token per line, in id order) into ``directory``; returns it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / VOCAB_FILE).write_text("".join(w + "\n" for w in self.vocab), encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> WordTokenizer:
        """The tokenizer that ``save`` wrote into ``directory``."""
        path = Path(directory) / VOCAB_FILE
        if not path.is_file():
            raise ValueError(f"no word vocabulary in {directory} (expected {path.name})")
        return cls(path.read_text(encoding="utf-8").split("\n")[:-1])


def load_tokenizer(directory: str | Path):
    """The tokenizer saved in ``directory`` (e.g. ``<run dir>/tokenizer``), whichever kind it is."""
    from attnlab.data.sentencepiece import MODEL_FILE, SentencePieceTokenizer

    if (Path(directory) / MODEL_FILE).is_file():
        return SentencePieceTokenizer.load(directory)
    return WordTokenizer.load(directory)
