"""The run directory: every path in it, and the readers and writers of its files.

    <run dir>/
      results.json            status, choices, overrides, seed, metrics, sacreBLEU signature, env
      history.jsonl           one JSON line per validation while fitting
      hyp/<split>.txt         detokenised hypotheses, with <split>.src.txt and <split>.ref.txt line for line
      checkpoints/            best.ckpt, last.ckpt
      attention/<tag>/        attention maps (<site>_L<layer>_probe<i>.png) and entropy heat maps; tag
                              step000300 while training, test at the end
      tokenizer/              the run's tokenizer (vocab.txt or spm.model)
      head_importance.json    head pruning (diagnostics.head_pruning)
      eval/                   what attnlab-eval writes by default
      wandb/, csv/            the loggers' own files
      .hydra/                 the composed config and the overrides (Hydra's)

The training side writes these files and ``attnlab-compare`` reads them; both go through ``RunDir``, so
no other module spells a file name. This package imports neither torch nor Lightning (reading a
hundred run directories stays fast). A sweep directory (numbered job folders and ``sweep.json``) is
``attnlab.rundir.sweep``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from attnlab.rundir.results import RESULTS, read_results, write_results

HISTORY = "history.jsonl"
HYP, CHECKPOINTS, ATTENTION, TOKENIZER, EVAL = "hyp", "checkpoints", "attention", "tokenizer", "eval"
HEAD_IMPORTANCE = "head_importance.json"
HYDRA_CONFIG, HYDRA_OVERRIDES = ".hydra/config.yaml", ".hydra/overrides.yaml"
TEST_TAG = "test"
_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """Sort key where ``job2`` < ``job10``."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(text))


def read_lines(path: Path) -> list[str]:
    """The file's lines, split on "\\n" only: a sentence may hold other Unicode line breaks."""
    text = path.read_text(encoding="utf-8")
    if not text:
        return []
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@dataclass(frozen=True)
class Hypotheses:
    """Line-aligned ``hyp/<split>.txt``, ``<split>.ref.txt`` and (when present) ``<split>.src.txt``."""

    hyps: list[str]
    refs: list[str]
    srcs: list[str] | None


