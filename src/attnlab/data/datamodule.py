"""Token batches for training and evaluation.

Every example is ``src + [<eos>]`` and ``[<bos>] + tgt + [<eos>]``; a batch pads both to its longest
member and keeps the reference text and example index, so decoded output can be scored and written
in corpus order. Training batches hold either ``batch_size`` random sentences or, with ``max_tokens``,
length-bucketed sentences up to a token budget (``attnlab.data.batching``), which pads far less.

Under DDP each rank trains on its own disjoint, equally long share of every epoch's batches
(``ShardedBatchSampler``; rank and world size come from the trainer), while validation and test
loaders are never sharded: every rank decodes whole splits, so ``val/bleu``, the checkpoint choice and
the test scores are full-set numbers, the same on every rank.
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from attnlab.data.batching import (
    RandomBatchSampler,
    ShardedBatchSampler,
    TokenBudgetBatchSampler,
    fixed_size_batches,
    padding_fraction,
)
from attnlab.data.corpus import Corpus


class EncodedSplit(Dataset):
    def __init__(self, pairs, tokenizer):
        self.pairs = pairs
        self.src = [tokenizer.encode(p.src) + [tokenizer.eos_id] for p in pairs]
        self.tgt = [[tokenizer.bos_id] + tokenizer.encode(p.tgt) + [tokenizer.eos_id] for p in pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int):
        return i, self.src[i], self.tgt[i], self.pairs[i].tgt


def pad_sequences(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    """Id lists -> (b, t) tensor, each row padded with ``pad_id`` to the longest."""
    out = torch.full((len(seqs), max(map(len, seqs))), pad_id, dtype=torch.long)  # (b, t)
    for row, s in enumerate(seqs):
        out[row, : len(s)] = torch.tensor(s)
    return out


class Collate:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, items) -> dict:
        index, src, tgt, ref = zip(*items)
        return {
            "index": torch.tensor(index),
            "src": pad_sequences(src, self.pad_id),
            "tgt": pad_sequences(tgt, self.pad_id),
            "ref": list(ref),
        }


class TranslationDataModule(L.LightningDataModule):
    """Serves ``train``/``valid`` and each evaluation split of a corpus, encoded once.

    Args:
        corpus: the parallel corpus.
        tokenizer: maps text to ids and back (``encode``/``decode``, ``pad_id``, ...).
        batch_size: training sentences per batch (when ``max_tokens`` is null).
        eval_batch_size: sentences per batch when decoding.
        max_tokens: token budget of a training batch, batch size × its longest example (source or
            target, specials included); null = ``batch_size`` random sentences per batch.
        seed: seeds the token-budget batches (null = torch's current seed, set by ``seed_everything``).
    """

    def __init__(
        self,
        corpus: Corpus,
        tokenizer,
        batch_size: int,
        eval_batch_size: int,
        max_tokens: int | None = None,
        seed: int | None = None,
    ):
        super().__init__()
        for key, value in dict(batch_size=batch_size, eval_batch_size=eval_batch_size).items():
            if value <= 0:
                raise ValueError(f"data.{key} must be positive, got {value}")
        self.corpus, self.tokenizer = corpus, tokenizer
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.collate = Collate(tokenizer.pad_id)
        self.splits = {name: EncodedSplit(pairs, tokenizer) for name, pairs in corpus.splits.items()}
        self.seed = torch.initial_seed() if seed is None else seed
        train = self.splits["train"]
        self.train_lengths = ([len(s) for s in train.src], [len(t) for t in train.tgt])
        self.batch_sampler = None
        if max_tokens is not None:
            lengths = [max(s, t) for s, t in zip(*self.train_lengths)]
            self.batch_sampler = TokenBudgetBatchSampler(lengths, max_tokens, seed=self.seed)

    @property
    def train_padding_fraction(self) -> float:
        """Share of padded token slots (source and target) in one epoch of training batches."""
        if self.batch_sampler is not None:
            batches = self.batch_sampler.batches(self.batch_sampler.epoch)
        else:  # a seeded stand-in for the DataLoader's random batches: the same expected padding
            batches = fixed_size_batches(len(self.splits["train"]), self.batch_size, self.seed)
        return padding_fraction(batches, *self.train_lengths)

    @property
    def rank_and_world_size(self) -> tuple[int, int]:
        """(global rank, world size) of the trainer this module is attached to; (0, 1) without one."""
        if self.trainer is None:
            return 0, 1
        return self.trainer.global_rank, self.trainer.world_size

    def train_dataloader(self) -> DataLoader:
        rank, world_size = self.rank_and_world_size
        if world_size > 1:
            source = self.batch_sampler
            if source is None:
                source = RandomBatchSampler(len(self.splits["train"]), self.batch_size, self.seed)
            sampler = ShardedBatchSampler(source, rank, world_size)
            return DataLoader(self.splits["train"], batch_sampler=sampler, collate_fn=self.collate)
        if self.batch_sampler is not None:
            return DataLoader(self.splits["train"], batch_sampler=self.batch_sampler, collate_fn=self.collate)
        return DataLoader(
            self.splits["train"],
            batch_size=self.batch_size,
            shuffle=True,
            collate_fn=self.collate,
            drop_last=False,
        )

    def eval_dataloader(self, split: str) -> DataLoader:
        """Batches of one split in corpus order (for decoding and diagnostics)."""
        return DataLoader(
            self.splits[split], batch_size=self.eval_batch_size, shuffle=False, collate_fn=self.collate
        )

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader("valid")

    def test_dataloader(self) -> list[DataLoader]:
        return [self.eval_dataloader(split) for split in self.corpus.eval_splits]
