"""Peak memory of one job, not of the process: sweeps run several jobs in one process (the basic
launcher runs them all in one; joblib's workers are reused).

On CUDA: ``torch.cuda`` peak allocated bytes, reset at the start of a job. On Linux CPU: the process's
peak resident set size ``VmHWM`` from ``/proc/self/status``, reset by writing ``5`` to
``/proc/self/clear_refs`` (Linux ≥ 4.0). Elsewhere ``ru_maxrss``, which cannot be reset: the peak of the
process so far.
"""

from __future__ import annotations

import resource
from pathlib import Path

import torch

_STATUS, _CLEAR_REFS = Path("/proc/self/status"), Path("/proc/self/clear_refs")


def reset_peak_memory() -> None:
    """Starts a new peak (see the module docstring)."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass  # not Linux, or not allowed: the process-wide peak it is


def peak_memory_mb() -> float:
    """MiB: peak GPU memory allocated on CUDA, else the peak resident set size since the last reset."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
