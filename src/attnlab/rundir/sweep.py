"""A sweep directory: one run directory per job (``0/``, ``1/``, …) and ``sweep.json``, every job's status.

    {"sweep_dir": "…", "jobs": [{"job": "0", "status": "completed", "error": null, "overrides": [...]}, …],
     "expected": null, "completed": 3, "failed": 1, "missing": 0}

A job folder (one holding ``.hydra/``) without ``results.json`` is ``missing``: it crashed hard, or is
still running.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnlab.rundir import RunDir, natural_key

SWEEP = "sweep.json"
STATUSES = ("completed", "failed", "missing")


def job_dirs(sweep_dir: str | Path) -> list[RunDir]:
    """The job folders of a sweep (those holding ``.hydra/``), numbered ones in number order."""
    folders = (p for p in Path(sweep_dir).iterdir() if (p / ".hydra").is_dir())
    return [RunDir(p) for p in sorted(folders, key=lambda p: natural_key(p.name))]


def summarise(sweep_dir: str | Path, expected: int | None = None) -> dict:
    """The status of every job of a sweep (the content of ``sweep.json``)."""
    jobs = []
    for run in job_dirs(sweep_dir):
        if run.results.is_file():
            record = run.read_results()
            jobs.append(
                {
                    "job": run.path.name,
                    "status": record["status"],
                    "error": record["error"],
                    "overrides": record["overrides"],
                }
            )
        else:
            error = "no results.json (the job crashed)"
            jobs.append({"job": run.path.name, "status": "missing", "error": error, "overrides": []})
    counts = {s: sum(j["status"] == s for j in jobs) for s in STATUSES}
    return {"sweep_dir": str(sweep_dir), "jobs": jobs, "expected": expected, **counts}


def write_summary(sweep_dir: str | Path, summary: dict) -> Path:
    path = Path(sweep_dir) / SWEEP
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def read_summary(sweep_dir: str | Path) -> dict:
    return json.loads((Path(sweep_dir) / SWEEP).read_text())
