"""``attnlab-train``: one run per Hydra job, its ``results.json`` written whatever happens.

    attnlab-train attention/score=scaled_dot posenc=sinusoidal model.num_heads=8 seed=1
    attnlab-train -m sweep=scores seed=0,1,2

The run itself is ``attnlab.training.run.train``. This module turns Hydra's job into a ``Job``, records
the outcome (``status: completed`` or ``failed`` with the one-line error), prints the summary table,
and gives the command its exit status: a bad configuration stops before training with one line and
exit 1; a multirun whose jobs failed exits 2 after running the others (``attnlab.cli.sweep``).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from attnlab.cli.errors import one_line, run_cli
from attnlab.config import CONF_DIR
from attnlab.rundir import RunDir

log = logging.getLogger("attnlab")
SUMMARY = (
    "test/bleu",
    "test/chrf",
    "test_long/bleu",
    "test_long/chrf",
    "val/bleu",
    "val/loss",
    "test/aer",
    "test/entropy/cross",
    "test/decode_tokens_per_s",
    "test/bleu_pruned_40",
    "train/tokens_per_s",
    "train/padding_fraction",
    "train/world_size",
    "params",
    "peak_mem_mb",
    "wall_s",
)


def print_summary(metrics: dict[str, float], run_dir: RunDir) -> None:
    """The headline metrics as a table, then where the run directory is."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="attnlab run")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in SUMMARY:
        if key in metrics:
            table.add_row(key, f"{metrics[key]:,.2f}")
    Console().print(table)
    print(f"run dir: {run_dir.path}\nresults: {run_dir.results}")


@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from attnlab.training.distributed import global_rank, writes_results
    from attnlab.training.loggers import finish_wandb
    from attnlab.training.run import Job, train

    hc = HydraConfig.get()
    run_dir = RunDir(hc.runtime.output_dir)
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra") and v is not None}
    sweep = Path(hc.sweep.dir).name if hc.mode == RunMode.MULTIRUN else None
    status, error, metrics, signature = "failed", None, {}, None
    started = time.time()
    try:
        metrics, signature = train(cfg, Job(run_dir.path, choices, sweep))
        status = "completed"
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then reported in one line
        error = one_line(err)
        log.debug("run failed", exc_info=True)
    finally:
        finish_wandb(failed=status != "completed")
        rank = global_rank()
        if rank and error:
            error = f"rank {rank}: {error}"
        if writes_results(rank, status == "failed", run_dir.path, since=started):
            run_dir.write_results(
                status=status,
                error=error,
                choices=choices,
                overrides=list(hc.overrides.task),
                seed=cfg.seed,
                metrics=metrics,
                sacrebleu=signature,
            )
    if status == "failed":
        if hc.mode == RunMode.MULTIRUN:
            log.error("job %s failed: %s", hc.job.num, error)
            return None
        # exit here, not by raising: Hydra would print its own extra line for an exception
        print(f"attnlab-train: error: {error} (run dir: {run_dir.path})", file=sys.stderr)
        sys.exit(1)
    if rank:  # another DDP rank of this job: rank 0 reports
        return None
    if not cfg.quiet:
        print_summary(metrics, run_dir)
    return metrics.get("val/bleu")


def cli() -> None:
    """Console entry point ``attnlab-train``: errors become one line on stderr (exit 1 or 2)."""
    from attnlab.cli.sweep import raise_if_failed

    def main_then_sweep_status() -> None:
        main()
        raise_if_failed()  # a multirun with failed jobs exits non-zero (see attnlab.cli.sweep)

    run_cli(main_then_sweep_status, "attnlab-train")


if __name__ == "__main__":
    cli()
