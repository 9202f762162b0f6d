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

Under DDP (``trainer=ddp``) every rank builds the same epoch's batch list from the same seed and
``ShardedBatchSampler`` serves rank r the batches r, r + world size, … of it, after setting aside the
last ``len % world size`` (they come back in later epochs, in a new order): the ranks' batches are
disjoint and equally many, so every rank takes the same number of steps (DDP waits for all ranks at
every step). Lightning's ``DistributedSampler`` cannot split a batch sampler, hence
``use_distributed_sampler: false`` in ``conf/trainer/ddp.yaml``.
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


class RandomBatchSampler(Sampler[list[int]]):
    """Random batches of ``batch_size`` examples, a new shuffle every epoch (seeded by ``seed`` and the
    epoch): what a shuffling ``DataLoader`` serves, with the epoch's batch list at hand for sharding.

    Args:
        n: number of examples.
        batch_size: examples per batch (the last batch of an epoch may be smaller).
        seed: seeds the shuffles; epoch ``e`` uses ``seed`` and ``e``.
    """

    def __init__(self, n: int, batch_size: int, seed: int = 0):
        self.n, self.batch_size, self.seed, self.epoch = n, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of one epoch, in the order they are served."""
        return fixed_size_batches(self.n, self.batch_size, self.seed * 1_000_003 + epoch + 1)

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        self.epoch += 1
        yield from self.batches(epoch)

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)


def shard(batches: Sequence[list[int]], rank: int, world_size: int) -> list[list[int]]:
    """Rank ``rank``'s share of one epoch's batches: ``batches[rank::world_size]`` of the first
    ``len(batches) - len(batches) % world_size``, so every rank gets the same number, none shared."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank ({rank}) must be in [0, world size ({world_size}))")
    usable = len(batches) - len(batches) % world_size
    return list(batches[:usable][rank::world_size])


class ShardedBatchSampler(Sampler[list[int]]):
    """One DDP rank's share (``shard``) of every epoch's batches of ``source``.

    Args:
        source: a batch sampler with ``batches(epoch)`` (the whole epoch, the same on every rank) and a
            ``len()`` that is the same every epoch (``TokenBudgetBatchSampler``, ``RandomBatchSampler``).
        rank: this process's global rank.
        world_size: number of DDP processes.
    """

    def __init__(self, source: TokenBudgetBatchSampler | RandomBatchSampler, rank: int, world_size: int):
        if len(source) < world_size:
            raise ValueError(
                f"an epoch has {len(source)} training batches, fewer than the {world_size} DDP ranks: "
                "use more data, a smaller data.batch_size / data.max_tokens, or fewer trainer.devices"
            )
        shard([], rank, world_size)  # checks the rank
        self.source, self.rank, self.world_size, self.epoch = source, rank, world_size, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of one epoch, in the order they are served."""
        return shard(self.source.batches(epoch), self.rank, self.world_size)

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        self.epoch += 1
        yield from self.batches(epoch)

    def __len__(self) -> int:
        return len(self.source) // self.world_size


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
