"""A cache of things that are slow to make and fully determined by their inputs (a trained SentencePiece
model, a generated corpus), shared by runs and sweeps: ``$ATTNLAB_CACHE`` (default ``~/.cache/attnlab``).

A file is named by a SHA-256 digest of everything that determines it, so a change to any input makes
(and keeps) a new file rather than reusing a stale one. Files are written through a temporary file and
a rename, so runs side by side (a joblib sweep) never read a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def digest(settings: dict, lines: Iterable[str] = ()) -> str:
    """20 hex digits of SHA-256 over ``settings`` (JSON, sorted keys) and then every line of ``lines``."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for line in lines:
        h.update(line.encode())
        h.update(b"\n")
    return h.hexdigest()[:20]


def write_atomically(path: Path, data: bytes) -> None:
    """Writes via a temporary file and a rename, so parallel runs never read a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
