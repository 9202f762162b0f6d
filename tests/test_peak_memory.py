"""peak_mem_mb is the job's peak, not the sweep process's: it can be reset between jobs."""

import sys

import pytest
import torch

from attnlab.peak_memory import peak_memory_mb, reset_peak_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")
def test_a_reset_forgets_an_earlier_peak_and_a_new_allocation_raises_it():
    big = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    high = peak_memory_mb()
    del big
    reset_peak_memory()
    low = peak_memory_mb()
    assert low < high - 48  # the 64 MiB no longer counts
    again = torch.ones(64 * 2**20 // 4)
    assert peak_memory_mb() > low + 48
    del again
