"""Tokenizers (``conf/data/tokenizer/``): ``word`` for the synthetic corpus, ``sentencepiece`` for real
data. All follow ``attnlab.data.tokenizers.base.Tokenizer``."""

from __future__ import annotations

from pathlib import Path

from attnlab.data.tokenizers.base import SPECIAL_IDS, SpecialIds, Tokenizer


def tokenizer_classes() -> list[type[Tokenizer]]:
    from attnlab.data.tokenizers.sentencepiece import SentencePieceTokenizer
    from attnlab.data.tokenizers.word import WordTokenizer

    return [SentencePieceTokenizer, WordTokenizer]


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """The tokenizer saved in ``directory`` (e.g. ``<run dir>/tokenizer``), whichever kind it is."""
    for cls in tokenizer_classes():
        if (Path(directory) / cls.FILE).is_file():
            return cls.load(directory)
    files = ", ".join(cls.FILE for cls in tokenizer_classes())
    raise ValueError(f"no saved tokenizer in {directory} (expected one of {files})")


__all__ = ["SPECIAL_IDS", "SpecialIds", "Tokenizer", "load_tokenizer"]
