"""The tokenizer contract: text ↔ ids with four fixed special ids, saved into and loaded from a folder.

Every tokenizer maps a sentence to ids (``encode``), ids back to detokenised text (``decode``, which
stops at ``<eos>`` and drops ``<pad>``/``<bos>``) and to token strings (``tokens``, axis labels of
attention maps), knows its ``vocab_size``, and round-trips through a folder (``save``/``load``: one
file, ``FILE``). Ids 0–3 are ``<pad> <bos> <eos> <unk>`` for every tokenizer, so decoding and batching
need nothing but ``SPECIAL_IDS``. A subclass supplies the four abstract methods; a new tokenizer is
one file in this folder plus a config in ``conf/data/tokenizer/``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True)
class SpecialIds:
    """The ids of ``<pad> <bos> <eos> <unk>``: what decoding and batching need of a tokenizer."""

    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3


SPECIAL_IDS = SpecialIds()
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


class Tokenizer(ABC):
    """Text to ids and back; ``FILE`` is what ``save`` writes into its folder."""

    FILE: ClassVar[str]
    pad_id, bos_id, eos_id, unk_id = (
        SPECIAL_IDS.pad_id,
        SPECIAL_IDS.bos_id,
        SPECIAL_IDS.eos_id,
        SPECIAL_IDS.unk_id,
    )

    @property
    def special_ids(self) -> SpecialIds:
        return SPECIAL_IDS

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, specials included."""

    @abstractmethod
    def encode(self, sentence: str) -> list[int]:
        """A sentence as ids, without ``<bos>``/``<eos>``."""

    @abstractmethod
    def tokens(self, ids: Iterable[int]) -> list[str]:
        """The token string of every id, specials included (axis labels for attention maps)."""

    @abstractmethod
    def detokenize(self, ids: list[int]) -> str:
        """Text of ids that hold no special token."""

    @abstractmethod
    def to_bytes(self) -> bytes:
        """What ``save`` writes to ``FILE``."""

    @classmethod
    @abstractmethod
    def from_bytes(cls, data: bytes, path: Path | None = None) -> Tokenizer:
        """The tokenizer ``to_bytes`` described (``path``: where the bytes were read from, if anywhere)."""

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenises ids, stopping at ``<eos>`` and dropping ``<pad>``/``<bos>``."""
        kept = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                kept.append(i)
        return self.detokenize(kept)

    def save(self, directory: str | Path) -> Path:
        """Writes ``FILE`` into ``directory`` (created if needed); returns the directory."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / self.FILE).write_bytes(self.to_bytes())
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> Tokenizer:
        """The tokenizer that ``save`` wrote into ``directory``."""
        path = Path(directory) / cls.FILE
        if not path.is_file():
            raise ValueError(f"no {cls.__name__} in {directory} (expected {path.name})")
        return cls.from_bytes(path.read_bytes(), path)
