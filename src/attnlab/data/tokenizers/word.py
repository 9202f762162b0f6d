"""Word-level tokenizer with a joint source/target vocabulary, built from the training split.

Used for the synthetic corpus, whose words are its tokens (so token positions are word positions and
gold alignments apply directly). Saved as ``vocab.txt``, one token per line in id order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from attnlab.data.tokenizers.base import SPECIAL_TOKENS, Tokenizer


class WordTokenizer(Tokenizer):
    """Splits on whitespace; ids 0-3 are ``<pad> <bos> <eos> <unk>``."""

    FILE = "vocab.txt"

    def __init__(self, vocab: list[str]):
        if list(vocab[: len(SPECIAL_TOKENS)]) != list(SPECIAL_TOKENS):
            raise ValueError(f"vocabulary must start with {SPECIAL_TOKENS}")
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}

    @classmethod
    def train(cls, sentences: Iterable[str], min_count: int = 1) -> WordTokenizer:
        """Builds the vocabulary from sentences, most frequent first (ties alphabetical)."""
        counts = Counter(w for s in sentences for w in s.split())
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(list(SPECIAL_TOKENS) + words)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, sentence: str) -> list[int]:
        return [self.index.get(w, self.unk_id) for w in sentence.split()]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.vocab[i] for i in ids]

    def detokenize(self, ids: list[int]) -> str:
        return " ".join(self.vocab[i] for i in ids)

    def to_bytes(self) -> bytes:
        return "".join(w + "\n" for w in self.vocab).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, path: Path | None = None) -> WordTokenizer:
        return cls(data.decode("utf-8").split("\n")[:-1])
