"""Sweep summary: after a Hydra multirun, count the jobs' ``results.json`` and say how many failed.

A failing job never sinks a sweep: ``attnlab-train`` records it (``status: failed`` and its one-line
error) and returns, so the launcher runs the other jobs. At the end this callback writes
``<sweep dir>/sweep.json`` (``attnlab.rundir.sweep``), prints one line per failed job and the totals,
and, when any job failed or left no ``results.json`` (a crash), records a ``SweepFailed`` that
``attnlab-train`` raises once Hydra returns, so the command exits non-zero with
``attnlab-train: error: 1 of 4 jobs failed …`` (Hydra turns exceptions raised inside callbacks into
warnings, so the callback cannot fail the command itself). Registered in ``conf/train.yaml`` under
``hydra.callbacks``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from attnlab.rundir.sweep import SWEEP, summarise, write_summary


class SweepFailed(RuntimeError):
    """Some jobs of a sweep failed; the others completed and kept their results."""


_failures: list[SweepFailed] = []


def raise_if_failed() -> None:
    """Raises (once) the failure the last sweep in this process recorded, if any."""
    if _failures:
        raise _failures.pop()


class SweepSummary(Callback):
    """Hydra callback: summary and exit status at the end of a multirun."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        summary = summarise(sweep_dir)
        write_summary(sweep_dir, summary)
        bad = [j for j in summary["jobs"] if j["status"] != "completed"]
        for job in bad:
            print(f"sweep: job {job['job']} {job['status']} ({' '.join(job['overrides'])}): {job['error']}")
        total = len(summary["jobs"])
        print(f"sweep: {summary['completed']} of {total} jobs completed, {len(bad)} failed: {sweep_dir}")
        if bad:
            _failures.append(
                SweepFailed(
                    f"{len(bad)} of {total} jobs failed (see {sweep_dir / SWEEP}); "
                    f"first: job {bad[0]['job']}: {bad[0]['error']}"
                )
            )
