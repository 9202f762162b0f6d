"""Length-bucketed training batches under a token budget, and the padding they leave.

A batch of n examples is padded to its longest member, so it costs n × max(length) token slots,
where an example's length is max(|src|, |tgt|) (each side is padded separately, the longer one
bounds both). Once, from ``seed``, the sampler

1. shuffles the example indices,
2. cuts them into pools of ``pool_size`` and sorts each pool by length,
3. packs each sorted pool greedily: an example joins the open batch while
   (batch size + 1) × max(length) <= ``max_tokens``, else it opens a new batch
   (a single example longer than the budget becomes a batch of its own);

then every epoch it serves those batches in a new order (seeded by ``seed`` and the epoch number),
as fairseq's ``batch_by_size`` does. Fixed batches keep ``len()`` the same every epoch, which the
Lightning loop relies on to find the epoch's last batch (and so to validate); sorting inside large
shuffled pools keeps similar lengths together (little padding). Everything is deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from torch.utils.data import Sampler


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded size stays within ``max_tokens``.

    Args:
        lengths: the length of every example (max of its source and target token counts).
        max_tokens: token slots per batch, batch size × longest member (``data.max_tokens``).
        seed: seeds the shuffles; epoch ``e`` uses ``seed`` and ``e``.
        pool_size: examples sorted together; larger pools pad less but shuffle less.
    """

    def __init__(self, lengths: Sequence[int], max_tokens: int, seed: int = 0, pool_size: int = 10_000):
        if max_tokens <= 0:
            raise ValueError(f"data.max_tokens must be positive or null, got {max_tokens}")
        if pool_size <= 0:
            raise ValueError(f"pool_size must be positive, got {pool_size}")
        self.lengths, self.max_tokens = list(lengths), max_tokens
        self.seed, self.pool_size, self.epoch = seed, pool_size, 0
        self._packed: list[list[int]] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of one epoch, in the order they are served."""
        if self._packed is None:
            self._packed = self._pack()
        order = list(self._packed)
        random.Random(self.seed * 1_000_003 + epoch + 1).shuffle(order)
        return order

    def _pack(self) -> list[list[int]]:
        rng = random.Random(self.seed * 1_000_003)
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        batches: list[list[int]] = []
        for start in range(0, len(order), self.pool_size):
            pool = sorted(order[start : start + self.pool_size], key=self.lengths.__getitem__)
            batch, longest = [], 0
            for i in pool:
                longest_with_i = max(longest, self.lengths[i])
                if batch and (len(batch) + 1) * longest_with_i > self.max_tokens:
                    batches.append(batch)
                    batch, longest_with_i = [], self.lengths[i]
                batch.append(i)
                longest = longest_with_i
            if batch:
                batches.append(batch)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        self.epoch += 1  # the next pass (next epoch) gets a new order
        yield from self.batches(epoch)

    def __len__(self) -> int:
        if self._packed is None:
            self._packed = self._pack()
        return len(self._packed)  # the same every epoch


def fixed_size_batches(n: int, batch_size: int, seed: int = 0) -> list[list[int]]:
    """Random batches of ``batch_size`` (what a shuffling ``DataLoader`` serves), seeded."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def padding_fraction(batches: Sequence[Sequence[int]], *sides: Sequence[int]) -> float:
    """Share of padded slots over all batches, counting each side (e.g. source and target lengths)."""
    slots = real = 0
    for batch in batches:
        for lengths in sides:
            slots += len(batch) * max(lengths[i] for i in batch)
            real += sum(lengths[i] for i in batch)
    return 1.0 - real / slots if slots else 0.0