class RunDir:
    """One run directory (it need not exist yet): its paths, and its files read and written.

    Args:
        path: the run directory, e.g. ``outputs/2026-11-23/10-00-00`` or a sweep's ``…/3``.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # paths ---------------------------------------------------------------------------------------------

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def tokenizer(self) -> Path:
        return self.path / TOKENIZER

    @property
    def head_importance(self) -> Path:
        return self.path / HEAD_IMPORTANCE

    @property
    def hydra_config(self) -> Path:
        return self.path / HYDRA_CONFIG

    @property
    def hydra_overrides(self) -> Path:
        return self.path / HYDRA_OVERRIDES

    def attention(self, tag: str | None = None) -> Path:
        """``attention/`` or, with a tag (``test``, ``step000300``), ``attention/<tag>/``."""
        return self.path / ATTENTION if tag is None else self.path / ATTENTION / tag

    def hypothesis_files(self, split: str) -> tuple[Path, Path, Path]:
        """(hypotheses, sources, references) of ``split``: ``hyp/<split>.txt``, ``.src.txt``, ``.ref.txt``."""
        folder = self.path / HYP
        return folder / f"{split}.txt", folder / f"{split}.src.txt", folder / f"{split}.ref.txt"

    def eval_output(self, name: str) -> Path:
        """Where ``attnlab-eval`` writes by default: ``eval/<name>/``."""
        return self.path / EVAL / name

    @classmethod
    def of_checkpoint(cls, ckpt: str | Path) -> RunDir:
        """The run directory a checkpoint ``<run dir>/checkpoints/<name>.ckpt`` belongs to."""
        return cls(Path(ckpt).resolve().parent.parent)

    # results.json ----------------------------------------------------------------------------------------

    def write_results(self, **record) -> Path:
        """Writes ``results.json`` atomically (``attnlab.rundir.results.write_results``)."""
        return write_results(self.path, **record)

    def read_results(self) -> dict:
        return read_results(self.path)

    # history.jsonl ---------------------------------------------------------------------------------------

    def start_history(self) -> None:
        """An empty ``history.jsonl``: a fit starts its own curve."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.history.write_text("")

    def append_history(self, row: dict) -> None:
        """One validation: ``{"step": 300, "epoch": 2, "val/bleu": 81.2, …}``."""
        with self.history.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def read_history(self) -> list[dict]:
        """The rows of ``history.jsonl`` ([] when the run has none)."""
        if not self.history.is_file():
            return []
        return [json.loads(line) for line in self.history.read_text().splitlines() if line.strip()]

    # hyp/ ------------------------------------------------------------------------------------------------

    def write_hypotheses(self, split: str, hyps: list[str], srcs: list[str], refs: list[str]) -> None:
        """``hyp/<split>.txt`` with its sources and references beside it, line for line."""
        if not len(hyps) == len(srcs) == len(refs):
            raise ValueError(
                f"hypotheses of {split} are not line-aligned: {len(hyps)} hypotheses, {len(srcs)} sources, "
                f"{len(refs)} references"
            )
        hyp_file, src_file, ref_file = self.hypothesis_files(split)
        hyp_file.parent.mkdir(parents=True, exist_ok=True)
        for path, lines in ((hyp_file, hyps), (src_file, srcs), (ref_file, refs)):
            write_lines(path, lines)

    def read_hypotheses(self, split: str) -> Hypotheses | None:
        """The saved hypotheses of ``split`` with their references (``None`` when either file is missing).

        Raises:
            ValueError: if the files do not have the same number of lines.
        """
        hyp_file, src_file, ref_file = self.hypothesis_files(split)
        if not (hyp_file.is_file() and ref_file.is_file()):
            return None
        hyps, refs = read_lines(hyp_file), read_lines(ref_file)
        srcs = read_lines(src_file) if src_file.is_file() else None
        if len(hyps) != len(refs) or (srcs is not None and len(srcs) != len(refs)):
            sizes = f"{len(hyps)} hypotheses, {len(refs)} references" + (
                f", {len(srcs)} sources" if srcs is not None else ""
            )
            raise ValueError(
                f"{hyp_file.parent}: {split} files are not line-aligned ({sizes}); re-run the evaluation"
            )
        return Hypotheses(hyps, refs, srcs)

    # attention/ ------------------------------------------------------------------------------------------

    def attention_maps(self, tag: str = TEST_TAG) -> dict[str, Path]:
        """``{"cross_L0_probe0": path, …}``: the PNGs drawn under ``attention/<tag>``, in natural order."""
        folder = self.attention(tag)
        if not folder.is_dir():
            return {}
        return {p.stem: p for p in sorted(folder.glob("*.png"), key=lambda p: natural_key(p.name))}

    # .hydra/ ---------------------------------------------------------------------------------------------

    def config(self):
        """``.hydra/config.yaml`` as an OmegaConf object (``None`` when missing or unreadable)."""
        from omegaconf import OmegaConf

        if not self.hydra_config.is_file():
            return None
        try:
            return OmegaConf.load(self.hydra_config)
        except Exception:  # noqa: BLE001 - an unreadable config only hides config keys
            return None

    def overrides(self) -> list[str]:
        """The command-line overrides Hydra recorded in ``.hydra/overrides.yaml`` ([] if none)."""
        import yaml

        try:
            overrides = yaml.safe_load(self.hydra_overrides.read_text())
        except (OSError, yaml.YAMLError):
            return []
        return [str(o) for o in overrides] if isinstance(overrides, list) else []


__all__ = [
    "RESULTS",
    "HISTORY",
    "HEAD_IMPORTANCE",
    "HYDRA_CONFIG",
    "TEST_TAG",
    "Hypotheses",
    "RunDir",
    "natural_key",
]
