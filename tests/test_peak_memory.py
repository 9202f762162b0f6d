"""peak_mem_mb is the job's peak, not the sweep process's: it can be reset between jobs."""

import mmap
import sys

import pytest

from attnlab.training.peak_memory import peak_memory_mb, reset_peak_memory

MIB = 2**20


def touch(mib: int) -> mmap.mmap:
    """An anonymous mapping of ``mib`` MiB, every page written (resident); closing it unmaps it, so
    the memory goes back to the OS at once (unlike a freed tensor, which an allocator may keep)."""
    block = mmap.mmap(-1, mib * MIB)
    for offset in range(0, mib * MIB, mmap.PAGESIZE):
        block[offset] = 1
    return block


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")
def test_a_reset_forgets_an_earlier_peak_and_a_new_allocation_raises_it():
    block = touch(64)
    high = peak_memory_mb()
    block.close()
    reset_peak_memory()
    low = peak_memory_mb()
    assert low < high - 48  # the 64 MiB no longer counts
    block = touch(64)
    assert peak_memory_mb() > low + 48
    block.close()
