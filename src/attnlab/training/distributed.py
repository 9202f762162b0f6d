"""Lightning DDP inside a Hydra job: the other ranks run exactly this job, in its folder, and leave no trace.

With ``strategy: ddp`` (``conf/trainer/ddp.yaml``) Lightning's subprocess launcher starts local ranks
1 … N-1 from rank 0 at the first ``trainer.fit``. Under Hydra it builds their command with
``_hydra_subprocess_cmd`` (``lightning/fabric/strategies/launchers/subprocess_script.py``, imported by
name into ``lightning.pytorch.strategies.launchers.subprocess_script``)::

    python -m <__main__'s module> <sys.argv[1:]> hydra.run.dir="<hydra.run.dir>" \
        hydra.job.name=train_ddp_process_<r> hydra.output_subdir=null      # cwd: the original cwd

In a multirun ``sys.argv`` holds ``-m`` and every sweep value and ``hydra.run.dir`` is the *run* pattern
(``outputs/<date>/<time>``), not the job's folder, so every child would re-run the whole sweep into new
folders; under the joblib launcher ``__main__`` is joblib's worker, not ``attnlab.cli.train``. And the
launcher leaves ``LOCAL_RANK``, ``MASTER_PORT``, … and ``OMP_NUM_THREADS`` in ``os.environ`` and the
process group initialised, so the next job of a sweep in the same process would believe its processes
were started externally and train alone against a dead group.

``ddp_job`` wraps one job's fit, validate and test:

- the children's command is this job's own overrides (``hydra.overrides.task``, and the Hydra overrides
  that still mean something to a single run) run as ``python -m <module>`` with
  ``hydra.run.dir=<this job's output dir>``, no ``.hydra/`` (``hydra.output_subdir=null``) and console
  logging only (``hydra/job_logging=stdout``), so nothing but rank 0 writes into the job's folder;
- the children are watched by ``ChildWatch`` instead of Lightning's ``_ChildProcessObserver`` (which
  SIGKILLs the launching process, and with it a whole sweep, as soon as a child fails): when one fails
  (it records its error in ``results.json``, see ``attnlab.cli.train``) the others are stopped; rank 0,
  which then fails on the broken process group and keeps that record, has ``grace_s`` to leave the job
  before it is killed (only a rank stuck in an NCCL collective needs that);
- when rank 0 fails, the children are killed (they would wait in a collective) before the error goes on;
- at the end every rank meets at a barrier, the process group is destroyed, rank 0 waits for its
  children to exit and puts back the environment and thread count it found.

Under ``torchrun`` or SLURM (``srun``, submitit) every rank is started by the scheduler: there is nothing
to launch, only the end-of-job barrier and clean-up.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

# Set by Lightning's launcher (and ``_set_num_threads_if_needed``) in the launching process.
LAUNCH_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE", "OMP_NUM_THREADS")
# Hydra overrides that only the launching process acts on (sweeps, launchers, where and how it logs).
LAUNCHER_ONLY = (
    "hydra.mode",
    "hydra.run",
    "hydra.sweep",
    "hydra.launcher",
    "hydra/launcher",
    "hydra.sweeper",
    "hydra/sweeper",
    "hydra.job.name",
    "hydra.output_subdir",
    "hydra.job_logging",
    "hydra/job_logging",
)


def global_rank() -> int:
    """This process's global rank as Lightning knows it.

    The strategy sets it when the ``Trainer`` is built; before that it comes from ``RANK``, ``LOCAL_RANK``
    or ``SLURM_PROCID`` (0 in a single process).
    """
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    return int(getattr(rank_zero_only, "rank", 0) or 0)


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def child_overrides(task: Sequence[str], hydra: Sequence[str]) -> list[str]:
    """The overrides that reproduce one job as a single run: its task overrides (one value per swept key,
    no ``-m``) and the Hydra overrides that still apply to a single run (e.g. ``hydra.job.chdir``)."""
    kept = [o for o in hydra if not _key(o).startswith(LAUNCHER_ONLY)]
    return [*task, *kept]


def child_command(module: str, local_rank: int) -> tuple[list[str], str]:
    """(command, cwd) that starts local rank ``local_rank`` of the current Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    command = [sys.executable, "-m", module, *child_overrides(hc.overrides.task, hc.overrides.hydra)]
    command += [
        f'hydra.run.dir="{hc.runtime.output_dir}"',
        f"hydra.job.name={hc.job.name}_ddp_process_{local_rank}",
        "hydra.output_subdir=null",
        "hydra/job_logging=stdout",
    ]
    return command, hc.runtime.cwd


