"""The fixed cost of a run: what ``attnlab-train`` spends besides training, measured on 1-step runs.

    .venv/bin/python benchmarks/run_overhead.py [--repeats 3] [--jobs 3] [--profile] [--src DIR]

Two figures, each with the default diagnostics (attention maps and head statistics at test, the wandb
logger offline) and the default data (the synthetic corpus, 20,000 training pairs):

- a single 1-step run, ``attnlab-train trainer.max_steps=1``: the wall time of the whole command,
  start-up and imports included (median of ``--repeats`` runs);
- a 1-step job inside a sweep, ``attnlab-train -m trainer.max_steps=1 seed=0,1,…`` (the basic launcher
  runs the jobs one after another in one process): the time between consecutive jobs' ``results.json``,
  so the process start and imports, paid once per sweep, are left out (median over jobs 2 … n; the
  files' modification times).

With ``--profile`` a single run also goes through cProfile and the stages' cumulative seconds are
printed (the profiler slows Python-heavy stages, so read them as shares, not times). ``--src`` runs
another checkout's code (its ``src`` folder, e.g. a ``git worktree`` of an older commit) with this
interpreter, to compare before and after on one machine in one session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = (  # (label, the substrings of a row of cProfile's listing that name the function)
    ("imports of the training code", ("training/run.py:1(<module>)",)),
    ("corpus", ("synthetic/__init__.py", "(generate)")),
    ("wandb start", ("(wandb_logger)",)),
    ("fit (1 step)", ("lightning/pytorch/trainer/trainer.py", "(fit)")),
    ("test (decode, maps, statistics)", ("(_test_impl)",)),
    ("attention maps", ("attention_maps.py", "(draw)")),
    ("attention statistics", ("attention_stats.py", "(on_test_epoch_end)")),
)


def command(src: Path | None, *args: str) -> tuple[list[str], dict]:
    env = {**os.environ, "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "WANDB_SILENT": "true"}
    module = "attnlab.cli.train"
    if src is not None:
        env["PYTHONPATH"] = str(src)
        module = "attnlab.cli.train" if (src / "attnlab" / "cli" / "train.py").is_file() else "attnlab.train"
    return [sys.executable, "-m", module, *args], env


def single_run(src: Path | None, folder: Path) -> float:
    cmd, env = command(src, "trainer.max_steps=1", "quiet=true", f"hydra.run.dir={folder}")
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def sweep_jobs(src: Path | None, folder: Path, jobs: int) -> list[float]:
    seeds = ",".join(str(s) for s in range(jobs))
    sweep = ("-m", "trainer.max_steps=1", "quiet=true", f"seed={seeds}", f"hydra.sweep.dir={folder}")
    cmd, env = command(src, *sweep)
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    finished = [(folder / str(job) / "results.json").stat().st_mtime for job in range(jobs)]  # sub-second
    return [b - a for a, b in zip(finished, finished[1:])]


def profile(src: Path | None, folder: Path) -> None:
    cmd, env = command(src, "trainer.max_steps=1", "quiet=true", f"hydra.run.dir={folder}")
    out = folder.parent / "profile.out"
    profiled = [cmd[0], "-m", "cProfile", "-o", str(out), *cmd[1:]]
    subprocess.run(profiled, env=env, check=True, capture_output=True)
    import io
    import pstats

    text = io.StringIO()
    pstats.Stats(str(out), stream=text).sort_stats("cumulative").print_stats()
    rows = text.getvalue().splitlines()
    print("| stage (under cProfile) | cumulative s |\n|---|---:|")
    for label, parts in STAGES:
        found = [r for r in rows if all(p in r for p in parts) and r.strip()[:1].isdigit()]
        print(f"| {label} | {float(found[0].split()[3]):.1f} |" if found else f"| {label} | not found |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="single runs to take the median of")
    parser.add_argument("--jobs", type=int, default=3, help="jobs in the sweep (>= 2)")
    parser.add_argument("--profile", action="store_true", help="also profile one run by stage")
    parser.add_argument("--src", type=Path, help="another checkout's src/ folder to measure instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="attnlab-overhead-") as tmp:
        root = Path(tmp)
        single_run(args.src, root / "warm")  # the corpus and tokenizer caches, the page cache
        singles = [single_run(args.src, root / f"single{i}") for i in range(args.repeats)]
        gaps = sweep_jobs(args.src, root / "sweep", max(args.jobs, 2))
        print(f"code: {args.src or 'this checkout'}; load average before: {os.getloadavg()[0]:.2f}\n")
        print("| what | seconds |\n|---|---:|")
        single, job = statistics.median(singles), statistics.median(gaps)
        print(f"| a 1-step run, whole command (median of {len(singles)}) | {single:.1f} |")
        print(f"| a 1-step job inside a sweep (median of {len(gaps)}) | {job:.1f} |\n")
        if args.profile:
            profile(args.src, root / "profiled")


if __name__ == "__main__":
    main()
