"""``history.jsonl``: a run's validation curve, one JSON line per validation while fitting.

    {"step": 300, "epoch": 2, "val/bleu": 81.2, "val/chrf": 90.1, "val/loss": 0.61, "val/ppl": 1.84}

Written by ``attnlab.callbacks.history.MetricsHistory``; read by ``attnlab-compare`` (this module
imports neither Lightning nor torch, so reading stays fast).
"""

from __future__ import annotations

import json
from pathlib import Path

HISTORY = "history.jsonl"


def read_history(run_dir: str | Path) -> list[dict]:
    """The rows of ``<run_dir>/history.jsonl`` ([] when the run has none)."""
    path = Path(run_dir) / HISTORY
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
