"""Run directories of ``attnlab-train``, as ``attnlab-compare`` reads them.

A run dir is a folder holding ``results.json`` (files and paths: ``attnlab.rundir``); under a Hydra
multirun root they are the numbered job folders ``0/``, ``1/``, … A job folder with
``.hydra/config.yaml`` but no ``results.json`` (a job that crashed hard, or one still running) is
loaded as a failed run, so that it is listed rather than silently missing.

Keys: a run's value for ``attention/score`` or ``model.num_heads`` is looked up in its Hydra
``choices`` first, then in its command-line ``overrides``, then by dotted path in
``.hydra/config.yaml``. Values are compared as text (``as_text``: ``None`` → ``null``, ``True`` →
``true``, lists as ``[a,b]``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from attnlab.rundir import HYDRA_CONFIG, RESULTS, Hypotheses, RunDir, natural_key

NO_RESULTS = "no results.json (the job crashed or is still running)"


@dataclass
class Run:
    """One run directory: its ``results.json`` plus lazy access to the files beside it.

    Attributes:
        path: the run directory.
        name: a short name for tables, the path relative to the parent of the PATH it was found under.
        status: ``"completed"`` or ``"failed"``.
        error: the one-line error of a failed run.
        choices: Hydra's config-group choices (``attention/score`` → ``additive``).
        overrides: the command-line overrides of the job, e.g. ``["posenc=alibi", "seed=1"]``.
        seed: the run's seed (``results.json``, else ``.hydra/config.yaml``).
        metrics: final metrics; ``None`` for a value that was not finite.
        sacrebleu: the BLEU signature of the run's scores.
        env: commit, machine and versions the run was made with (``attnlab.provenance``; {} if absent).
    """

    path: Path
    name: str
    status: str
    error: str | None = None
    choices: dict[str, str] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    seed: int | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    sacrebleu: str | None = None
    env: dict = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @cached_property
    def override_values(self) -> dict[str, str]:
        """``{"posenc": "alibi", "seed": "1"}`` from the overrides (``+``, ``++`` and ``~`` stripped)."""
        return parse_overrides(self.overrides)

    @property
    def dir(self) -> RunDir:
        return RunDir(self.path)

    @cached_property
    def config(self):
        """``.hydra/config.yaml`` as an OmegaConf object (``None`` when the run has none)."""
        return self.dir.config()

    def value(self, key: str) -> str | None:
        """The value of ``key`` as text: from choices, else overrides, else the config; ``None`` if absent."""
        if key in self.choices:
            return as_text(self.choices[key])
        if key in self.override_values:
            return self.override_values[key]
        if self.config is not None and "/" not in key:
            from omegaconf import OmegaConf

            missing = object()
            try:
                found = OmegaConf.select(self.config, key, default=missing, throw_on_resolution_failure=False)
            except Exception:  # noqa: BLE001 - a key that cannot be read is a key this run lacks
                return None
            if found is not missing:
                if OmegaConf.is_config(found):
                    found = OmegaConf.to_container(found, resolve=False)
                return as_text(found)
        return None

    def metric(self, name: str) -> float | None:
        """The finite value of metric ``name``, else ``None``."""
        value = self.metrics.get(name)
        if value is None:
            return None
        value = float(value)
        return value if math.isfinite(value) else None

    def hypotheses(self, split: str) -> Hypotheses | None:
        """The saved hypotheses of ``split`` with their references (``RunDir.read_hypotheses``)."""
        return self.dir.read_hypotheses(split)

    def history(self) -> list[dict]:
        """The validation curve, one row per validation (``[]`` when the run has none or it is unreadable)."""
        try:
            return self.dir.read_history()
        except (OSError, ValueError):
            return []

    def attention_maps(self) -> dict[str, Path]:
        """``{"cross_L0_probe0": path, …}``: the attention maps drawn at test, in natural order."""
        return self.dir.attention_maps()


def as_text(value) -> str:
    """A config value as comparable text: ``None`` → ``null``, booleans lower case, lists ``[a,b]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ",".join(as_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{as_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    """``["+a.b=1", "posenc=alibi", "x=[p, q]"]`` → ``{"a.b": "1", "posenc": "alibi", "x": "[p,q]"}``."""
    values = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            continue  # "~key" deletes a key: no value to compare
        key = key.lstrip("+~").strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = re.sub(r"\s*,\s*", ",", value)
        values[key] = value
    return values


def find_run_dirs(paths: list[str | Path]) -> list[tuple[Path, Path]]:
    """Every run dir under ``paths`` as ``(run dir, the PATH it was found under)``, in natural order.

    A PATH may be a run dir, a multirun root, any folder above them, or a ``results.json`` file.

    Raises:
        ValueError: if a PATH does not exist or no run dir is found under any of them.
    """
    found: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise ValueError(f"{root}: no such file or directory; pass a run dir or a multirun root")
        if root.is_file():
            dirs = [root.parent] if root.name == RESULTS else []
        else:
            dirs = {p.parent for p in root.rglob(RESULTS)}
            dirs |= {p.parent.parent for p in root.rglob(HYDRA_CONFIG)}
            dirs = sorted(dirs, key=lambda p: natural_key(str(p.relative_to(root))))
        for d in dirs:
            if d.resolve() not in seen:
                seen.add(d.resolve())
                found.append((d, root if root.is_dir() else root.parent))
    if not found:
        where = ", ".join(str(p) for p in paths)
        raise ValueError(
            f"no run directories (folders holding {RESULTS}) under {where}; "
            "pass attnlab-train run dirs or a multirun root such as outputs/multirun/<date>/<time>"
        )
    return found


def load_run(path: str | Path, root: str | Path | None = None) -> Run:
    """Reads one run dir; an unreadable or missing ``results.json`` gives a failed run, never an error."""
    path = Path(path)
    root = Path(root) if root is not None else path
    try:
        name = str(path.resolve().relative_to(root.resolve().parent))
    except ValueError:
        name = str(path)
    run_dir = RunDir(path)
    if not run_dir.results.is_file():
        run = Run(path, name, "failed", NO_RESULTS)
    else:
        try:
            record = run_dir.read_results()
            run = Run(
                path,
                name,
                "completed" if record.get("status") == "completed" else "failed",
                record.get("error"),
                {k: v for k, v in (record.get("choices") or {}).items() if v is not None},
                [str(o) for o in record.get("overrides") or []],
                record.get("seed"),
                dict(record.get("metrics") or {}),
                record.get("sacrebleu"),
                dict(record.get("env") or {}),
            )
        except (OSError, ValueError, AttributeError, TypeError) as err:
            run = Run(path, name, "failed", f"unreadable {RESULTS}: {err}")
    if run.status == "failed" and not run.error:
        run.error = "failed (no error recorded)"
    if not run.overrides:
        run.overrides = run_dir.overrides()
    if run.seed is None:
        seed = run.value("seed")
        run.seed = int(seed) if seed is not None and seed.lstrip("-").isdigit() else None
    return run


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Every run under ``paths`` (completed and failed), in the order they were found.

    Raises:
        ValueError: if a path does not exist or holds no run dir.
    """
    return [load_run(path, root) for path, root in find_run_dirs(paths)]


def available_keys(runs: list[Run]) -> list[str]:
    """The choice and override keys of ``runs`` (what ``--by`` takes besides dotted config paths)."""
    keys = {k for run in runs for k in run.choices} | {k for run in runs for k in run.override_values}
    return sorted(k for k in keys if not k.startswith("hydra"))


def default_by(runs: list[Run]) -> list[str]:
    """Override keys whose values differ between runs, but ``seed`` and ``hydra.*``, in first-seen order."""
    keys: list[str] = []
    for run in runs:
        for key in run.override_values:
            if key not in keys and key != "seed" and not key.startswith("hydra"):
                keys.append(key)
    return [key for key in keys if len({run.value(key) for run in runs}) > 1]
