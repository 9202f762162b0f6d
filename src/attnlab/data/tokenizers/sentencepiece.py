"""Joint SentencePiece subword tokenizer (BPE or unigram) for real data, cached by a hash of its inputs.

One model is trained over the source and target sides of the training split together, so both sides
share one id space, as the model's shared embedding expects. Training is skipped when the cache
directory already holds a model for the same training text and settings: the cache file is named by
a SHA-256 over the settings, the sentencepiece version and every training sentence, so any change to
the data or to ``vocab_size``/``model_type``/... trains (and caches) a new model.

Saved as ``spm.model`` (the model's bytes); the interface is ``attnlab.data.tokenizers.base.Tokenizer``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from attnlab.data.cache import digest, write_atomically
from attnlab.data.tokenizers.base import SPECIAL_IDS, SPECIAL_TOKENS, Tokenizer

MODEL_TYPES = ("bpe", "unigram")


class SentencePieceTokenizer(Tokenizer):
    """Subword ids from a trained SentencePiece model; ids 0-3 are ``<pad> <bos> <eos> <unk>``.

    Attributes:
        model_path: where the model was loaded from (the cache file, or a saved run's copy).
        from_cache: True when ``train`` found the model in its cache instead of training it.
    """

    FILE = "spm.model"

    def __init__(self, model_proto: bytes, model_path: Path | None = None, from_cache: bool = False):
        import sentencepiece as spm

        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        specials = (self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id(), self.sp.unk_id())
        if specials != (SPECIAL_IDS.pad_id, SPECIAL_IDS.bos_id, SPECIAL_IDS.eos_id, SPECIAL_IDS.unk_id):
            raise ValueError(f"sentencepiece model must have pad/bos/eos/unk ids 0/1/2/3, has {specials}")
        self.model_path, self.from_cache = model_path, from_cache

    @classmethod
    def train(
        cls,
        sentences: Iterable[str],
        vocab_size: int = 8000,
        model_type: str = "bpe",
        joint: bool = True,
        character_coverage: float = 1.0,
        cache_dir: str | Path | None = None,
    ) -> SentencePieceTokenizer:
        """Trains on ``sentences`` (the training split, both sides), or loads the cached model.

        Args:
            sentences: training sentences of both languages.
            vocab_size: pieces in the model, specials included (``data.tokenizer.vocab_size``).
            model_type: ``bpe`` or ``unigram``.
            joint: must be true: one model over both languages (see ``_check_joint``).
            character_coverage: share of characters the model covers (the rest map to ``<unk>``).
            cache_dir: where trained models are kept; null = no cache (train every time).
        """
        _check_joint(joint)
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"data.tokenizer.model_type must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}"
            )
        if vocab_size <= 4:
            raise ValueError(f"data.tokenizer.vocab_size must exceed the 4 special tokens, got {vocab_size}")
        if not 0.0 < character_coverage <= 1.0:
            raise ValueError(f"data.tokenizer.character_coverage must be in (0, 1], got {character_coverage}")
        sentences = [s for s in sentences if s]
        if not sentences:
            raise ValueError("cannot train a sentencepiece model: the training split has no text")
        settings = dict(vocab_size=vocab_size, model_type=model_type, character_coverage=character_coverage)
        path = None
        if cache_dir is not None:
            path = (
                Path(cache_dir).expanduser()
                / f"{model_type}-{vocab_size}-{digest({**settings, 'spm': _spm_version()}, sentences)}.model"
            )
            if path.is_file():
                return cls(path.read_bytes(), model_path=path, from_cache=True)
        proto = _train_proto(sentences, **settings)
        if path is not None:
            write_atomically(path, proto)
        return cls(proto, model_path=path, from_cache=False)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, sentence: str) -> list[int]:
        return self.sp.encode(sentence)

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def detokenize(self, ids: list[int]) -> str:
        return self.sp.decode(ids)

    def to_bytes(self) -> bytes:
        return self.model_proto

    @classmethod
    def from_bytes(cls, data: bytes, path: Path | None = None) -> SentencePieceTokenizer:
        return cls(data, model_path=path)


def _check_joint(joint: bool) -> None:
    if not joint:
        raise ValueError(
            "data.tokenizer.joint=false is not supported: the model shares one embedding between encoder "
            "and decoder and the tokenizer encodes text without knowing its side, so source and target "
            "need one joint vocabulary; set data.tokenizer.joint=true"
        )


def _spm_version() -> str:
    import sentencepiece as spm

    return spm.__version__


def _train_proto(sentences: list[str], vocab_size: int, model_type: str, character_coverage: float) -> bytes:
    import io

    import sentencepiece as spm

    buffer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=buffer,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=SPECIAL_IDS.pad_id,
            bos_id=SPECIAL_IDS.bos_id,
            eos_id=SPECIAL_IDS.eos_id,
            unk_id=SPECIAL_IDS.unk_id,
            pad_piece=SPECIAL_TOKENS[SPECIAL_IDS.pad_id],
            bos_piece=SPECIAL_TOKENS[SPECIAL_IDS.bos_id],
            eos_piece=SPECIAL_TOKENS[SPECIAL_IDS.eos_id],
            unk_piece=SPECIAL_TOKENS[SPECIAL_IDS.unk_id],
            input_sentence_size=2_000_000,
            shuffle_input_sentence=True,
            num_threads=max(1, min(4, os.cpu_count() or 1)),
            minloglevel=2,  # errors only: training logs hundreds of lines at the default level
        )
    except RuntimeError as err:
        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
        raise ValueError(
            f"sentencepiece training failed (data.tokenizer.vocab_size={vocab_size}?): {first}"
        ) from err
    return buffer.getvalue()
