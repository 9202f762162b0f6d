"""Sweep summary: after a Hydra multirun, count the jobs' ``results.json`` and say how many failed.

A failing job never sinks a sweep: ``attnlab-train`` records it (``status: failed`` and its one-line
error) and returns, so the launcher runs the other jobs. At the end this callback writes
``<sweep dir>/sweep.json`` (every job's status and error), prints one line per failed job and the
totals, and, when any job failed or left no ``results.json`` (a crash), records a ``SweepFailed``
that ``attnlab-train`` raises once Hydra returns, so the command exits non-zero with
``attnlab-train: error: 1 of 4 jobs failed …`` (Hydra turns exceptions raised inside callbacks into
warnings, so the callback cannot fail the command itself). Registered in ``conf/train.yaml`` under
``hydra.callbacks``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepFailed(RuntimeError):
    """Some jobs of a sweep failed; the others completed and kept their results."""


_failures: list[SweepFailed] = []


def raise_if_failed() -> None:
    """Raises (once) the failure the last sweep in this process recorded, if any."""
    if _failures:
        raise _failures.pop()


def summarise(sweep_dir: Path, expected: int | None = None) -> dict:
    """Status of every job folder under ``sweep_dir`` (those holding ``.hydra/``)."""
    jobs = []
    for job_dir in sorted((p for p in sweep_dir.iterdir() if (p / ".hydra").is_dir()), key=_job_order):
        result = job_dir / "results.json"
        if result.is_file():
            record = json.loads(result.read_text())
            jobs.append(
                {
                    "job": job_dir.name,
                    "status": record["status"],
                    "error": record["error"],
                    "overrides": record["overrides"],
                }
            )
        else:
            jobs.append(
                {
                    "job": job_dir.name,
                    "status": "missing",
                    "error": "no results.json (the job crashed)",
                    "overrides": [],
                }
            )
    counts = {s: sum(j["status"] == s for j in jobs) for s in ("completed", "failed", "missing")}
    return {"sweep_dir": str(sweep_dir), "jobs": jobs, "expected": expected, **counts}


def _job_order(path: Path) -> tuple[int, str]:
    return (int(path.name), "") if path.name.isdigit() else (1 << 30, path.name)


class SweepSummary(Callback):
    """Hydra callback: summary and exit status at the end of a multirun."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        summary = summarise(sweep_dir)
        (sweep_dir / "sweep.json").write_text(json.dumps(summary, indent=2) + "\n")
        bad = [j for j in summary["jobs"] if j["status"] != "completed"]
        for job in bad:
            print(f"sweep: job {job['job']} {job['status']} ({' '.join(job['overrides'])}): {job['error']}")
        total = len(summary["jobs"])
        print(f"sweep: {summary['completed']} of {total} jobs completed, {len(bad)} failed: {sweep_dir}")
        if bad:
            _failures.append(
                SweepFailed(
                    f"{len(bad)} of {total} jobs failed (see {sweep_dir / 'sweep.json'}); "
                    f"first: job {bad[0]['job']}: {bad[0]['error']}"
                )
            )