class ChildWatch(threading.Thread):
    """Polls the launched ranks; when one exits non-zero, stops the others and gives the launching
    process ``grace_s`` to leave the job (``done``) before killing it, as Lightning's observer does."""

    def __init__(self, procs: list, grace_s: float, poll_s: float = 0.5):
        super().__init__(daemon=True, name="attnlab-ddp-watch")
        self.procs, self.grace_s, self.poll_s = procs, grace_s, poll_s
        self.done = threading.Event()  # set when the launching process leaves the job

    def run(self) -> None:
        while not self.done.wait(self.poll_s):
            codes = [p.poll() for p in self.procs]
            if all(code == 0 for code in codes):
                return
            if any(code for code in codes):
                for p in self.procs:
                    if p.poll() is None:
                        p.kill()
                if not self.done.wait(self.grace_s):
                    os.kill(os.getpid(), signal.SIGKILL)  # stuck in a collective (NCCL): Lightning's policy
                return


@contextmanager
def _patched(obj, name: str, value) -> Iterator[None]:
    if not hasattr(obj, name):
        import lightning

        raise RuntimeError(
            f"lightning {lightning.__version__} has no {obj.__name__}.{name}: "
            "attnlab's DDP launch under Hydra needs updating for this version"
        )
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _spawns(trainer) -> bool:
    from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

    launcher = getattr(trainer.strategy, "launcher", None)
    return isinstance(launcher, _SubprocessScriptLauncher) and not (
        launcher.cluster_environment.creates_processes_externally
    )


@contextmanager
def ddp_job(trainer, module: str, grace_s: float = 60.0, exit_timeout_s: float = 120.0) -> Iterator[None]:
    """Runs the ``trainer`` calls of one Hydra job (fit, validate, test) so that DDP ranks start and end
    with it (see the module docstring). A no-op apart from the final barrier when nothing is launched.

    Args:
        trainer: the job's Lightning ``Trainer`` (any strategy).
        module: what the child ranks run as ``python -m module`` (e.g. ``attnlab.cli.train``).
        grace_s: after a child rank fails, seconds this process has to fail too before it is killed.
        exit_timeout_s: after the job, seconds to wait for the child ranks to exit before killing them.
    """
    import lightning.pytorch.strategies.launchers.subprocess_script as script

    was_initialised = _initialised()
    if not _spawns(trainer):
        yield
        _end_process_group(trainer, was_initialised)
        return
    env, threads = {k: os.environ.get(k) for k in LAUNCH_ENV}, torch.get_num_threads()
    watches: list[ChildWatch] = []

    def watch(procs: list) -> None:
        watches.append(ChildWatch(procs, grace_s))
        watches[-1].start()

    ok = False
    try:
        with _patched(script, "_hydra_subprocess_cmd", lambda rank: child_command(module, rank)):
            with _patched(script, "_launch_process_observer", watch):
                yield
        _end_process_group(trainer, was_initialised)
        ok = True
    finally:
        for w in watches:
            w.done.set()
        procs = trainer.strategy.launcher.procs
        if not ok:  # the others would wait in a collective for this rank: stop them
            for p in procs:
                if p.poll() is None:
                    p.kill()
        _wait(procs, exit_timeout_s)
        if _initialised() and not was_initialised:
            torch.distributed.destroy_process_group()
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        torch.set_num_threads(threads)


def _initialised() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _end_process_group(trainer, was_initialised: bool) -> None:
    """Every rank meets here at the end of the job; then the group this job opened is closed."""
    trainer.strategy.barrier("attnlab-job-end")
    if _initialised() and not was_initialised:
        torch.distributed.destroy_process_group()


def _wait(procs: list, timeout_s: float) -> None:
    import subprocess

    for p in procs:
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def writes_results(rank: int, failed: bool, run_dir: str | Path, since: float) -> bool:
    """Whether this process writes the job's ``results.json``: global rank 0 does, unless it failed after
    another rank recorded that rank's failure; another rank writes only its own failure (Lightning's
    launcher may kill rank 0 for it before rank 0 can write)."""
    if rank:
        return failed
    return not (failed and peer_failure_recorded(run_dir, since))


def peer_failure_recorded(run_dir: str | Path, since: float) -> bool:
    """Whether another rank of this job recorded its failure in ``results.json`` after ``since`` (epoch s).

    A failing child rank records its own error (``rank <r>: …``); rank 0 then fails on the broken process
    group and must not replace that record with its less telling one.
    """
    from attnlab.rundir import RunDir

    run = RunDir(run_dir)
    if not run.results.is_file() or run.results.stat().st_mtime < since:
        return False
    record = run.read_results()
    return record["status"] == "failed" and str(record["error"] or "").startswith("rank ")
