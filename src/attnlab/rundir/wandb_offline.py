"""Reads what an offline wandb run recorded, straight from its ``run-*.wandb`` file.

Offline runs keep metrics only there (no summary file). The file is a LevelDB-style log: a 7-byte
header (``:W&B``, magic 0xBEE1, version), then 32 KiB blocks of records, each with a 7-byte header
(CRC-32C, little-endian length, type: 1 full, 2 first, 3 middle, 4 last) and a protobuf ``Record``.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path

BLOCK, HEADER = 32 * 1024, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: str | Path) -> Iterator:
    """Yields the ``wandb_internal_pb2.Record`` messages of one ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a wandb run file")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0 and length == 0:  # zero padding at the end of a block
            pos += left
            continue
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            yield wandb_internal_pb2.Record.FromString(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield wandb_internal_pb2.Record.FromString(pending + chunk)


def _assign(target: dict, item) -> None:
    """Stores an item under its key; a nested key (e.g. an image's fields) becomes nested dicts."""
    value = json.loads(item.value_json)
    if item.key:
        target[item.key] = value
        return
    *parents, last = item.nested_key
    for name in parents:
        target = target.setdefault(name, {})
    target[last] = value


def read_run(run_dir: str | Path, wait: float = 0.0) -> dict:
    """Summarises an offline run folder (``offline-run-*``): run info, config, history, summary.

    Args:
        run_dir: the ``offline-run-*`` folder.
        wait: seconds to wait for the run's exit record. wandb's core process may still be flushing
            the file for a moment after ``finish()`` returns; the exit record is written last.

    Returns:
        ``{"name", "group", "tags", "config", "history": [ {key: value} per step ], "summary",
        "exit_code"}``; values are decoded from JSON; ``exit_code`` is None while the run is unfinished.
    """
    files = sorted(Path(run_dir).glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}")
    deadline = time.monotonic() + wait
    while True:
        out = _read(files[0])
        if out["exit_code"] is not None or time.monotonic() >= deadline:
            return out
        time.sleep(0.1)


def _read(path: Path) -> dict:
    out = {
        "name": None,
        "group": None,
        "tags": [],
        "config": {},
        "history": [],
        "summary": {},
        "exit_code": None,
    }
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out.update(name=rec.run.display_name, group=rec.run.run_group, tags=list(rec.run.tags))
            for item in rec.run.config.update:
                _assign(out["config"], item)
        elif kind == "config":
            for item in rec.config.update:
                _assign(out["config"], item)
        elif kind == "history":
            row: dict = {}
            for item in rec.history.item:
                _assign(row, item)
            out["history"].append(row)
        elif kind == "summary":
            for item in rec.summary.update:
                _assign(out["summary"], item)
        elif kind == "exit":
            out["exit_code"] = rec.exit.exit_code
    return out
