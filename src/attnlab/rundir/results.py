"""``results.json``: the one file every run leaves in its run directory, completed or failed.

Besides the schema of DESIGN.md it records ``env``: the commit, machine and versions the run was made
with (``attnlab.rundir.provenance``), so a results table can say where its numbers come from.

Written atomically (temporary file, then rename), so a reader never sees half a result.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from attnlab.rundir.provenance import provenance

RESULTS = "results.json"


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_results(
    run_dir: str | Path,
    *,
    status: str,
    error: str | None,
    choices: dict[str, str],
    overrides: list[str],
    seed: int | None,
    metrics: dict[str, float],
    sacrebleu: str | None,
) -> Path:
    """Writes ``run_dir/results.json`` with the schema of DESIGN.md and returns its path."""
    if status not in ("completed", "failed"):
        raise ValueError(f"status must be 'completed' or 'failed', got '{status}'")
    record = {
        "status": status,
        "error": error,
        "choices": dict(choices),
        "overrides": list(overrides),
        "seed": seed,
        "metrics": {k: _clean(float(v)) for k, v in sorted(metrics.items())},
        "sacrebleu": sacrebleu,
        "env": provenance(),
    }
    path = Path(run_dir) / RESULTS
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def read_results(run_dir: str | Path) -> dict:
    """The ``results.json`` of ``run_dir`` as written (a dict)."""
    return json.loads((Path(run_dir) / RESULTS).read_text())
